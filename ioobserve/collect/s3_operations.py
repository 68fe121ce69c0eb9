"""Which S3 operation a request is (GetObject, UploadPart, ListObjectsV2, ...), from its
method, whether it names a bucket and a key, its query's sub-resources and one header, as
S3's REST API routes them; and whether a request is S3's at all: signed by one of AWS's
schemes, carrying x-amz- headers, or sent to an S3 endpoint. What it names are the names of
ioobserve.data.events.S3_OPERATIONS (a bucket's sub-resource not listed here is named by its
level: GetBucketSubresource, ...); a request S3's API has no operation for is None (its event
keeps its method)."""

from __future__ import annotations

from urllib.parse import parse_qsl

_SIGNED_QUERY = frozenset({"x-amz-algorithm", "x-amz-signature", "awsaccesskeyid"})  # presigned URLs
_OBJECT_SUBRESOURCES = {("GET", "tagging"): "GetObjectTagging", ("PUT", "tagging"): "PutObjectTagging",
                        ("DELETE", "tagging"): "DeleteObjectTagging", ("GET", "acl"): "GetObjectAcl",
                        ("PUT", "acl"): "PutObjectAcl", ("GET", "attributes"): "GetObjectAttributes",
                        ("POST", "restore"): "RestoreObject", ("POST", "select"): "SelectObjectContent"}


def query_names(query: str) -> dict[str, str]:
    """A query's parameters by lower-case name (`?uploads` gives {"uploads": ""})."""
    return {name.lower(): value for name, value in parse_qsl(query, keep_blank_values=True)}


def is_s3(host: str | None, headers: dict[str, str], query: dict[str, str]) -> bool:
    """Whether a request is S3's: an AWS signature (header or presigned query), an x-amz- header,
    or an amazonaws.com host (S3-compatible servers take the same signatures: MinIO, Ceph, moto)."""
    authorization = headers.get("authorization", "")
    return (authorization.startswith(("AWS4-HMAC-SHA256", "AWS "))
            or any(name.startswith("x-amz-") for name in headers)
            or not _SIGNED_QUERY.isdisjoint(query)
            or (host or "").endswith((".amazonaws.com", ".amazonaws.com.cn")))


def s3_operation(method: str, bucket: str | None, key: str | None, query: dict[str, str],
                 headers: dict[str, str]) -> str | None:
    """The S3 operation of a request on `bucket` and `key` (either None where the path names none)."""
    if bucket is None:
        return "ListBuckets" if method == "GET" else None
    if key is None:
        return _bucket_operation(method, query)
    for name in query:
        if (method, name) in _OBJECT_SUBRESOURCES:
            return _OBJECT_SUBRESOURCES[method, name]
    copy = "x-amz-copy-source" in headers
    if "uploadid" in query:
        if method == "PUT":
            return "UploadPartCopy" if copy else "UploadPart"
        return {"GET": "ListParts", "POST": "CompleteMultipartUpload", "DELETE": "AbortMultipartUpload"}.get(method)
    if method == "POST" and "uploads" in query:
        return "CreateMultipartUpload"
    return {"GET": "GetObject", "HEAD": "HeadObject", "PUT": "CopyObject" if copy else "PutObject",
            "DELETE": "DeleteObject", "POST": "PostObject"}[method]


def _bucket_operation(method: str, query: dict[str, str]) -> str | None:
    """The operation of a request on a bucket itself."""
    if method == "GET":
        if query.get("list-type") == "2":
            return "ListObjectsV2"
        for name, operation in (("uploads", "ListMultipartUploads"), ("versions", "ListObjectVersions"),
                                ("location", "GetBucketLocation")):
            if name in query:
                return operation
        listing = {"prefix", "delimiter", "marker", "max-keys", "encoding-type"}
        return "ListObjects" if not query or set(query) <= listing else "GetBucketSubresource"
    if method == "POST" and "delete" in query:
        return "DeleteObjects"
    if method == "POST":
        return "PostObject"  # a browser form's upload
    if query:
        return {"PUT": "PutBucketSubresource", "DELETE": "DeleteBucketSubresource"}.get(method)
    return {"HEAD": "HeadBucket", "PUT": "CreateBucket", "DELETE": "DeleteBucket"}[method]
