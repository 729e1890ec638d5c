"""Every kind of line the middleware and the emitter write, as bytes, for a byte-for-byte
comparison across changes to the emit path (``test_emit_lines.py``).

Seven endpoints x three header sets x the default, verbose and debug tiers, served
in-process; the lines come from a raw sink (the bytes as the writer hands them over).
What differs between runs (times, span ids, minted test ids, durations) is masked.

    python tests/linekit.py > tests/data/emit_lines.txt     # regenerate the expected lines
"""

from __future__ import annotations

import asyncio
import contextlib
import re
import sys
import threading
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

import cvdiag
from cvdiag import testing
from cvdiag.write import config, emitter

EXPECTED = Path(__file__).parent / "data" / "emit_lines.txt"

#: Values that change from run to run: replaced by ``*`` (the key and the value's kind stay).
_VOLATILE = re.compile(
    rb'"(ts|mono_ns|span_id|parent_span_id|duration_ms|total_duration_ms|delta_ms_from_ingress'
    rb'|elapsed_ms_since_start|latency_ms|ttft_ms)":("(?:[^"\\]|\\.)*"|-?\d+)'
)
#: Where an exception was raised: depends on the installed Starlette and on this file.
_STACK = re.compile(rb'"stack_brief":\[[^\]]*\]')
_UUID = re.compile(rb"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")


def mask(line: bytes) -> bytes:
    """``line`` with its run-dependent values replaced by ``*``."""
    line = _STACK.sub(b'"stack_brief":"*"', line)
    line = _VOLATILE.sub(lambda m: b'"' + m.group(1) + b'":"*"', line)
    return _UUID.sub(b"<uuid>", line)


class RawSink:
    """The lines as bytes, in the order the writer wrote them."""

    def __init__(self) -> None:
        self.lines: list[bytes] = []
        self._lock = threading.Lock()

    def write(self, lines: list[bytes]) -> None:
        with self._lock:
            self.lines.extend(lines)

    def close(self) -> None:
        pass


async def _json(request: Request) -> JSONResponse:
    return JSONResponse({"ok": True})


async def _sse(request: Request) -> StreamingResponse:
    async def body() -> AsyncIterator[bytes]:
        for i in range(3):
            yield b"event: token\ndata: %d\n\n" % i
        yield b"data: Bearer sk-abcdefghijklmnopqrstuvwxyz0123\n\n"

    return StreamingResponse(body(), media_type="text/event-stream", headers={"cf-ray": "8a1b2c3d4e5f-AMS"})


async def _agent(request: Request) -> JSONResponse:
    async with cvdiag.agent_scope("lines-agent"), cvdiag.llm_call("openai", "gpt-4o-mini"):
        await asyncio.sleep(0)
    return JSONResponse({"answer": "ok"})


async def _boom(request: Request) -> Response:
    raise RuntimeError("failed for user alice@example.com with password=hunter2")


async def _midboom(request: Request) -> StreamingResponse:
    async def body() -> AsyncIterator[bytes]:
        yield b"data: first\n\n"
        raise ValueError("upstream went away")

    return StreamingResponse(body(), media_type="text/event-stream")


async def _user(request: Request) -> JSONResponse:
    """Lines of the application's own: unknown keys (an accounting line after), secrets
    in metadata, a value past the default cap, metadata of plain numbers."""
    cvdiag.emit(
        "backend.agent.exit",
        {"terminal_outcome": "ok", "total_duration_ms": 3, "api_key": "sk-live-0123456789abcdef", "extra": 1},
        outcome="ok",
    )
    cvdiag.emit(
        "backend.agent.exit",
        {
            "terminal_outcome": "error",
            "error_class": "Key " * 300,
            "error_message": "went wrong " * 180 + "token=abc123",
        },
        outcome="err",
    )
    cvdiag.emit("backend.agent.exit", {"terminal_outcome": "error", "error_message": "x" * 5000}, outcome="err")
    cvdiag.emit(
        "backend.agent.enter",
        {"agent_name": "Authorization: Bearer eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxIn0.c2lnbmF0dXJl", "model_id": None},
    )
    cvdiag.emit("backend.llm.call.heartbeat", {"elapsed_ms_since_start": 5}, outcome="info", duration_ms=True)
    cvdiag.emit("backend.agent.exit", {"terminal_outcome": "ok", "total_duration_ms": 2**70}, outcome="weird")
    cvdiag.emit("backend.agent.exit", {"terminal_outcome": "ok\ud800"}, outcome="ok")
    return JSONResponse({"ok": True}, status_code=201)


async def _fail500(request: Request) -> Response:
    return Response(b"no", status_code=503, headers={"retry-after": "30", "server": "lines"})


ROUTES = [
    Route("/json", _json),
    Route("/sse", _sse),
    Route("/agent", _agent),
    Route("/boom", _boom),
    Route("/midboom", _midboom),
    Route("/user/{name}", _user, methods=["POST"]),
    Route("/fail", _fail500),
]
PATHS = ("/json", "/sse", "/agent", "/boom", "/midboom", "/user/someone", "/fail")

HEADER_SETS: tuple[list[tuple[bytes, bytes]], ...] = (
    [],
    [(b"x-test-id", b"lines-1"), (b"x-aimock-context", b"lines-svc"), (b"user-agent", b"lines")],
    [
        (b"x-test-id", b"password=hunter2"),
        (b"content-length", b"2"),
        (b"cf-ray", b"8a1b2c3d4e5f-AMS"),
        (b"via", b"1.1 proxy Authorization: Bearer sk-abcdefghijklmnopqrstuvwxyz0123"),
        (b"x-railway-edge", b"railway/europe-west4" + b"e" * 300),
        (b"x-diag-run-id", b"run-7"),
        (b"cf-connecting-ip", b"203.0.113.9"),
    ],
)


async def _one(app: Any, path: str, headers: list[tuple[bytes, bytes]]) -> None:
    scope = {
        "type": "http",
        "asgi": {"version": "3.0", "spec_version": "2.3"},
        "http_version": "1.1",
        "method": "POST" if path.startswith("/user") else "GET",
        "scheme": "http",
        "path": path,
        "raw_path": path.encode(),
        "query_string": b"",
        "root_path": "",
        "headers": headers,
        "client": ("127.0.0.1", 5000),
        "server": ("127.0.0.1", 8000),
    }
    sent = False

    async def receive() -> dict[str, Any]:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": b"{}", "more_body": False}
        await asyncio.sleep(3600)
        return {"type": "http.disconnect"}

    async def send(message: dict[str, Any]) -> None:
        pass

    with contextlib.suppress(Exception):  # the app's own failures reach the server, as they should
        await app(scope, receive, send)


def lines() -> list[bytes]:
    """Every masked line of the run, in order, each tier's requests after a reset."""
    app = Starlette(routes=ROUTES, middleware=[Middleware(cvdiag.CvdiagMiddleware, slug="lines")])
    sink = RawSink()
    previous = config.get_settings()
    emitter.add_sink(sink)
    try:
        for tier in ("default", "verbose", "debug"):
            cvdiag.configure(enabled=True, tier=tier, environ={"CVDIAG_ENV": "test"}, stdout=False)
            testing.reset()
            for path in PATHS:
                for headers in HEADER_SETS:
                    asyncio.run(_one(app, path, headers))
                    cvdiag.flush()
    finally:
        emitter.flush()
        emitter.remove_sink(sink)
        config.apply_settings(previous)
    return [mask(line) for line in sink.lines]


if __name__ == "__main__":
    sys.stdout.buffer.write(b"".join(line + b"\n" for line in lines()))
