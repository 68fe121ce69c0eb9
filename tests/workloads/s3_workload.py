"""Reads objects from an S3 endpoint with boto3 and s3fs, and says which requests each made.

Usage: s3_workload.py ENDPOINT CA_FILE   (CA_FILE "" for plain http)

Puts OBJECTS into a bucket, reads ranges of one with boto3's get_object (in fetch_ranges),
lists the bucket, uploads one object in two parts, looks at it and at one that is missing (a
404) and deletes it (in upload_in_parts), then lists and reads one whole with s3fs (in
read_with_s3fs). Every request the clients send is noted through botocore's hooks, the
clients' own account: the operation (before-call), the method, path and Range header
(before-send), the phase, and the answer's status and request id (after-call). Prints one
JSON object: {"pid", "requests": [[method, path, range or null, phase, operation, status,
request id or null], ...], "bytes": {phase: bytes the application got}}.
"""

from __future__ import annotations

import json
import os
import sys
from urllib.parse import urlsplit

BUCKET = "training"
OBJECTS = {"shards/shard-0000.tar": 300_000, "shards/shard-0001.tar": 1_500_000, "meta/index.json": 2_000}
RANGES = ((0, 99_999), (100_000, 100_511), (250_000, 299_999))
PART = 5 << 20  # S3's least size of a multipart upload's part (but the last)
requests: list[list] = []
phase = ["setup"]
operation = [None]


def _calling(model, **_) -> None:
    """botocore's before-call: the operation whose requests follow."""
    operation[0] = model.name


def _note(request, **_) -> None:
    """botocore's before-send: the request as the client sends it."""
    value = request.headers.get("Range")
    if isinstance(value, bytes):
        value = value.decode()
    requests.append([request.method, urlsplit(request.url).path, value, phase[0], operation[0]])


def _answered(http_response, **_) -> None:
    """botocore's after-call: the answer to the request noted last (no retries on loopback)."""
    headers = http_response.headers
    request_id = headers.get("x-amz-request-id") or headers.get("x-amzn-requestid")  # moto's is the latter
    requests[-1] += [http_response.status_code, request_id]


def _hook(client) -> None:
    client.meta.events.register("before-call.s3", _calling)
    client.meta.events.register("before-send.s3", _note)
    client.meta.events.register("after-call.s3", _answered)


def fetch_ranges(client) -> int:
    """Ranged GETs of the first shard, as a DataLoader reading samples would."""
    got = 0
    for first, last in RANGES:
        body = client.get_object(Bucket=BUCKET, Key="shards/shard-0000.tar", Range=f"bytes={first}-{last}")["Body"]
        got += len(body.read())
    return got


def upload_in_parts(client) -> None:
    """A listing, a multipart upload of two parts, a look at the object and its deletion."""
    client.list_objects_v2(Bucket=BUCKET, Prefix="shards/")
    upload = client.create_multipart_upload(Bucket=BUCKET, Key="checkpoints/step-1.pt")["UploadId"]
    parts = []
    for number, size in ((1, PART), (2, 1024)):
        tag = client.upload_part(Bucket=BUCKET, Key="checkpoints/step-1.pt", UploadId=upload, PartNumber=number,
                                 Body=os.urandom(size))["ETag"]
        parts.append({"PartNumber": number, "ETag": tag})
    client.complete_multipart_upload(Bucket=BUCKET, Key="checkpoints/step-1.pt", UploadId=upload,
                                     MultipartUpload={"Parts": parts})
    client.head_object(Bucket=BUCKET, Key="checkpoints/step-1.pt")
    try:
        client.head_object(Bucket=BUCKET, Key="checkpoints/step-2.pt")
    except client.exceptions.ClientError:
        pass  # 404: not written yet
    client.delete_object(Bucket=BUCKET, Key="checkpoints/step-1.pt")


def read_with_s3fs(endpoint: str, ca_file: str) -> int:
    """The bucket's shards listed, and the second one read whole, through s3fs (its own block fetches)."""
    import s3fs

    fs = s3fs.S3FileSystem(key="testing", secret="testing", client_kwargs={
        "endpoint_url": endpoint, "region_name": "us-east-1", "verify": ca_file or False})
    fs.s3  # noqa: B018 (makes the client, to hook it)
    _hook(fs.s3)
    fs.ls(f"{BUCKET}/shards")
    with fs.open(f"{BUCKET}/shards/shard-0001.tar", "rb", block_size=512 * 1024) as stream:
        return len(stream.read())


def main() -> None:
    endpoint, ca_file = sys.argv[1], sys.argv[2]
    import boto3

    client = boto3.client("s3", endpoint_url=endpoint, region_name="us-east-1", aws_access_key_id="testing",
                          aws_secret_access_key="testing", verify=ca_file or None)
    _hook(client)
    client.create_bucket(Bucket=BUCKET)
    for key, size in OBJECTS.items():
        client.put_object(Bucket=BUCKET, Key=key, Body=os.urandom(size))
    got = {}
    phase[0] = "boto3"
    got["boto3"] = fetch_ranges(client)
    phase[0] = "multipart"
    upload_in_parts(client)
    phase[0] = "s3fs"
    got["s3fs"] = read_with_s3fs(endpoint, ca_file)
    print(json.dumps({"pid": os.getpid(), "requests": requests, "bytes": got}), flush=True)


if __name__ == "__main__":
    sys.exit(main())
