"""Reads objects from an S3 endpoint with boto3 and s3fs, and says which requests each made.

Usage: s3_workload.py ENDPOINT CA_FILE   (CA_FILE "" for plain http)

Puts OBJECTS into a bucket, reads ranges of one with boto3's get_object (in fetch_ranges) and
one whole with s3fs's open().read() (in read_with_s3fs). Every request the clients send is
noted through botocore's before-send hook, the clients' own account: method, path, Range
header and the function that was reading. Prints one JSON object: {"pid", "requests":
[[method, path, range or null, phase], ...], "bytes": {phase: bytes the application got}}.
"""

from __future__ import annotations

import json
import os
import sys
from urllib.parse import urlsplit

BUCKET = "training"
OBJECTS = {"shards/shard-0000.tar": 300_000, "shards/shard-0001.tar": 1_500_000, "meta/index.json": 2_000}
RANGES = ((0, 99_999), (100_000, 100_511), (250_000, 299_999))
requests: list[list] = []
phase = ["setup"]


def _note(request, **_) -> None:
    """botocore's before-send: the request as the client sends it."""
    value = request.headers.get("Range")
    if isinstance(value, bytes):
        value = value.decode()
    requests.append([request.method, urlsplit(request.url).path, value, phase[0]])


def fetch_ranges(client) -> int:
    """Ranged GETs of the first shard, as a DataLoader reading samples would."""
    got = 0
    for first, last in RANGES:
        body = client.get_object(Bucket=BUCKET, Key="shards/shard-0000.tar", Range=f"bytes={first}-{last}")["Body"]
        got += len(body.read())
    return got


def read_with_s3fs(endpoint: str, ca_file: str) -> int:
    """The second shard whole, through s3fs (its own block fetches)."""
    import s3fs

    fs = s3fs.S3FileSystem(key="testing", secret="testing", client_kwargs={
        "endpoint_url": endpoint, "region_name": "us-east-1", "verify": ca_file or False})
    fs.s3  # noqa: B018 (makes the client, to hook it)
    fs.s3.meta.events.register("before-send.s3", _note)
    with fs.open(f"{BUCKET}/shards/shard-0001.tar", "rb", block_size=512 * 1024) as stream:
        return len(stream.read())


def main() -> None:
    endpoint, ca_file = sys.argv[1], sys.argv[2]
    import boto3

    client = boto3.client("s3", endpoint_url=endpoint, region_name="us-east-1", aws_access_key_id="testing",
                          aws_secret_access_key="testing", verify=ca_file or None)
    client.meta.events.register("before-send.s3", _note)
    client.create_bucket(Bucket=BUCKET)
    for key, size in OBJECTS.items():
        client.put_object(Bucket=BUCKET, Key=key, Body=os.urandom(size))
    got = {}
    phase[0] = "boto3"
    got["boto3"] = fetch_ranges(client)
    phase[0] = "s3fs"
    got["s3fs"] = read_with_s3fs(endpoint, ca_file)
    print(json.dumps({"pid": os.getpid(), "requests": requests, "bytes": got}), flush=True)


if __name__ == "__main__":
    sys.exit(main())
