"""The object-storage request named by the first bytes of an HTTP/1.x request, and the
status and request id of the first bytes of an answer.

The TLS and network layers copy at most HEAD_BYTES of each request a client writes (never the
payload beyond them). From those bytes this module takes the method, the Host header, the
bucket and key (S3's path style, `/bucket/key`, and its virtual-host style,
`bucket.s3.<region>.amazonaws.com/key`; Google Cloud Storage's alike), the first byte
range asked, and, for a request of S3's, its operation (ioobserve.collect.s3_operations).
Headers cut off by the copy are simply not found. Anything that is not an HTTP request line
gives None: the caller shows such a write by its socket alone.

Called once per distinct request or answer head of a batch, not per event.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from urllib.parse import unquote, urlsplit

from ioobserve.collect.s3_operations import is_s3, query_names, s3_operation
from ioobserve.data.events import HEAD_BYTES  # noqa: F401 (copied from the start of each request: its line and headers)

METHODS = frozenset({"GET", "HEAD", "PUT", "POST", "DELETE"})
_REQUEST_LINE = re.compile(rb"^([A-Z]{3,7}) (\S{1,4096}) HTTP/1\.[01]\r?$")
# A virtual-hosted bucket: a name before an S3 or GCS endpoint (the bucket may hold dots).
_VIRTUAL_HOST = re.compile(r"^(?P<bucket>[a-z0-9][a-z0-9.-]*?)\.(?:s3(?:[.-][a-z0-9-]+)*\.amazonaws\.com(?:\.cn)?"
                           r"|storage\.googleapis\.com)$")
_RANGE = re.compile(r"^bytes=(\d*)-(\d*)(?:,|$)")
_TOKEN = re.compile(rb"^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$")  # a header's name (RFC 9110)
_STATUS_LINE = re.compile(rb"^HTTP/1\.[01] ([1-5][0-9][0-9])(?: |\r?$)")
# The id a store gives each request, for its logs and its support: S3's (and its compatibles'),
# AWS's other services' (moto's S3 too), Azure's, Google Cloud Storage's upload id, and the
# common proxy header.
_REQUEST_ID_HEADERS = ("x-amz-request-id", "x-amzn-requestid", "x-ms-request-id", "x-guploader-uploadid", "x-request-id")
REQUEST_ID_CHARS = 128  # a longer id is cut: ids are short, a header is not bounded


@dataclass(frozen=True)
class ObjectRequest:
    """What one request asks of the store: `first` and `last` are the range's bytes as HTTP
    gives them (last inclusive; None where open: `bytes=100-` or a suffix `bytes=-100`)."""

    method: str
    host: str | None  # without the port; None if the Host header was not in the copied bytes
    bucket: str | None
    key: str | None  # None for a request on the bucket itself (a listing)
    first: int | None = None
    last: int | None = None
    suffix: int | None = None  # `bytes=-N`: the last N bytes
    path: str = "/"  # the target's path, without its query
    length: int | None = None  # Content-Length: the body a PUT or POST sends
    operation: str | None = None  # the S3 operation, for a request of S3's (ioobserve.collect.s3_operations)

    @property
    def asked(self) -> int | None:
        """Bytes the request asks for (a closed or suffix range) or sends (a body); None if unsaid."""
        if self.method in ("PUT", "POST"):
            return self.length
        if self.suffix is not None:
            return self.suffix
        return None if self.first is None or self.last is None else self.last - self.first + 1

    def url(self, tls: bool) -> str:
        """The object's address as the request names it: scheme, host and path (no query)."""
        return f"{'https' if tls else 'http'}://{self.host or '?'}{self.path}"

    @property
    def ranged(self) -> bool:
        """Whether the request asked for part of the object."""
        return self.first is not None or self.suffix is not None


def parse_request_head(head: bytes) -> ObjectRequest | None:
    """The request `head` (the first bytes a client wrote) names, or None if it is not an
    HTTP/1.x request of a known method."""
    lines = head.split(b"\n")
    match = _REQUEST_LINE.match(lines[0]) if len(lines) > 1 else None  # a cut request line is no request
    if match is None or match[1].decode() not in METHODS:
        return None
    headers = _headers(lines[1:])
    target = match[2].decode("latin-1")
    host = headers.get("host")
    if target.startswith(("http://", "https://")):  # absolute form (through a proxy): its own host
        parts = urlsplit(target)
        host, target = parts.netloc or host, (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
    host = _without_port(host) if host else None
    path, _, query_text = target.partition("?")
    bucket, key = _bucket_and_key(host, path)
    first, last, suffix = _range(headers.get("range"))
    # boto3 streams a PUT's body in aws-chunked encoding: its size is then the decoded length
    length = headers.get("x-amz-decoded-content-length") or headers.get("content-length", "")
    method, query = match[1].decode(), query_names(query_text)
    operation = s3_operation(method, bucket, key, query, headers) if is_s3(host, headers, query) else None
    return ObjectRequest(method, host, bucket, key, first, last, suffix, path or "/",
                         int(length) if length.isdigit() else None, operation)


@dataclass(frozen=True)
class Answer:
    """What the head of an HTTP answer says: its status and the request id the server gave."""

    status: int
    request_id: str | None


def parse_answer_head(head: bytes) -> Answer | None:
    """The answer `head` (the first bytes a client read) begins, or None if it is not an
    HTTP/1.x status line (a cut one included)."""
    lines = head.split(b"\n")
    match = _STATUS_LINE.match(lines[0]) if len(lines) > 1 else None
    if match is None:
        return None
    headers = _headers(lines[1:])
    request_id = next((headers[name] for name in _REQUEST_ID_HEADERS if headers.get(name)), None)
    return Answer(int(match[1]), request_id[:REQUEST_ID_CHARS] if request_id else None)


def _headers(lines: list[bytes]) -> dict[str, str]:
    """Whole header lines up to the blank one, by lower-case name (the last, cut, line is left out)."""
    found: dict[str, str] = {}
    for raw in lines[:-1]:  # the last piece has no newline: cut by the copy, or the blank line's remainder
        line = raw.rstrip(b"\r")
        if not line:
            break
        name, colon, value = line.partition(b":")
        if colon and _TOKEN.match(name):
            found.setdefault(name.decode().lower(), value.strip().decode("latin-1"))
    return found


def _without_port(host: str) -> str:
    """`host:port` or `[v6]:port` without the port, lower-cased."""
    host = host.strip().lower()
    if host.startswith("["):
        return host[: host.find("]") + 1] if "]" in host else host
    return host.rsplit(":", 1)[0] if host.count(":") == 1 else host


def _bucket_and_key(host: str | None, path: str) -> tuple[str | None, str | None]:
    """The bucket and key a path names on `host`: from the host in virtual-host style, else the
    path's first segment (path style, which every S3-compatible server takes)."""
    match = _VIRTUAL_HOST.match(host) if host else None
    if match:
        key = path.lstrip("/")
        return match["bucket"], unquote(key, errors="replace") if key else None
    bucket, _, key = path.lstrip("/").partition("/")
    if not bucket:
        return None, None
    return unquote(bucket, errors="replace"), unquote(key, errors="replace") if key else None


def _range(value: str | None) -> tuple[int | None, int | None, int | None]:
    """(first, last, suffix) of a Range header's first range; all None without one or if malformed."""
    match = _RANGE.match(value.strip()) if value else None
    if match is None or not (match[1] or match[2]):
        return None, None, None
    if not match[1]:
        return None, None, int(match[2])
    first, last = int(match[1]), int(match[2]) if match[2] else None
    if last is not None and last < first:
        return None, None, None
    return first, last, None
