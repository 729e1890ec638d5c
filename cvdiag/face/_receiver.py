"""An OTLP/HTTP receiver on 127.0.0.1: what agents run as processes export, kept in a file.

Coding agents driven as subprocesses (the Codex CLI, Claude Code) export their own OTLP
logs and spans, tagged with the test's ``test.id`` from ``OTEL_RESOURCE_ATTRIBUTES``.
This accepts ``POST /v1/logs`` and ``/v1/traces`` (protobuf through opentelemetry-proto
when it is installed, and JSON; gzip too) and appends each request as one line of the
OpenTelemetry Collector's file exporter format (``{"resourceLogs": ...}`` or
``{"resourceSpans": ...}``), which ``cvdiag tests FILE`` reads.

Bounded and never blocking: a body over ``max_body`` is refused (413) unread, at most
``max_connections`` are served at once (503 past it), a full write queue answers 503
with ``Retry-After`` rather than wait, a slow sender is cut off after ``timeout_s``.
Every request is counted: written, refused and why.
"""

from __future__ import annotations

import argparse
import base64
import contextlib
import gzip
import http.server
import os
import queue
import signal
import sys
import threading
import zlib
from collections.abc import Sequence
from typing import Any

import orjson

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 4318
#: Largest request body taken, compressed or not (the Collector's default is 20 MiB).
DEFAULT_MAX_BODY = 16 * 1024 * 1024
#: Requests waiting to be written at most; past it the sender is told to retry.
DEFAULT_QUEUE = 256
DEFAULT_MAX_CONNECTIONS = 32
DEFAULT_TIMEOUT_S = 10.0
_SIGNALS = {"/v1/logs": "resourceLogs", "/v1/traces": "resourceSpans", "/v1/metrics": "resourceMetrics"}
_ID_KEYS = frozenset({"traceId", "spanId", "parentSpanId"})


class Counts:
    """What the receiver did with each request."""

    __slots__ = ("bad_body", "busy", "ignored", "queue_full", "records", "requests", "too_big", "written")

    def __init__(self) -> None:
        self.requests = self.written = self.records = self.ignored = 0
        self.too_big = self.bad_body = self.queue_full = self.busy = 0

    def line(self) -> str:
        refused = self.too_big + self.bad_body + self.queue_full + self.busy
        return (
            f"cvdiag receive: {self.requests} requests, {self.written} written ({self.records} records), "
            f"{self.ignored} ignored (metrics), {refused} refused (too big {self.too_big}, unreadable "
            f"{self.bad_body}, queue full {self.queue_full}, too many connections {self.busy})"
        )


class BadBody(ValueError):
    """A request body that is not an OTLP export request of its path."""


def _hex_ids(node: Any) -> Any:
    """Trace and span ids from protobuf's JSON (base64) to OTLP/JSON's lowercase hex, in place."""
    if isinstance(node, dict):
        for key, value in node.items():
            if key in _ID_KEYS and isinstance(value, str):
                node[key] = base64.b64decode(value).hex()
            else:
                _hex_ids(value)
    elif isinstance(node, list):
        for item in node:
            _hex_ids(item)
    return node


def _from_protobuf(body: bytes, path: str) -> dict[str, Any]:
    try:
        from google.protobuf.json_format import MessageToDict
        from google.protobuf.message import DecodeError
        from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest
        from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import ExportMetricsServiceRequest
        from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
    except ImportError as exc:
        raise BadBody("protobuf bodies need opentelemetry-proto (pip install 'cvdiag[otel]'); send http/json") from exc
    kind = {
        "/v1/logs": ExportLogsServiceRequest,
        "/v1/traces": ExportTraceServiceRequest,
        "/v1/metrics": ExportMetricsServiceRequest,
    }[path]
    message = kind()
    try:
        message.ParseFromString(body)
    except DecodeError as exc:
        raise BadBody(f"not a protobuf {kind.__name__}") from exc
    return _hex_ids(MessageToDict(message, use_integers_for_enums=True))  # type: ignore[no-any-return]


def _from_json(body: bytes, path: str) -> dict[str, Any]:
    try:
        document = orjson.loads(body)
    except orjson.JSONDecodeError as exc:
        raise BadBody("not JSON") from exc
    key = _SIGNALS[path]
    if not isinstance(document, dict) or not isinstance(document.get(key, []), list):
        raise BadBody(f"not an OTLP/JSON export request (no {key} list)")
    return document


