"""One OTLP/HTTP signal's export: a bounded queue and a thread that posts batches.

The drain thread hands records over (``put``) and returns at once; the export thread
encodes and posts them. Nothing here can hold up the host or cvdiag's log sink: a queue
over its bound drops its oldest records, a collector that is down, slow or refusing
costs this thread's time only. Every record is accounted for: handed = exported +
dropped (queue full, collector unreachable, rejected) + pending.
"""

from __future__ import annotations

import contextlib
import http.client
import threading
import time
import urllib.parse
from collections import deque
from collections.abc import Callable, Sequence
from typing import Any

from cvdiag.write._otlp_config import JSON, Target

#: Records per request (the SDK's batch processors default to 512).
BATCH = 512
#: Records waiting at most; past it the oldest are dropped (``dropped_queue_full``).
DEFAULT_QUEUE = 20_000
#: A batch the collector answers 429/502/503/504 for is retried this often, then dropped.
RETRIES = 3
#: Longest wait before a retry, whatever ``Retry-After`` asks.
RETRY_WAIT_MAX_S = 5.0
#: Response bytes read at most (a partial-success message or an error text).
RESPONSE_MAX = 64 * 1024
_RETRYABLE = frozenset({429, 502, 503, 504})


class Counts:
    """Records of one signal: handed over, exported, dropped and why."""

    __slots__ = ("dropped_queue_full", "dropped_rejected", "dropped_unreachable", "exported", "handed", "retries")

    def __init__(self) -> None:
        self.handed = self.exported = self.retries = 0
        self.dropped_queue_full = self.dropped_unreachable = self.dropped_rejected = 0

    @property
    def dropped(self) -> int:
        return self.dropped_queue_full + self.dropped_unreachable + self.dropped_rejected


