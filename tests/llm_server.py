"""A real LLM provider stand-in for tests: uvicorn on a loopback port, serving planned
replies (recorded bytes, in the pieces given, optionally slow, cut, or compressed).

Import ``server_fixture`` and ``llm_capture_on_fixture`` into a test module for the
``server`` and ``llm_capture_on`` fixtures. ``server.plan(path, Reply(...), Reply(...))``
queues the replies for the next requests to ``path``; the last one repeats.
``server.requests`` records what arrived (path and headers), so a test can see the
SDK's retries.
"""

from __future__ import annotations

import asyncio
import gzip
import socket
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest
import uvicorn

from cvdiag.write.propagation import instrument_httpx, is_instrumented, uninstrument_httpx

DATA = Path(__file__).parent / "data" / "llm"


@dataclass
class Reply:
    status: int = 200
    pieces: list[bytes] = field(default_factory=list)
    headers: dict[str, str] = field(default_factory=dict)
    #: Break the connection after the pieces (no end of the chunked body).
    cut: bool = False
    #: Seconds to wait before each piece.
    delay: float = 0.0
    gzip: bool = False

    @classmethod
    def sse(cls, name_or_bytes: str | bytes, *, piece: int = 0, **kwargs) -> Reply:
        data = (DATA / name_or_bytes).read_bytes() if isinstance(name_or_bytes, str) else name_or_bytes
        pieces = _events(data) if piece == 0 else [data[i : i + piece] for i in range(0, len(data), piece)]
        headers = {"content-type": "text/event-stream", **kwargs.pop("headers", {})}
        return cls(pieces=pieces, headers=headers, **kwargs)

    @classmethod
    def json(cls, body: bytes, status: int = 200, **kwargs) -> Reply:
        headers = {"content-type": "application/json", **kwargs.pop("headers", {})}
        return cls(status=status, pieces=[body], headers=headers, **kwargs)


def _events(data: bytes) -> list[bytes]:
    """One piece per SSE event, as a provider writes them."""
    parts = data.split(b"\n\n")
    return [p + b"\n\n" for p in parts[:-1]] + ([parts[-1]] if parts[-1] else [])


class _Cut(Exception):
    pass


class LLMServer:
    def __init__(self) -> None:
        self._plans: dict[str, list[Reply]] = {}
        self.requests: list[tuple[str, dict[str, str]]] = []
        self._lock = threading.Lock()
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        # Head and body go out at once (accepted sockets inherit it), as a provider's proxy
        # sends them; without it a keep-alive body trails its head by a delayed ACK (~40 ms).
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        sock.bind(("127.0.0.1", 0))
        self._sock = sock
        self.url = f"http://127.0.0.1:{sock.getsockname()[1]}"
        config = uvicorn.Config(
            self._app, log_level="critical", lifespan="off", interface="asgi3", timeout_graceful_shutdown=1
        )
        self._server = uvicorn.Server(config)
        self._thread = threading.Thread(target=self._server.run, kwargs={"sockets": [sock]}, daemon=True)

    def start(self) -> LLMServer:
        self._thread.start()
        deadline = time.monotonic() + 10
        while not self._server.started:
            if time.monotonic() > deadline:
                raise RuntimeError("LLM test server did not start")
            time.sleep(0.01)
        return self

    def stop(self) -> None:
        self._server.should_exit = True
        self._thread.join(timeout=10)
        self._sock.close()

    def plan(self, path: str, *replies: Reply) -> None:
        with self._lock:
            self._plans[path] = list(replies)
            self.requests.clear()

    def _next(self, path: str) -> Reply:
        with self._lock:
            queue = self._plans.get(path) or [Reply(status=404, pieces=[b'{"error":"no plan"}'])]
            return queue.pop(0) if len(queue) > 1 else queue[0]

    async def _app(self, scope, receive, send) -> None:
        if scope["type"] != "http":
            return
        while True:
            message = await receive()
            if not message.get("more_body"):
                break
        headers = {k.decode("latin-1"): v.decode("latin-1") for k, v in scope["headers"]}
        with self._lock:
            self.requests.append((scope["path"], headers))
        reply = self._next(scope["path"])
        pieces = reply.pieces
        out_headers = dict(reply.headers)
        if reply.gzip:
            packed = gzip.compress(b"".join(pieces))
            pieces = [packed[i : i + 40] for i in range(0, len(packed), 40)]
            out_headers["content-encoding"] = "gzip"
        await send(
            {
                "type": "http.response.start",
                "status": reply.status,
                "headers": [(k.encode(), v.encode()) for k, v in out_headers.items()],
            }
        )
        for piece in pieces:
            if reply.delay:
                await asyncio.sleep(reply.delay)
            await send({"type": "http.response.body", "body": piece, "more_body": True})
        if reply.cut:
            raise _Cut("cut the stream on purpose")
        await send({"type": "http.response.body", "body": b"", "more_body": False})


@pytest.fixture(scope="module", name="server")
def server_fixture() -> Iterator[LLMServer]:
    """One stand-in provider per test module (import this fixture into the module)."""
    srv = LLMServer().start()
    try:
        yield srv
    finally:
        srv.stop()


@pytest.fixture(name="llm_capture_on")
def llm_capture_on_fixture() -> Iterator[None]:
    """LLM call recognition on, with the default heartbeat, for one test; undone after."""
    was = is_instrumented()
    instrument_httpx(llm=True, heartbeat_s=10.0)
    try:
        yield
    finally:
        instrument_httpx(llm=True, heartbeat_s=10.0)
        if not was:
            uninstrument_httpx()