def _count(document: dict[str, Any], key: str) -> int:
    inner, leaf = {"resourceLogs": ("scopeLogs", "logRecords"), "resourceSpans": ("scopeSpans", "spans")}.get(
        key, ("", "")
    )
    total = 0
    for resource in document.get(key) or ():
        for scope in (resource.get(inner) or ()) if isinstance(resource, dict) else ():
            if isinstance(scope, dict):
                total += len(scope.get(leaf) or ())
    return total


def _inflate(body: bytes, encoding: str, limit: int) -> bytes:
    """A gzip or deflate body, inflated to at most ``limit`` bytes (a zip bomb is refused)."""
    if encoding in ("", "identity"):
        return body
    if encoding not in ("gzip", "deflate"):
        raise BadBody(f"content-encoding {encoding[:32]!r} is not gzip or deflate")
    inflater = zlib.decompressobj(31 if encoding == "gzip" else 15)
    try:
        out = inflater.decompress(body, limit + 1)
    except (zlib.error, gzip.BadGzipFile) as exc:
        raise BadBody(f"not {encoding}") from exc
    if len(out) > limit:
        raise BadBody(f"inflates past {limit} bytes")
    return out


class Receiver:
    """The receiver: ``start()`` serves from a thread, ``stop()`` ends it and drains the file."""

    def __init__(
        self,
        out: str | os.PathLike[str],
        *,
        host: str = DEFAULT_HOST,
        port: int = 0,
        max_body: int = DEFAULT_MAX_BODY,
        queue_size: int = DEFAULT_QUEUE,
        max_connections: int = DEFAULT_MAX_CONNECTIONS,
        timeout_s: float = DEFAULT_TIMEOUT_S,
    ) -> None:
        self.out = os.fspath(out)
        self.max_body = max_body
        self.counts = Counts()
        self._queue: queue.Queue[bytes | None] = queue.Queue(queue_size)
        self._slots = threading.BoundedSemaphore(max_connections)
        self._lock = threading.Lock()
        receiver = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            timeout = timeout_s

            def do_POST(self) -> None:
                receiver._handle(self)

            def log_message(self, format: str, *args: Any) -> None:  # quiet: counted instead
                pass

        self._server = http.server.ThreadingHTTPServer((host, port), Handler)
        self._server.daemon_threads = True
        self.host, self.port = self._server.server_address[:2]
        self._threads: list[threading.Thread] = []

    @property
    def endpoint(self) -> str:
        """The value for ``OTEL_EXPORTER_OTLP_ENDPOINT``."""
        return f"http://{self.host}:{self.port}"

    def start(self) -> Receiver:
        directory = os.path.dirname(self.out)
        if directory:
            os.makedirs(directory, exist_ok=True)
        open(self.out, "ab").close()
        for target, name in ((self._server.serve_forever, "serve"), (self._write, "write")):
            thread = threading.Thread(target=target, name=f"cvdiag-receive-{name}", daemon=True)
            thread.start()
            self._threads.append(thread)
        return self

    def stop(self, timeout: float = 5.0) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._queue.put(None)
        for thread in self._threads:
            thread.join(timeout)

    def __enter__(self) -> Receiver:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _bump(self, name: str, n: int = 1) -> None:
        with self._lock:
            setattr(self.counts, name, getattr(self.counts, name) + n)

    def _handle(self, handler: http.server.BaseHTTPRequestHandler) -> None:
        self._bump("requests")
        if not self._slots.acquire(blocking=False):
            self._bump("busy")
            _answer(handler, 503, b"too many connections", retry_after=True, close=True)
            return
        try:
            self._serve(handler)
        except Exception as exc:  # a body of an unforeseen shape: refused and counted, never a traceback
            self._bump("bad_body")
            _answer(handler, 400, f"unreadable: {type(exc).__name__}".encode(), close=True)
        finally:
            self._slots.release()

    def _serve(self, handler: http.server.BaseHTTPRequestHandler) -> None:
        path = handler.path.split("?", 1)[0]
        if path not in _SIGNALS:
            _answer(handler, 404, b"POST /v1/logs or /v1/traces", close=True)
            return
        try:
            length = int(handler.headers.get("content-length") or "-1")
        except ValueError:
            length = -1
        if length < 0:
            self._bump("bad_body")
            _answer(handler, 411, b"a content-length is needed", close=True)
            return
        if length > self.max_body:
            self._bump("too_big")
            _answer(handler, 413, f"bodies up to {self.max_body} bytes".encode(), close=True)
            return
        try:
            body = handler.rfile.read(length)
        except OSError:  # the sender went away or stalled past the timeout
            self._bump("bad_body")
            handler.close_connection = True
            return
        if len(body) < length:  # closed mid-body
            self._bump("bad_body")
            handler.close_connection = True
            return
        json = (handler.headers.get("content-type") or "").split(";")[0].strip().lower() == "application/json"
        try:
            body = _inflate(body, (handler.headers.get("content-encoding") or "").strip().lower(), self.max_body)
            document = (_from_json if json else _from_protobuf)(body, path)
        except BadBody as exc:
            self._bump("bad_body")
            _answer(handler, 400, str(exc).encode())
            return
        key = _SIGNALS[path]
        if key == "resourceMetrics":
            self._bump("ignored")
        elif document.get(key):
            records = _count(document, key)
            try:
                self._queue.put_nowait(orjson.dumps({key: document[key]}))
            except queue.Full:
                self._bump("queue_full")
                _answer(handler, 503, b"busy writing", retry_after=True)
                return
            self._bump("records", records)
        _answer(handler, 200, b"{}" if json else b"", content_type="application/json" if json else None)

    def _write(self) -> None:
        with open(self.out, "ab") as f:
            while True:
                line = self._queue.get()
                if line is None:
                    return
                try:
                    f.write(line + b"\n")
                    if self._queue.empty():
                        f.flush()
                    self._bump("written")
                except OSError:
                    self._bump("bad_body")


