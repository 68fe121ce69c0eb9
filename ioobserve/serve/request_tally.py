"""serve's HTTP requests by job, operation and answer status, counted from the heads the kernel
copies (ioobserve.data.decode.HeadRecord): serve's aggregation lets no event out of the kernel,
but each request's head and its answer's head come up all the same, with their process, cgroup
and connection.

A request's head opens it on its (pid, connection); the next answer head there with a final
status (200 and up: a `100 Continue` is not the answer) counts it under that status. A request
still open when another starts on its connection, or when its process is gone, counts under
"none": no answer's head was seen (the connection failed, or the answer's first read did not
begin it). The operation is S3's (GetObject, UploadPart, ...) or the method; never the key.
One Python step per head: a head is a request, not a call.
"""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Callable

from prometheus_client.core import CounterMetricFamily

from ioobserve.collect.object_requests import parse_answer_head, parse_request_head
from ioobserve.data.decode import HeadRecord
from ioobserve.sinks.base import Sink

NO_ANSWER = "none"
MAX_OPEN = 65_536  # requests awaiting an answer kept at most; past it the oldest count as unanswered


class RequestTally(Sink):
    """The requests counted since the last `taken()`, per (cgroup id, operation, status); fed
    by the collector's worker, taken by the scrapes' thread."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._open: dict[tuple[int, int], tuple[int, str]] = {}  # (pid, connection) -> (cgroup id, operation)
        self._counts: Counter[tuple[int, str, str]] = Counter()

    def heads(self, heads: list[HeadRecord]) -> None:
        """Open the requests these heads start; count those their answers end."""
        with self._lock:
            for head in heads:
                key = (head.pid, head.conn)
                if head.data.startswith(b"HTTP/"):
                    answer = parse_answer_head(head.data)
                    if answer is not None and answer.status >= 200 and key in self._open:
                        self._counts[(*self._open.pop(key), str(answer.status))] += 1
                    continue
                request = parse_request_head(head.data)
                if request is None:
                    continue
                self._unanswered(self._open.pop(key, None))
                self._open[key] = (head.cgroup_id, request.operation or request.method)
            while len(self._open) > MAX_OPEN:  # dicts keep insertion order: the oldest first
                self._unanswered(self._open.pop(next(iter(self._open))))

    def forget(self, pids: list[int]) -> None:
        """Requests of processes long gone were never answered."""
        gone = set(pids)
        with self._lock:
            for key in [key for key in self._open if key[0] in gone]:
                self._unanswered(self._open.pop(key))

    def taken(self) -> Counter[tuple[int, str, str]]:
        """The counts since the last call, which start again from nothing."""
        with self._lock:
            counts, self._counts = self._counts, Counter()
        return counts

    def _unanswered(self, request: tuple[int, str] | None) -> None:
        if request is not None:
            self._counts[(*request, NO_ANSWER)] += 1


class RequestCounts:
    """The tally's counts summed per (job, operation, status) since serve started, as a family."""

    def __init__(self, tally: RequestTally) -> None:
        self.tally = tally
        self._totals: Counter[tuple[str, str, str]] = Counter()

    def family(self, node: str, jobs_of: Callable[[set[int]], dict[int, str]]) -> CounterMetricFamily:
        """ioobserve_http_requests: the totals, with what came since the last scrape; `jobs_of`
        names cgroup ids (those it cannot name count under the job "")."""
        taken = self.tally.taken()
        jobs = jobs_of({cgroup_id for cgroup_id, _, _ in taken})
        for (cgroup_id, operation, status), count in taken.items():
            self._totals[(jobs.get(cgroup_id, ""), operation, status)] += count
        family = CounterMetricFamily(
            "ioobserve_http_requests", "HTTP requests of the net and TLS layers (object storage), by job, operation "
            "(S3's, else the method) and the answer's status (none: no answer's head was seen).",
            labels=["node", "job", "operation", "status"])
        for (job, operation, status), count in sorted(self._totals.items()):
            family.add_metric([node, job, operation, status], count)
        return family
