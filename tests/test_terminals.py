"""Every request gets its one terminal, and the right one, on a real uvicorn server.

Lone surrogates in messages and names, an application's own connection errors while
streaming, and a mounted sub-application with a middleware of its own.
"""

from __future__ import annotations

import asyncio
import socket
import threading
import time
from collections.abc import AsyncIterator, Iterator

import httpx
import pytest
from emitkit import Captured, capture
from hypothesis import given, settings
from hypothesis import strategies as st
from serverkit import running_server
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, StreamingResponse
from starlette.routing import Mount, Route

import cvdiag
from cvdiag.contract.schema import BACKEND_TERMINALS
from cvdiag.contract.scrubber import scrub
from cvdiag.diagnosis import diagnose


async def lookup_user(request: Request) -> JSONResponse:
    name = (await request.json())["name"]
    raise ValueError(f"unknown user {name}")


async def named_agent(request: Request) -> JSONResponse:
    name = (await request.json())["name"]
    async with cvdiag.agent_scope(name, model_id=name):
        pass
    return JSONResponse({"ok": True})


def _upstream_that_resets(sent: bytes) -> tuple[int, threading.Thread]:
    """A provider that sends ``sent`` and then resets the connection (RST, not FIN)."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(1)

    def serve() -> None:
        with listener:
            conn, _ = listener.accept()
            conn.recv(65536)
            conn.sendall(sent)
            conn.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00")
            conn.close()

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    return listener.getsockname()[1], thread


async def relay_raw(request: Request) -> StreamingResponse:
    """Relays a provider's stream read over a raw connection (ConnectionError when it drops)."""
    port = int(request.query_params["upstream"])

    async def body() -> AsyncIterator[bytes]:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(b"GET /v1/stream HTTP/1.1\r\nhost: provider\r\n\r\n")
        await writer.drain()
        try:
            for _ in range(100):
                chunk = await reader.read(64)
                if not chunk:
                    raise ConnectionResetError("upstream provider closed the stream")
                yield b"data: " + chunk.replace(b"\n", b" ") + b"\n\n"
        finally:
            writer.close()

    return StreamingResponse(body(), media_type="text/event-stream")


async def relay_httpx(request: Request) -> StreamingResponse:
    """Relays a provider's stream with httpx (RemoteProtocolError when it drops)."""
    port = int(request.query_params["upstream"])

    async def body() -> AsyncIterator[bytes]:
        async with (
            httpx.AsyncClient() as client,
            client.stream("GET", f"http://127.0.0.1:{port}/v1/stream") as upstream,
        ):
            async for chunk in upstream.aiter_raw():
                yield b"data: " + chunk + b"\n\n"

    return StreamingResponse(body(), media_type="text/event-stream")


def _app() -> Starlette:
    inner = Starlette(routes=[Route("/user", lookup_user, methods=["POST"])])
    inner.add_middleware(cvdiag.CvdiagMiddleware, slug="inner")
    app = Starlette(
        routes=[
            Route("/user", lookup_user, methods=["POST"]),
            Route("/agent", named_agent, methods=["POST"]),
            Route("/relay-raw", relay_raw),
            Route("/relay-httpx", relay_httpx),
            Mount("/sub", app=inner),
        ]
    )
    app.add_middleware(cvdiag.CvdiagMiddleware, slug="outer")
    return app


@pytest.fixture(scope="module")
def base() -> Iterator[str]:
    with running_server(_app()) as url:
        yield url


@pytest.fixture
def cap() -> Iterator[Captured]:
    with capture("verbose") as captured:
        yield captured


def _terminals(events: list[dict]) -> list[str]:
    return [e["boundary"] for e in events if e["boundary"] in BACKEND_TERMINALS]


def _of(cap: Captured, test_id: str) -> list[dict]:
    """The request's envelopes once its terminal is in (the server may write it after the
    client saw the response end), and a moment more for an error.caught that follows."""
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        events = [e for e in cap.events() if e["test_id"] == test_id]
        if any(e["boundary"] in BACKEND_TERMINALS for e in events):
            time.sleep(0.05)
            return [e for e in cap.events() if e["test_id"] == test_id]
        time.sleep(0.02)
    raise AssertionError(f"no terminal for {test_id}")


# -- item 5: any string renders --------------------------------------------------------------