def _answer(
    handler: http.server.BaseHTTPRequestHandler,
    status: int,
    body: bytes,
    *,
    retry_after: bool = False,
    close: bool = False,
    content_type: str | None = None,
) -> None:
    with contextlib.suppress(OSError):
        handler.send_response(status)
        handler.send_header(
            "Content-Type", content_type or ("application/x-protobuf" if status == 200 else "text/plain")
        )
        handler.send_header("Content-Length", str(len(body)))
        if retry_after:
            handler.send_header("Retry-After", "1")
        if close:
            handler.send_header("Connection", "close")
            handler.close_connection = True
        handler.end_headers()
        handler.wfile.write(body)


def main(argv: Sequence[str]) -> int:
    """``cvdiag receive``: serve until interrupted, then say what was received."""
    parser = argparse.ArgumentParser(
        prog="cvdiag receive",
        description="Receive OTLP/HTTP logs and traces on 127.0.0.1 and append them to FILE "
        "(the OpenTelemetry Collector's file format), for `cvdiag tests FILE`.",
    )
    parser.add_argument("--port", type=int, default=DEFAULT_PORT, help=f"port (default {DEFAULT_PORT}; 0 picks one)")
    parser.add_argument("--out", required=True, metavar="FILE", help="the file to append to")
    parser.add_argument("--host", default=DEFAULT_HOST, help=f"address to listen on (default {DEFAULT_HOST})")
    parser.add_argument("--max-body", type=int, default=DEFAULT_MAX_BODY, metavar="BYTES", help="largest body taken")
    try:
        args = parser.parse_args(list(argv))
    except SystemExit as exc:
        return 2 if exc.code else 0
    try:
        receiver = Receiver(args.out, host=args.host, port=args.port, max_body=args.max_body).start()
    except OSError as exc:
        print(f"cvdiag receive: cannot listen on {args.host}:{args.port}: {exc.strerror or exc}", file=sys.stderr)
        return 1
    print(f"cvdiag receive: listening; export with OTEL_EXPORTER_OTLP_ENDPOINT={receiver.endpoint}", flush=True)
    stop = threading.Event()
    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, lambda *_: stop.set())
    while not stop.wait(0.5):
        pass
    receiver.stop()
    print(receiver.counts.line(), flush=True)
    return 0
