"""The middleware on real Starlette apps: TestClient, and raw ASGI calls that simulate
both ways servers report a client that went away (spec 2.3 receive, spec 2.4 send)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable

import pytest
from emitkit import capture
from starlette.applications import Starlette
from starlette.requests import ClientDisconnect, Request
from starlette.responses import JSONResponse, PlainTextResponse, StreamingResponse
from starlette.routing import Route
from starlette.testclient import TestClient

import cvdiag
from cvdiag.contract.schema import BACKEND_TERMINALS, EDGE_HEADERS, UUID7_RE
from cvdiag.write.config import apply_settings, get_settings


async def _sse(n: int = 3, fail_at: int | None = None) -> AsyncIterator[bytes]:
    for i in range(n):
        if i == fail_at:
            raise RuntimeError("stream broke with key sk-proj-abcdefghijklmnop123456")
        yield f"event: token\ndata: {i}\n\n".encode()
        await asyncio.sleep(0)


async def json_endpoint(request: Request) -> JSONResponse:
    return JSONResponse({"ok": True}, headers={"via": "1.1 edge", "server": "uvicorn"})


async def stream_endpoint(request: Request) -> StreamingResponse:
    return StreamingResponse(_sse(int(request.query_params.get("n", 3))), media_type="text/event-stream")


async def broken_stream_endpoint(request: Request) -> StreamingResponse:
    return StreamingResponse(_sse(5, fail_at=2), media_type="text/event-stream")


async def raising_endpoint(request: Request) -> JSONResponse:
    raise ValueError("bad input for user alice@example.com")


def sync_endpoint(request: Request) -> PlainTextResponse:
    with cvdiag.agent_scope("sync-agent"):
        ctx = cvdiag.current_context()
    return PlainTextResponse(ctx.test_id if ctx else "none")


async def agent_stream_endpoint(request: Request) -> StreamingResponse:
    async def body() -> AsyncIterator[bytes]:
        async with cvdiag.agent_scope("streamer"), cvdiag.llm_call("openai", "gpt-4o-mini", heartbeat_s=60):
            ctx = cvdiag.current_context()
            yield f"data: {ctx.test_id if ctx else 'none'}\n\n".encode()

    return StreamingResponse(body(), media_type="text/event-stream")


ROUTES = [
    Route("/json", json_endpoint),
    Route("/stream", stream_endpoint),
    Route("/broken", broken_stream_endpoint),
    Route("/raise", raising_endpoint),
    Route("/sync", sync_endpoint),
    Route("/agent", agent_stream_endpoint),
]


def make_app(**kwargs: object) -> Starlette:
    app = Starlette(routes=ROUTES)
    app.add_middleware(cvdiag.CvdiagMiddleware, slug="svc", **kwargs)
    return app


def terminals(events: list[dict]) -> list[str]:
    return [e["boundary"] for e in events if e["boundary"] in BACKEND_TERMINALS]


def test_json_request_writes_ingress_first_byte_and_complete():
    with capture("verbose") as cap, TestClient(make_app()) as client:
        response = client.get("/json", headers={"x-test-id": "d4-agno-1234", "content-length": "0"})
    assert response.headers["x-test-id"] == "d4-agno-1234"
    events = cap.events()
    assert [e["boundary"] for e in events] == [
        "backend.request.ingress",
        "backend.sse.first_byte",
        "backend.response.complete",
    ]
    assert {e["test_id"] for e in events} == {"d4-agno-1234"}
    ingress, first, done = events
    assert ingress["metadata"] == {
        "method": "GET",
        "path": "/json",
        "content_length": 0,
        "inbound_test_id_adopted": True,
    }
    assert ingress["demo"] == "json" and ingress["slug"] == "svc"
    assert first["outcome"] == "ok" and first["edge_headers"]["via"] == "1.1 edge"
    assert done["outcome"] == "ok" and done["metadata"]["http_status"] == 200
    assert done["metadata"]["content_length"] == len(response.content)
    assert done["duration_ms"] == done["metadata"]["total_duration_ms"]


def test_missing_test_id_is_minted_as_uuid7_and_echoed():
    with capture("default") as cap, TestClient(make_app()) as client:
        response = client.get("/json")
    tid = response.headers["x-test-id"]
    assert UUID7_RE.match(tid)
    assert cap.one("backend.response.complete")["test_id"] == tid


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("0190A9C0-1A2B-7C3D-8E4F-5A6B7C8D9E0F", "0190a9c0-1a2b-7c3d-8e4f-5a6b7c8d9e0f"),
        ("  D4 Agno/1234!  ", "d4agno1234"),
        ("x" * 5000, "x" * 128),
    ],
)
def test_inbound_test_id_is_adopted_by_the_sanitizer(raw, expected):
    with capture("default") as cap, TestClient(make_app()) as client:
        client.get("/json", headers={"x-test-id": raw})
    assert cap.one("backend.response.complete")["test_id"] == expected


def test_hostile_test_id_with_nothing_left_gets_a_fresh_uuid7():
    with capture("verbose") as cap, TestClient(make_app()) as client:
        client.get("/json", headers={"x-test-id": "!!!<script>"[:3] + "???"})
    ingress = cap.one("backend.request.ingress")
    assert UUID7_RE.match(ingress["test_id"]) and ingress["metadata"]["inbound_test_id_adopted"] is False


def test_slug_comes_from_header_then_configuration_then_unknown():
    with capture("default") as cap:
        with TestClient(make_app()) as client:
            client.get("/json", headers={"x-aimock-context": "My Demo_1"})
            client.get("/json", headers={"x-aimock-context": "!!!"})
        bare = Starlette(routes=ROUTES)
        bare.add_middleware(cvdiag.CvdiagMiddleware)
        with TestClient(bare) as client:
            client.get("/json")
    assert [e["slug"] for e in cap.of("backend.response.complete")] == ["mydemo1", "svc", "unknown"]


def test_sse_stream_first_byte_once_events_in_sequence_and_complete():
    with capture("debug") as cap, TestClient(make_app()) as client:
        client.get("/stream?n=4")
    assert cap.boundaries().count("backend.sse.first_byte") == 1
    events = cap.of("backend.sse.event")
    assert [e["metadata"]["sequence_num"] for e in events] == [0, 1, 2, 3]
    assert {e["metadata"]["event_type"] for e in events} == {"token"}
    assert cap.one("backend.response.complete")["metadata"]["sse_event_count"] == 4
    assert terminals(cap.events()) == ["backend.response.complete"]


def test_default_tier_stream_writes_only_the_terminal():
    with capture("default") as cap, TestClient(make_app()) as client:
        client.get("/stream?n=50")
    assert cap.boundaries() == ["backend.response.complete"]


def test_exception_before_response_is_error_caught_as_the_only_terminal():
    with capture("default") as cap, TestClient(make_app(), raise_server_exceptions=False) as client:
        response = client.get("/raise")
    assert response.status_code == 500
    error = cap.one("backend.error.caught")
    assert terminals(cap.events()) == ["backend.error.caught"]
    assert error["outcome"] == "err" and error["metadata"]["exception_type"] == "ValueError"
    assert "alice@example.com" not in error["metadata"]["message_scrubbed"]
    frames = error["metadata"]["stack_brief"]
    assert 0 < len(frames) <= 8 and frames[-1]["file"].endswith("test_middleware.py")
    assert all("/" not in f["file"] or not f["file"].startswith("/") for f in frames)


def test_exception_mid_stream_is_abort_chunk_error_then_error_caught():
    with capture("default") as cap, TestClient(make_app(), raise_server_exceptions=False) as client:
        client.get("/broken")
    events = cap.events()
    assert [e["boundary"] for e in events] == ["backend.sse.aborted", "backend.error.caught"]
    aborted = events[0]["metadata"]
    assert aborted["termination_kind"] == "chunk_error" and aborted["bytes_before_abort"] > 0
    assert "sk-proj-abcdefghijklmnop123456" not in str(events)


def test_wrapping_the_whole_app_sees_the_500_page_then_the_error():
    app = cvdiag.CvdiagMiddleware(Starlette(routes=ROUTES), slug="svc")
    with capture("default") as cap, TestClient(app, raise_server_exceptions=False) as client:
        assert client.get("/raise").status_code == 500
    events = cap.events()
    assert [e["boundary"] for e in events] == ["backend.response.complete", "backend.error.caught"]
    assert events[0]["outcome"] == "err" and events[0]["metadata"]["http_status"] == 500


def test_context_reaches_sync_endpoints_in_the_threadpool():
    with capture("default") as cap, TestClient(make_app()) as client:
        response = client.get("/sync", headers={"x-test-id": "sync-1"})
    assert response.text == "sync-1"
    assert {e["test_id"] for e in cap.events()} == {"sync-1"}
    assert cap.one("backend.agent.exit")["metadata"]["terminal_outcome"] == "ok"


def test_scopes_inside_the_stream_generator_carry_the_request_id():
    with capture("verbose") as cap, TestClient(make_app()) as client:
        response = client.get("/agent", headers={"x-test-id": "gen-1"})
    assert "gen-1" in response.text
    assert {e["test_id"] for e in cap.events()} == {"gen-1"}
    assert {"backend.agent.enter", "backend.llm.call.start", "backend.llm.call.response"} <= set(cap.boundaries())


def test_disabled_middleware_is_a_pass_through():
    saved = get_settings()
    try:
        cvdiag.configure(enabled=False, environ={})
        with TestClient(make_app()) as client:
            response = client.get("/json", headers={"x-test-id": "off"})
        assert "x-test-id" not in response.headers
    finally:
        apply_settings(saved)


def test_excluded_paths_write_nothing():
    with capture("debug") as cap, TestClient(make_app(exclude_paths=["/json"])) as client:
        client.get("/json")
        client.get("/stream?n=1")
    assert "/json" not in {e["metadata"].get("path") for e in cap.events()}
    assert cap.of("backend.response.complete")[0]["demo"] == "stream"


def test_edge_headers_come_from_request_at_ingress_and_response_at_terminal():
    headers = {
        "cf-ray": "8c1f2a3b4c5d6e7f-SJC",
        "cf-connecting-ip": "203.0.113.9",
        "x-forwarded-for": "203.0.113.9",
        "retry-after": "x" * 400,
    }
    with capture("verbose") as cap, TestClient(make_app()) as client:
        client.get("/json", headers=headers)
    ingress = cap.one("backend.request.ingress")
    assert list(ingress["edge_headers"]) == list(EDGE_HEADERS)
    assert ingress["edge_headers"]["cf-ray"] == "8c1f2a3b4c5d6e7f-SJC"
    assert ingress["edge_headers"]["retry-after"] == "x" * 255 + "…"
    assert "203.0.113.9" not in str(cap.all())
    done = cap.one("backend.response.complete")
    assert done["edge_headers"]["cf-ray"] is None and done["edge_headers"]["via"] == "1.1 edge"


# --- raw ASGI: the two disconnect styles, cancellation ---------------------------------


def _scope(path: str, spec_version: str, test_id: str) -> dict:
    return {
        "type": "http",
        "asgi": {"version": "3.0", "spec_version": spec_version},
        "http_version": "1.1",
        "method": "GET",
        "scheme": "http",
        "path": path,
        "raw_path": path.encode(),
        "query_string": b"n=10",
        "root_path": "",
        "headers": [(b"x-test-id", test_id.encode())],
        "client": ("127.0.0.1", 5000),
        "server": ("127.0.0.1", 8000),
    }


async def _drive(app: Callable, scope: dict, *, hang_up_after: int | None, send_raises: bool) -> list[dict]:
    """Run one request; the client goes away after ``hang_up_after`` body chunks."""
    sent: list[dict] = []
    gone = asyncio.Event()
    request_read = False

    async def receive() -> dict:
        nonlocal request_read
        if not request_read:
            request_read = True
            return {"type": "http.request", "body": b"", "more_body": False}
        await gone.wait()
        return {"type": "http.disconnect"}

    async def send(message: dict) -> None:
        if gone.is_set() and send_raises:
            raise OSError("connection reset by peer")
        sent.append(message)
        chunks = sum(1 for m in sent if m["type"] == "http.response.body" and m.get("body"))
        if hang_up_after is not None and chunks >= hang_up_after:
            gone.set()

    await app(scope, receive, send)
    return sent


def test_disconnect_seen_by_receive_is_abort_rst_not_complete():
    with capture("default") as cap:
        asyncio.run(_drive(make_app(), _scope("/stream", "2.3", "rst-23"), hang_up_after=2, send_raises=False))
    [aborted] = cap.events()
    assert aborted["boundary"] == "backend.sse.aborted" and aborted["test_id"] == "rst-23"
    assert aborted["metadata"]["termination_kind"] == "rst" and aborted["metadata"]["bytes_before_abort"] > 0


def test_disconnect_seen_as_oserror_from_send_is_abort_rst_and_propagates():
    with capture("default") as cap, pytest.raises(ClientDisconnect):
        asyncio.run(_drive(make_app(), _scope("/stream", "2.4", "rst-24"), hang_up_after=2, send_raises=True))
    [aborted] = cap.events()
    assert aborted["boundary"] == "backend.sse.aborted" and aborted["metadata"]["termination_kind"] == "rst"


def test_disconnect_after_the_last_chunk_is_not_an_abort():
    async def app(scope: dict, receive: Callable, send: Callable) -> None:
        await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"text/event-stream")]})
        await send({"type": "http.response.body", "body": b"data: 1\n\n", "more_body": False})
        assert (await receive())["type"] == "http.request"
        assert (await receive())["type"] == "http.disconnect"

    with capture("default") as cap:
        asyncio.run(
            _drive(cvdiag.CvdiagMiddleware(app), _scope("/x", "2.3", "late"), hang_up_after=1, send_raises=False)
        )
    assert terminals(cap.events()) == ["backend.response.complete"]


def test_cancellation_mid_stream_is_abort_timeout_and_propagates():
    async def slow(scope: dict, receive: Callable, send: Callable) -> None:
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b"x", "more_body": True})
        await asyncio.sleep(10)

    async def run_slow() -> None:
        task = asyncio.ensure_future(
            _drive(
                cvdiag.CvdiagMiddleware(slow), _scope("/s", "2.3", "cancel-1"), hang_up_after=None, send_raises=False
            )
        )
        await asyncio.sleep(0.05)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    with capture("default") as cap:
        asyncio.run(run_slow())
    [aborted] = cap.events()
    assert aborted["metadata"] == {"termination_kind": "timeout", "bytes_before_abort": 1}


def test_app_returning_before_its_last_chunk_is_abort_fin_premature():
    async def app(scope: dict, receive: Callable, send: Callable) -> None:
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b"part", "more_body": True})

    with capture("default") as cap:
        asyncio.run(
            _drive(cvdiag.CvdiagMiddleware(app), _scope("/x", "2.3", "fin-1"), hang_up_after=None, send_raises=False)
        )
    [aborted] = cap.events()
    assert aborted["boundary"] == "backend.sse.aborted" and aborted["test_id"] == "fin-1"
    assert aborted["metadata"] == {"termination_kind": "fin_premature", "bytes_before_abort": 4}


@pytest.mark.parametrize(
    ("app_headers", "echo", "sent_headers"),
    [
        ([], True, [(b"x-test-id", b"echo-1")]),
        ([(b"X-Test-Id", b"the-apps-own")], True, [(b"X-Test-Id", b"the-apps-own")]),
        ([], False, []),
    ],
)
def test_test_id_is_echoed_once_unless_the_app_sent_one_or_echo_is_off(app_headers, echo, sent_headers):
    async def app(scope: dict, receive: Callable, send: Callable) -> None:
        await send({"type": "http.response.start", "status": 200, "headers": list(app_headers)})
        await send({"type": "http.response.body", "body": b"ok"})

    middleware = cvdiag.CvdiagMiddleware(app, echo_test_id=echo)
    with capture("default") as cap:
        sent = asyncio.run(_drive(middleware, _scope("/x", "2.3", "echo-1"), hang_up_after=None, send_raises=False))
    assert sent[0]["headers"] == sent_headers
    assert cap.one("backend.response.complete")["test_id"] == "echo-1"


def test_debug_tier_writes_a_plain_body_as_chunk_events():
    with capture("debug") as cap, TestClient(make_app()) as client:
        response = client.get("/json")
    [event] = cap.of("backend.sse.event")
    assert event["metadata"] == {"event_type": "chunk", "payload_size_bytes": len(response.content), "sequence_num": 0}
    assert cap.one("backend.response.complete")["metadata"]["sse_event_count"] == 0


def test_concurrent_requests_keep_their_own_ids():
    async def main() -> None:
        app = make_app()
        await asyncio.gather(
            *(
                _drive(app, _scope("/agent", "2.3", f"conc-{i}"), hang_up_after=None, send_raises=False)
                for i in range(20)
            )
        )

    with capture("verbose") as cap:
        asyncio.run(main())
    by_id: dict[str, set[str]] = {}
    for e in cap.events():
        by_id.setdefault(e["test_id"], set()).add(e["boundary"])
    assert set(by_id) == {f"conc-{i}" for i in range(20)}
    assert all("backend.llm.call.response" in b and "backend.response.complete" in b for b in by_id.values())


def test_other_scopes_pass_through_untouched():
    seen: list[str] = []

    async def app(scope: dict, receive: Callable, send: Callable) -> None:
        seen.append(scope["type"])

    with capture("debug") as cap:
        asyncio.run(cvdiag.CvdiagMiddleware(app)({"type": "lifespan"}, None, None))  # type: ignore[arg-type]
    assert seen == ["lifespan"] and cap.events() == []


def test_malformed_scope_is_served_as_if_cvdiag_were_absent():
    sent: list[dict] = []

    async def app(scope: dict, receive: Callable, send: Callable) -> None:
        await send({"type": "http.response.start", "status": 204, "headers": []})
        await send({"type": "http.response.body", "body": b""})

    async def send(message: dict) -> None:
        sent.append(message)

    scope = _scope("/x", "2.3", "ignored")
    scope["headers"] = [(b"x-test-id", 12345)]  # a server bug: the value is not bytes
    before = cvdiag.stats()["internal_errors"]
    with capture("debug") as cap:
        asyncio.run(cvdiag.CvdiagMiddleware(app)(scope, None, send))  # type: ignore[arg-type]
    assert [m["type"] for m in sent] == ["http.response.start", "http.response.body"]
    assert cap.events() == [] and cvdiag.stats()["internal_errors"] == before + 1


def test_odd_response_headers_never_break_the_response():
    sent: list[dict] = []

    async def app(scope: dict, receive: Callable, send: Callable) -> None:
        await send({"type": "http.response.start", "status": 200, "headers": [(b"content-length", 2)]})
        await send({"type": "http.response.body", "body": b"ok"})

    async def send(message: dict) -> None:
        sent.append(message)

    with capture("default") as cap:
        asyncio.run(cvdiag.CvdiagMiddleware(app)(_scope("/x", "2.3", "odd-1"), None, send))  # type: ignore[arg-type]
    assert sent[0]["headers"] == [(b"content-length", 2)]  # sent as the app gave it
    done = cap.one("backend.response.complete")
    assert done["test_id"] == "odd-1" and done["metadata"]["content_length"] == 2


def test_fastapi_app_with_sync_and_async_endpoints():
    from fastapi import FastAPI

    api = FastAPI()
    api.add_middleware(cvdiag.CvdiagMiddleware, slug="fastapi-svc")

    @api.get("/items/{n}")
    def read_item(n: int) -> dict:  # sync: runs in the threadpool
        with cvdiag.agent_scope("lookup"):
            return {"n": n, "test_id": cvdiag.current_context().test_id}

    @api.get("/boom")
    async def boom() -> dict:
        raise RuntimeError("database password=hunter2 rejected")

    with capture("default") as cap, TestClient(api, raise_server_exceptions=False) as client:
        assert client.get("/items/3", headers={"x-test-id": "fa-1"}).json() == {"n": 3, "test_id": "fa-1"}
        assert client.get("/boom", headers={"x-test-id": "fa-2"}).status_code == 500
    by_id = {}
    for e in cap.events():
        by_id.setdefault(e["test_id"], []).append(e["boundary"])
    assert by_id["fa-1"] == ["backend.agent.enter", "backend.agent.exit", "backend.response.complete"]
    assert by_id["fa-2"] == ["backend.error.caught"]
    assert "hunter2" not in str(cap.all())
    assert {e["slug"] for e in cap.events()} == {"fastapi-svc"}
