"""OTLP test harness: cvdiag's own receiver on 127.0.0.1, its file read back, and
collectors that misbehave (down, slow, 429/503, closing mid-body)."""

from __future__ import annotations

import http.server
import os
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import orjson

from cvdiag.face._receiver import Receiver


def value_of(any_value: dict[str, Any]) -> Any:
    """An OTLP/JSON AnyValue as the JSON value it holds (what a reader rebuilds)."""
    if not any_value:
        return None
    (kind, value), *_ = any_value.items()
    if kind == "kvlistValue":
        return {kv["key"]: value_of(kv.get("value") or {}) for kv in value.get("values", [])}
    if kind == "arrayValue":
        return [value_of(v) for v in value.get("values", [])]
    if kind == "intValue":
        return int(value)
    return value


def documents(path: str) -> list[dict[str, Any]]:
    with open(path, "rb") as f:
        return [orjson.loads(line) for line in f if line.strip()]


def log_records(path: str) -> list[dict[str, Any]]:
    """Every log record in a receiver's file, with its resource's attributes beside it."""
    found = []
    for doc in documents(path):
        for resource in doc.get("resourceLogs", []):
            attrs = {kv["key"]: value_of(kv["value"]) for kv in resource.get("resource", {}).get("attributes", [])}
            for scope in resource.get("scopeLogs", []):
                for record in scope.get("logRecords", []):
                    found.append({**record, "_resource": attrs})
    return found


def spans(path: str) -> list[dict[str, Any]]:
    found = []
    for doc in documents(path):
        for resource in doc.get("resourceSpans", []):
            for scope in resource.get("scopeSpans", []):
                found.extend(scope.get("spans", []))
    return found


def attributes(item: dict[str, Any]) -> dict[str, Any]:
    return {kv["key"]: value_of(kv["value"]) for kv in item.get("attributes", [])}


@contextmanager
def receiver(path: str, **options: Any) -> Iterator[Receiver]:
    with Receiver(path, **options) as r:
        yield r


def closed_port() -> int:
    """A loopback port nothing listens on (a collector that is down)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class _Misbehaving(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    mode = "503"
    delay_s = 0.0

    def do_POST(self) -> None:
        self.server.hits += 1  # type: ignore[attr-defined]
        length = int(self.headers.get("content-length") or 0)
        if self.mode == "close-mid-body":
            self.rfile.read(min(length, 10))
            self.connection.shutdown(socket.SHUT_RDWR)
            self.close_connection = True
            return
        self.rfile.read(length)
        if self.mode == "slow":
            time.sleep(self.delay_s)
        status = {"503": 503, "429": 429, "400": 400, "slow": 200}[self.mode]
        self.send_response(status)
        if status in (429, 503):
            self.send_header("Retry-After", "0")
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *args: Any) -> None:
        pass


@contextmanager
def misbehaving_collector(mode: str, delay_s: float = 0.0) -> Iterator[str]:
    """A collector that answers ``mode`` (503, 429, 400, slow, close-mid-body); yields its endpoint."""
    handler = type("Handler", (_Misbehaving,), {"mode": mode, "delay_s": delay_s})
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    server.daemon_threads = True
    server.hits = 0  # type: ignore[attr-defined]
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def clean_env() -> dict[str, str]:
    """The environment without cvdiag's or OpenTelemetry's variables."""
    return {k: v for k, v in os.environ.items() if not k.startswith(("CVDIAG", "OTEL_"))}