class Exporter:
    """Posts one signal's records to its endpoint from a daemon thread of its own."""

    def __init__(
        self,
        target: Target,
        encode: Callable[[Sequence[Any], bool], bytes],
        queue_size: int = DEFAULT_QUEUE,
        on_problem: Callable[[str], None] | None = None,
    ) -> None:
        self.target = target
        self.counts = Counts()
        self._encode = encode
        self._json = target.protocol == JSON
        self._queue: deque[Any] = deque()
        self._queue_size = queue_size
        self._lock = threading.Lock()
        self._wake = threading.Event()
        self._idle = threading.Event()
        self._idle.set()
        self._on_problem = on_problem or (lambda _line: None)
        self._told: set[str] = set()
        self._conn: http.client.HTTPConnection | None = None
        self._in_flight = 0
        #: CPU of this exporter's thread (encoding and posting), and the records it covers.
        self.cpu_ns = 0
        self.cpu_records = 0
        parts = urllib.parse.urlsplit(target.url or "http://localhost")
        self._https = parts.scheme == "https"
        self._host = parts.hostname or "localhost"
        self._port = parts.port
        self._path = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
        self._headers = {
            **target.headers,
            "Content-Type": "application/json" if self._json else "application/x-protobuf",
            "User-Agent": "cvdiag-otlp",
        }
        self._thread = threading.Thread(target=self._run, name=f"cvdiag-otlp-{target.signal}", daemon=True)
        self._thread.start()

    @property
    def pending(self) -> int:
        """Records queued or being sent now."""
        return len(self._queue) + self._in_flight

    def put(self, records: Sequence[Any]) -> None:
        """Queue records without blocking; drop (and count) the oldest past the bound."""
        if not records:
            return
        with self._lock:
            self.counts.handed += len(records)
            queue = self._queue
            queue.extend(records)
            over = len(queue) - self._queue_size
            for _ in range(max(0, over)):
                queue.popleft()
            if over > 0:
                self.counts.dropped_queue_full += over
        self._idle.clear()
        self._wake.set()

    def flush(self, timeout: float) -> bool:
        """Wait until everything queued was exported or dropped; False on timeout."""
        deadline = time.monotonic() + timeout
        while self._queue or not self._idle.is_set():
            self._wake.set()
            left = deadline - time.monotonic()
            if left <= 0:
                return False
            self._idle.wait(min(0.05, left))
        return True

    def _run(self) -> None:
        while True:
            self._wake.wait()
            self._wake.clear()
            while True:
                with self._lock:
                    batch = [self._queue.popleft() for _ in range(min(BATCH, len(self._queue)))]
                    self._in_flight = len(batch)
                if not batch:
                    break
                started = time.thread_time_ns()
                try:
                    self._send(batch)
                except Exception as exc:  # never let the thread die: count the batch as undeliverable
                    self.counts.dropped_unreachable += len(batch)
                    self._tell("error", f"cvdiag: OTLP {self.target.signal} export failed: {type(exc).__name__}: {exc}")
                finally:
                    self._in_flight = 0
                    self.cpu_ns += time.thread_time_ns() - started
                    self.cpu_records += len(batch)
            self._idle.set()
            if self._queue:
                self._idle.clear()
                self._wake.set()

    def _send(self, batch: list[Any]) -> None:
        body = self._encode(batch, self._json)
        for attempt in range(RETRIES + 1):
            status, wait, text = self._post(body)
            if status is not None and 200 <= status < 300:
                rejected = _rejected(text, self._json, self.target.signal)
                self.counts.dropped_rejected += min(rejected, len(batch))
                self.counts.exported += len(batch) - min(rejected, len(batch))
                if rejected:
                    self._tell(
                        "partial", f"cvdiag: the OTLP collector rejected {rejected} {self.target.signal} record(s)"
                    )
                return
            if status is not None and status not in _RETRYABLE:
                self.counts.dropped_rejected += len(batch)
                self._tell(
                    f"http{status}",
                    f"cvdiag: the OTLP collector at {self.target.url} answered {status} to {self.target.signal}; "
                    f"those records are dropped (counted in cvdiag.stats())",
                )
                return
            if attempt == RETRIES:
                break
            self.counts.retries += 1
            time.sleep(min(RETRY_WAIT_MAX_S, wait if wait is not None else 0.25 * 2**attempt))
        self.counts.dropped_unreachable += len(batch)
        self._tell(
            "down",
            f"cvdiag: the OTLP collector at {self.target.url} cannot take {self.target.signal} "
            f"({'no answer' if status is None else f'HTTP {status}'}); "
            "records are dropped and counted in cvdiag.stats()",
        )

    def _post(self, body: bytes) -> tuple[int | None, float | None, bytes]:
        """(status or None when no answer came, Retry-After in seconds, response bytes)."""
        try:
            conn = self._conn
            if conn is None:
                kind = http.client.HTTPSConnection if self._https else http.client.HTTPConnection
                conn = self._conn = kind(self._host, self._port, timeout=self.target.timeout_s)
            conn.request("POST", self._path, body=body, headers=self._headers)
            response = conn.getresponse()
            text = response.read(RESPONSE_MAX)
            if response.length or response.will_close:  # more than we read: this connection cannot be reused
                self._close()
            return response.status, _retry_after(response.getheader("retry-after")), text
        except (OSError, http.client.HTTPException):
            self._close()
            return None, None, b""

    def _close(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            with contextlib.suppress(OSError):
                conn.close()

    def _tell(self, kind: str, line: str) -> None:
        """One line per kind of trouble per process: the counts say how often."""
        if kind not in self._told:
            self._told.add(kind)
            self._on_problem(line)


def _retry_after(raw: str | None) -> float | None:
    if not raw:
        return None
    try:
        return max(0.0, float(raw.strip()))
    except ValueError:
        return None


def _rejected(text: bytes, json: bool, signal: str) -> int:
    """Records a 2xx answer's partial success names as rejected (0 when none or unreadable)."""
    if not text:
        return 0
    if json:
        import orjson

        try:
            partial = orjson.loads(text).get("partialSuccess") or {}
            return int(partial.get("rejectedLogRecords" if signal == "logs" else "rejectedSpans") or 0)
        except (ValueError, TypeError, AttributeError):
            return 0
    return _pb_rejected(text)


def _pb_rejected(data: bytes) -> int:
    """``partial_success`` (field 1) ``rejected_*`` (its field 1, a varint) of an
    ``Export*ServiceResponse``, read without opentelemetry-proto."""
    inner = _pb_field(data, 1)
    if inner is None:
        return 0
    value = _pb_varint_field(inner, 1)
    return value or 0


def _read_varint(data: bytes, i: int) -> tuple[int, int]:
    shift = result = 0
    while i < len(data):
        b = data[i]
        i += 1
        result |= (b & 0x7F) << shift
        if not b & 0x80:
            return result, i
        shift += 7
        if shift > 63:
            break
    raise ValueError("bad varint")


def _skip(data: bytes, i: int, wire: int) -> int:
    if wire == 0:
        return _read_varint(data, i)[1]
    if wire == 1:
        return i + 8
    if wire == 2:
        n, i = _read_varint(data, i)
        return i + n
    if wire == 5:
        return i + 4
    raise ValueError("bad wire type")


def _pb_field(data: bytes, number: int) -> bytes | None:
    i = 0
    try:
        while i < len(data):
            key, i = _read_varint(data, i)
            if key >> 3 == number and key & 7 == 2:
                n, i = _read_varint(data, i)
                return data[i : i + n]
            i = _skip(data, i, key & 7)
    except ValueError:
        return None
    return None


def _pb_varint_field(data: bytes, number: int) -> int | None:
    i = 0
    try:
        while i < len(data):
            key, i = _read_varint(data, i)
            if key >> 3 == number and key & 7 == 0:
                return _read_varint(data, i)[0]
            i = _skip(data, i, key & 7)
    except ValueError:
        return None
    return None
