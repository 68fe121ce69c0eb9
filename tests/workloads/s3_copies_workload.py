"""Reads objects from an S3 endpoint through local copies, and says what it read of each.

Usage: s3_copies_workload.py ENDPOINT CACHE_DIR

Puts two objects into a bucket. Reads three ranges of SHARD through fsspec's simplecache,
which has s3fs fetch the object whole into CACHE_DIR/simple first. Downloads INDEX with
boto3's download_file (its writer thread, a temporary name renamed into place) into
CACHE_DIR/index.bin, and reads that whole. Prints one JSON object: {"pid", "sizes": {key:
size}, "asked": {key: bytes the application asked for}, "copies": {key: the copy's path},
"buffer": the size of Python's file buffer (a read may read that much more)}.
"""

from __future__ import annotations

import io
import json
import os
import sys
from pathlib import Path

BUCKET = "training"
SHARD, INDEX = "shards/shard-0000.tar", "meta/index.bin"
SIZES = {SHARD: 4_000_000, INDEX: 1_500_000}
RANGES = ((0, 100_000), (1_000_000, 200_000), (3_500_000, 50_000))  # (offset, length) of SHARD


def read_shard(endpoint: str, cache: Path) -> tuple[int, Path]:
    """Ranges of SHARD through simplecache: the bytes asked, and the copy it read them from."""
    import fsspec

    options = {"key": "testing", "secret": "testing",
               "client_kwargs": {"endpoint_url": endpoint, "region_name": "us-east-1"}}
    asked = 0
    with fsspec.open(f"simplecache::s3://{BUCKET}/{SHARD}", "rb", s3=options,
                     simplecache={"cache_storage": str(cache / "simple")}) as stream:
        for offset, length in RANGES:
            stream.seek(offset)
            got = stream.read(length)
            assert len(got) == length, (offset, length, len(got))
            asked += length
    (copy,) = [path for path in (cache / "simple").iterdir() if not path.name.startswith("cache")]
    return asked, copy


def download_index(client, cache: Path) -> tuple[int, Path]:
    """INDEX downloaded by boto3, then read whole."""
    destination = cache / "index.bin"
    client.download_file(BUCKET, INDEX, str(destination))
    return len(destination.read_bytes()), destination


def main() -> None:
    endpoint, cache = sys.argv[1], Path(sys.argv[2])
    import boto3

    client = boto3.client("s3", endpoint_url=endpoint, region_name="us-east-1", aws_access_key_id="testing",
                          aws_secret_access_key="testing")
    client.create_bucket(Bucket=BUCKET)
    for key, size in SIZES.items():
        client.put_object(Bucket=BUCKET, Key=key, Body=os.urandom(size))
    asked, copies = {}, {}
    asked[SHARD], copies[SHARD] = read_shard(endpoint, cache)
    asked[INDEX], copies[INDEX] = download_index(client, cache)
    print(json.dumps({"pid": os.getpid(), "sizes": SIZES, "asked": asked,
                      "copies": {key: str(path) for key, path in copies.items()}, "buffer": io.DEFAULT_BUFFER_SIZE}),
          flush=True)


if __name__ == "__main__":
    sys.exit(main())