def test_lone_surrogate_in_an_error_message_still_writes_error_caught(base, cap):
    body = b'{"name":"\\ud800"}'  # valid JSON: a lone surrogate escape
    internal_errors = cvdiag.stats()["internal_errors"]
    response = httpx.post(f"{base}/user", content=body, headers={"x-test-id": "surrogate-error"})
    assert response.status_code == 500
    events = _of(cap, "surrogate-error")
    assert _terminals(events) == ["backend.error.caught"]
    caught = events[-1]
    assert caught["metadata"]["exception_type"] == "ValueError"
    assert caught["metadata"]["message_scrubbed"] == "unknown user \ufffd"
    assert diagnose(events).cls == "server-error"
    assert cvdiag.stats()["internal_errors"] == internal_errors


def test_lone_surrogate_in_an_agent_name_still_writes_the_agent(base, cap):
    body = b'{"name":"planner-\\udfff-\\ud83d"}'
    response = httpx.post(f"{base}/agent", content=body, headers={"x-test-id": "surrogate-agent"})
    assert response.status_code == 200
    events = _of(cap, "surrogate-agent")
    enter = next(e for e in events if e["boundary"] == "backend.agent.enter")
    assert enter["metadata"] == {"agent_name": "planner-\ufffd-\ufffd", "model_id": "planner-\ufffd-\ufffd"}
    assert [e["boundary"] for e in events][-1] == "backend.response.complete"


@settings(max_examples=60, deadline=None)
@given(st.lists(st.characters() | st.integers(0xD800, 0xDFFF).map(chr), max_size=40).map("".join))
def test_any_string_renders_as_one_envelope(text):
    """Surrogates included (hypothesis leaves them out unless asked): each becomes U+FFFD."""
    with capture("default") as captured, cvdiag.request_context(test_id="any-string"):
        cvdiag.emit("backend.agent.enter", {"agent_name": text, "model_id": None})
    [enter] = captured.events()
    shown = "".join("\ufffd" if 0xD800 <= ord(c) <= 0xDFFF else c for c in text)
    assert enter["metadata"]["agent_name"] == scrub(shown)


# -- item 6: only the client leaving is a client disconnect ---------------------------------


def test_app_connection_error_mid_stream_is_chunk_error_not_rst(base, cap):
    port, upstream = _upstream_that_resets(b"HTTP/1.1 200 OK\r\n\r\ntoken-1 token-2")
    with httpx.stream("GET", f"{base}/relay-raw?upstream={port}", headers={"x-test-id": "upstream-reset"}) as r:
        assert r.status_code == 200
        with pytest.raises(httpx.RemoteProtocolError):
            r.read()  # the backend broke its own response off
    upstream.join(5)
    events = _of(cap, "upstream-reset")
    assert _terminals(events) == ["backend.sse.aborted", "backend.error.caught"]
    aborted, caught = (e for e in events if e["boundary"] in BACKEND_TERMINALS)
    assert aborted["metadata"]["termination_kind"] == "chunk_error"
    assert aborted["metadata"]["bytes_before_abort"] > 0
    assert caught["metadata"]["exception_type"] == "ConnectionResetError"
    verdict = diagnose(events)
    assert verdict.cls == "stream-error" and "ConnectionResetError" in verdict.reason


def test_provider_dropping_an_httpx_stream_is_chunk_error_not_rst(base, cap):
    port, upstream = _upstream_that_resets(b"HTTP/1.1 200 OK\r\ncontent-length: 4096\r\n\r\ntoken-1 token-2")
    url = f"{base}/relay-httpx?upstream={port}"
    with httpx.stream("GET", url, headers={"x-test-id": "upstream-cut"}) as r, pytest.raises(httpx.RemoteProtocolError):
        r.read()
    upstream.join(5)
    events = _of(cap, "upstream-cut")
    aborted = next(e for e in events if e["boundary"] == "backend.sse.aborted")
    assert aborted["metadata"]["termination_kind"] == "chunk_error"
    assert diagnose(events).cls == "stream-error"


# -- item 7: a nested middleware joins the outer one's request ------------------------------


@pytest.mark.parametrize("test_id", ["nested-1", None])
def test_mounted_sub_app_with_its_own_middleware_writes_one_request(base, cap, test_id):
    headers = {"x-test-id": test_id} if test_id else {}
    response = httpx.post(f"{base}/sub/user", content=b'{"name":"bob"}', headers=headers)
    assert response.status_code == 500
    minted = response.headers["x-test-id"]
    assert test_id is None or minted == test_id
    events = _of(cap, minted)
    assert not [e for e in cap.events() if e["slug"] == "inner"]  # the inner middleware wrote nothing
    # The sub-app's own ServerErrorMiddleware sends its 500 page: the outer request sees it.
    assert [e["boundary"] for e in events] == [
        "backend.request.ingress",
        "backend.sse.first_byte",
        "backend.response.complete",
        "backend.error.caught",
    ]
    assert events[2]["metadata"]["http_status"] == 500
    assert {e["slug"] for e in events} == {"outer"}
