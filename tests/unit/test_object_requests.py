"""The object-storage request named by an HTTP request's first bytes (ioobserve.collect.object_requests):
the heads boto3 and s3fs write, both S3 addressing styles, ranges, heads cut by the copy, and
any bytes at all."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ioobserve.collect.object_requests import HEAD_BYTES, ObjectRequest, parse_request_head


def _head(line: str, *headers: str) -> bytes:
    return ("\r\n".join([line, *headers]) + "\r\n\r\n").encode()


def test_a_ranged_get_in_path_style_names_its_bucket_key_and_range():
    head = _head("GET /training/shards/shard-000042.tar HTTP/1.1", "Host: 127.0.0.1:5000",
                 "Accept-Encoding: identity", "Range: bytes=1048576-2097151", "User-Agent: Boto3/1.35")
    request = parse_request_head(head)
    assert request == ObjectRequest("GET", "127.0.0.1", "training", "shards/shard-000042.tar", 1048576, 2097151,
                                    path="/training/shards/shard-000042.tar")
    assert request.asked == 1048576 and request.url(tls=True) == "https://127.0.0.1/training/shards/shard-000042.tar"


def test_a_virtual_hosted_bucket_comes_from_the_host():
    head = _head("GET /shards/a.tar HTTP/1.1", "host: my.data.bucket.s3.us-west-2.amazonaws.com")
    request = parse_request_head(head)
    assert (request.bucket, request.key, request.host) == ("my.data.bucket", "shards/a.tar",
                                                           "my.data.bucket.s3.us-west-2.amazonaws.com")
    gcs = parse_request_head(_head("HEAD /x/y HTTP/1.1", "Host: images.storage.googleapis.com"))
    assert (gcs.method, gcs.bucket, gcs.key) == ("HEAD", "images", "x/y")
    # the endpoint itself, with the bucket in the path
    assert parse_request_head(_head("GET /b/k HTTP/1.1", "Host: s3.us-west-2.amazonaws.com")).bucket == "b"


def test_keys_are_decoded_and_queries_left_out():
    request = parse_request_head(_head("GET /b/dir%2Fa%20b.npy?versionId=3 HTTP/1.1", "Host: minio:9000"))
    assert (request.host, request.bucket, request.key) == ("minio", "b", "dir/a b.npy")
    listing = parse_request_head(_head("GET /b?list-type=2&prefix=shards%2F HTTP/1.1", "Host: localhost:9000"))
    assert (listing.bucket, listing.key, listing.ranged) == ("b", None, False)


def test_open_and_suffix_ranges_and_bad_ones():
    def asked(value: str) -> tuple:
        request = parse_request_head(_head("GET /b/k HTTP/1.1", f"Range: {value}"))
        return request.first, request.last, request.suffix, request.ranged

    assert asked("bytes=100-") == (100, None, None, True)
    assert asked("bytes=-500") == (None, None, 500, True)
    assert asked("bytes=0-9, 20-29") == (0, 9, None, True)  # the first of several
    for bad in ("bytes=9-0", "bytes=-", "items=0-9", "bytes=a-b"):
        assert asked(bad) == (None, None, None, False), bad


def test_a_proxy_request_takes_its_own_host():
    request = parse_request_head(_head("GET http://bucket.s3.amazonaws.com:80/k?x=1 HTTP/1.1", "Host: proxy"))
    assert (request.host, request.bucket, request.key) == ("bucket.s3.amazonaws.com", "bucket", "k")


def test_a_head_cut_by_the_copy_keeps_its_whole_lines_only():
    head = _head("GET /b/k HTTP/1.1", "Host: 10.0.0.1", "Range: bytes=0-1023")
    cut = head[: head.index(b"1023")]  # in the middle of the Range line
    assert parse_request_head(cut) == ObjectRequest("GET", "10.0.0.1", "b", "k", path="/b/k")
    no_host = head[: head.index(b"Host") + 3]
    assert parse_request_head(no_host) == ObjectRequest("GET", None, "b", "k", path="/b/k")
    assert parse_request_head(no_host).url(tls=False) == "http://?/b/k" and parse_request_head(no_host).asked is None
    assert parse_request_head(head[: head.index(b"HTTP/1.1") + 4]) is None  # the request line itself cut


def test_what_is_not_an_http_request_is_none():
    for garbled in (b"", b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03", b"GET /b/k\r\n\r\n", b"FETCH /b/k HTTP/1.1\r\n\r\n",
                    b"GET /b/k HTTP/2\r\n\r\n", b"get /b/k HTTP/1.1\r\n\r\n", b"GET  /b/k HTTP/1.1\r\n\r\n",
                    b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\n"):
        assert parse_request_head(garbled) is None, garbled


def test_a_large_upload_is_read_no_further_than_its_head():
    """A PUT of 100 MB: the body after the blank line changes nothing (the layers copy
    HEAD_BYTES at most, and the head's own bytes are all that is read)."""
    head = _head("PUT /b/big.bin HTTP/1.1", "Host: 127.0.0.1:9000", "Content-Length: 104857600")
    body = b"\x00Range: bytes=5-6\r\n" * 1000
    assert parse_request_head((head + body)[:HEAD_BYTES]) == parse_request_head(head) == ObjectRequest(
        "PUT", "127.0.0.1", "b", "big.bin", path="/b/big.bin", length=104857600)
    assert parse_request_head(head).asked == 104857600
    chunked = _head("PUT /b/c HTTP/1.1", "Transfer-Encoding: chunked", "X-Amz-Decoded-Content-Length: 3000")
    assert parse_request_head(chunked).asked == 3000  # boto3's aws-chunked upload


@given(st.binary(max_size=HEAD_BYTES))
def test_any_bytes_give_a_request_or_none(data):
    result = parse_request_head(data)
    assert result is None or isinstance(result, ObjectRequest)


@given(st.sampled_from(["GET", "HEAD", "PUT"]), st.text(alphabet="abcdefghijklmnopqrstuvwxyz0123456789-_./%", min_size=1,
                                                       max_size=80), st.binary(max_size=200))
def test_bytes_after_the_blank_line_never_change_the_request(method, path, tail):
    head = _head(f"{method} /{path} HTTP/1.1", "Host: 127.0.0.1:5000")
    assert parse_request_head(head + tail) == parse_request_head(head)


SIGNED = ("X-Amz-Date: 20261207T120000Z", "Authorization: AWS4-HMAC-SHA256 Credential=testing/20261207/us-east-1/s3/aws4_request")


@pytest.mark.parametrize("line, extra, operation", [
    ("GET /b/k.tar", (), "GetObject"),
    ("HEAD /b/k.tar", (), "HeadObject"),
    ("PUT /b/k.tar", (), "PutObject"),
    ("PUT /b/k.tar", ("x-amz-copy-source: /b/other",), "CopyObject"),
    ("DELETE /b/k.tar", (), "DeleteObject"),
    ("POST /b/ckpt.pt?uploads", (), "CreateMultipartUpload"),
    ("PUT /b/ckpt.pt?partNumber=1&uploadId=2~abc", (), "UploadPart"),
    ("PUT /b/ckpt.pt?partNumber=2&uploadId=2~abc", ("x-amz-copy-source: /b/k.tar",), "UploadPartCopy"),
    ("POST /b/ckpt.pt?uploadId=2~abc", (), "CompleteMultipartUpload"),
    ("DELETE /b/ckpt.pt?uploadId=2~abc", (), "AbortMultipartUpload"),
    ("GET /b/ckpt.pt?uploadId=2~abc", (), "ListParts"),
    ("GET /b/k.tar?tagging", (), "GetObjectTagging"),
    ("GET /b?list-type=2&prefix=shards%2F&encoding-type=url", (), "ListObjectsV2"),
    ("GET /b?prefix=shards%2F", (), "ListObjects"),
    ("GET /b", (), "ListObjects"),
    ("GET /b?uploads", (), "ListMultipartUploads"),
    ("GET /b?location", (), "GetBucketLocation"),
    ("GET /b?policy", (), "GetBucketSubresource"),
    ("HEAD /b", (), "HeadBucket"),
    ("PUT /b", (), "CreateBucket"),
    ("DELETE /b", (), "DeleteBucket"),
    ("POST /b?delete", (), "DeleteObjects"),
    ("GET /", (), "ListBuckets"),
    ("DELETE /", (), None),
])
def test_an_s3_request_is_named_by_its_operation(line, extra, operation):
    request = parse_request_head(_head(f"{line} HTTP/1.1", "Host: 127.0.0.1:5000", *extra, *SIGNED))
    assert request.operation == operation
    assert "?" not in request.path and request.bucket != ""


def test_s3_is_told_by_its_signature_headers_or_host_and_plain_http_is_not():
    plain = parse_request_head(_head("GET /b/k.tar HTTP/1.1", "Host: files.example.org"))
    assert plain.operation is None  # a web server's file: its event keeps the method
    by_host = parse_request_head(_head("GET /k.tar HTTP/1.1", "Host: b.s3.eu-west-1.amazonaws.com"))
    assert (by_host.operation, by_host.bucket, by_host.key) == ("GetObject", "b", "k.tar")
    presigned = parse_request_head(_head("GET /b/k.tar?X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Signature=ab HTTP/1.1",
                                         "Host: minio:9000"))
    assert presigned.operation == "GetObject"
    header = parse_request_head(_head("GET /b?list-type=2 HTTP/1.1", "Host: minio:9000", "x-amz-content-sha256: UNSIGNED"))
    assert header.operation == "ListObjectsV2"
    virtual_listing = parse_request_head(_head("GET /?list-type=2 HTTP/1.1", "Host: b.s3.amazonaws.com"))
    assert (virtual_listing.operation, virtual_listing.bucket, virtual_listing.key) == ("ListObjectsV2", "b", None)
    proxied = parse_request_head(_head("POST http://minio:9000/b/k?uploads HTTP/1.1", *SIGNED))
    assert (proxied.host, proxied.path, proxied.operation) == ("minio", "/b/k", "CreateMultipartUpload")
