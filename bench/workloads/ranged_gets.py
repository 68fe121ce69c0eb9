"""A loop of small ranged GETs over one kept-alive connection (http.client, as urllib3 and
boto3 use it): what a DataLoader reading samples from object storage does.

  ranged_gets.py URL REQUESTS SIZE [CA_FILE]

Prints {"requests", "us_per_request", "bytes"}: the loop's own time per request."""

from __future__ import annotations

import http.client
import json
import ssl
import sys
import time
from urllib.parse import urlsplit


def main() -> None:
    url, requests, size = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    parts = urlsplit(url)
    if parts.scheme == "https":
        context = ssl.create_default_context(cafile=sys.argv[4])
        conn = http.client.HTTPSConnection(parts.hostname, parts.port, context=context)
    else:
        conn = http.client.HTTPConnection(parts.hostname, parts.port)
    got = 0
    start = time.perf_counter()
    for index in range(requests):
        first = (index * size) % (1 << 20)
        conn.request("GET", parts.path, headers={"Range": f"bytes={first}-{first + size - 1}"})
        got += len(conn.getresponse().read())
    elapsed = time.perf_counter() - start
    conn.close()
    print(json.dumps({"requests": requests, "us_per_request": elapsed * 1e6 / requests, "bytes": got}), flush=True)


if __name__ == "__main__":
    sys.exit(main())
