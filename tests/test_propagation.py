"""Outbound propagation: real clients (httpx, httpx2, the openai and anthropic SDKs,
Starlette's TestClient) against a real loopback server that echoes what it received."""

from __future__ import annotations

import asyncio
import contextvars
import json
import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import anthropic
import httpx
import httpx2
import openai
import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route
from starlette.testclient import TestClient

from cvdiag.write.context import bind, current_context, new_context, request_context, unbind
from cvdiag.write.propagation import (
    httpx_hooks,
    instrument_httpx,
    is_instrumented,
    uninstrument_httpx,
    wrap,
)

CLIENT_LIBRARIES = pytest.mark.parametrize("lib", [httpx, httpx2], ids=["httpx", "httpx2"])

_CHAT_COMPLETION = {
    "id": "chatcmpl-1",
    "object": "chat.completion",
    "created": 0,
    "model": "gpt-4o-mini",
    "choices": [{"index": 0, "message": {"role": "assistant", "content": "hi"}, "finish_reason": "stop"}],
    "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
}
_ANTHROPIC_MESSAGE = {
    "id": "msg_1",
    "type": "message",
    "role": "assistant",
    "model": "claude-3-5-sonnet-20241022",
    "content": [{"type": "text", "text": "hi"}],
    "stop_reason": "end_turn",
    "stop_sequence": None,
    "usage": {"input_tokens": 1, "output_tokens": 1},
}


class _Echo(BaseHTTPRequestHandler):
    """Answers every request with the headers it received (all values per name), and
    records them, so a test can also inspect what an SDK sent."""

    received: list[dict[str, list[str]]]

    def _answer(self) -> None:
        length = int(self.headers.get("content-length") or 0)
        if length:
            self.rfile.read(length)
        seen: dict[str, list[str]] = {}
        for name, value in self.headers.items():
            seen.setdefault(name.lower(), []).append(value)
        self.server.received.append(seen)  # type: ignore[attr-defined]
        if self.path.endswith("/chat/completions"):
            payload = _CHAT_COMPLETION
        elif self.path.endswith("/messages"):
            payload = _ANTHROPIC_MESSAGE
        else:
            payload = seen
        body = json.dumps(payload).encode()
        self.send_response(200)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    do_GET = do_POST = _answer

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture(scope="module")
def echo_server() -> Iterator[ThreadingHTTPServer]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Echo)
    server.received = []  # type: ignore[attr-defined]
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server
    server.shutdown()
    server.server_close()


@pytest.fixture
def url(echo_server: ThreadingHTTPServer) -> str:
    return f"http://127.0.0.1:{echo_server.server_port}"


@pytest.fixture
def instrumented() -> Iterator[None]:
    was = is_instrumented()
    instrument_httpx()
    yield
    if not was:
        uninstrument_httpx()


@pytest.fixture
def uninstrumented() -> Iterator[None]:
    was = is_instrumented()
    uninstrument_httpx()
    yield
    if was:
        instrument_httpx()


def _in_empty_context(fn, *args):
    """Run outside any cvdiag binding (the pytest plugin binds one per test)."""
    return contextvars.Context().run(fn, *args)


# --- event hooks on one client -----------------------------------------------------


@CLIENT_LIBRARIES
def test_sync_hooks_send_the_bound_test_id_and_slug(lib, url, uninstrumented):
    with request_context(test_id="run-42", slug="checkout"), lib.Client(event_hooks=httpx_hooks()) as client:
        seen = client.get(url).json()
    assert seen["x-test-id"] == ["run-42"]
    assert seen["x-aimock-context"] == ["checkout"]


@CLIENT_LIBRARIES
def test_async_hooks_send_the_bound_test_id(lib, url, uninstrumented):
    async def main() -> dict:
        with request_context(test_id="run-43", slug="checkout"):
            async with lib.AsyncClient(event_hooks=httpx_hooks(asynchronous=True)) as client:
                return (await client.get(url)).json()

    seen = asyncio.run(main())
    assert seen["x-test-id"] == ["run-43"]
    assert seen["x-aimock-context"] == ["checkout"]


@CLIENT_LIBRARIES
def test_caller_headers_are_never_overwritten(lib, url, uninstrumented):
    with (
        request_context(test_id="from-context", slug="checkout"),
        lib.Client(event_hooks=httpx_hooks(), headers={"X-Aimock-Context": "client-default"}) as client,
    ):
        seen = client.get(url, headers={"X-Test-Id": "set-by-caller"}).json()
    assert seen["x-test-id"] == ["set-by-caller"]
    assert seen["x-aimock-context"] == ["client-default"]


def test_only_the_allow_list_is_forwarded(url, uninstrumented):
    ctx = new_context(
        test_id="run-44",
        slug="checkout",
        forward={
            "x-diag-run-id": "nightly-7",
            "x-diag-hops": "2",
            "x-aimock-strict": "true",
            "x-api-key": "sk-test-12345",
            "authorization": "Bearer secret",
            "x-forwarded-for": "203.0.113.9",
        },
    )
    tokens = bind(ctx)
    try:
        with httpx2.Client(event_hooks=httpx_hooks()) as client:
            seen = client.get(url).json()
    finally:
        unbind(tokens)
    added = {name for name in seen if name.startswith("x-") or name == "authorization"}
    assert added == {"x-test-id", "x-aimock-context", "x-diag-run-id", "x-diag-hops", "x-aimock-strict"}
    assert seen["x-diag-run-id"] == ["nightly-7"]
    assert seen["x-diag-hops"] == ["2"]
    assert seen["x-aimock-strict"] == ["true"]


def test_unknown_slug_is_not_sent(url, uninstrumented):
    with request_context(test_id="run-45"), httpx2.Client(event_hooks=httpx_hooks()) as client:
        assert current_context().slug == "unknown"
        seen = client.get(url).json()
    assert seen["x-test-id"] == ["run-45"]
    assert "x-aimock-context" not in seen


def test_nothing_is_added_outside_a_context(url, uninstrumented):
    def call() -> dict:
        with httpx2.Client(event_hooks=httpx_hooks()) as client:
            return client.get(url).json()

    seen = _in_empty_context(call)
    assert not {name for name in seen if name.startswith("x-")}


# --- instrument_httpx: every client, no code change -----------------------------------


@CLIENT_LIBRARIES
def test_instrumented_clients_carry_the_id_sync_and_async(lib, url, instrumented):
    async def async_get() -> dict:
        async with lib.AsyncClient() as client:
            return (await client.get(url)).json()

    with request_context(test_id="run-46", slug="checkout"):
        with lib.Client() as client:
            sync_seen = client.get(url).json()
        streamed = None
        with lib.stream("GET", url) as response:
            streamed = json.loads(response.read())
        async_seen = asyncio.run(async_get())
    for seen in (sync_seen, streamed, async_seen):
        assert seen["x-test-id"] == ["run-46"]
        assert seen["x-aimock-context"] == ["checkout"]


def test_clients_created_before_instrumenting_are_covered(url, uninstrumented):
    early_httpx, early_httpx2 = httpx.Client(), httpx2.Client()
    try:
        instrument_httpx()
        with request_context(test_id="run-47"):
            assert early_httpx.get(url).json()["x-test-id"] == ["run-47"]
            assert early_httpx2.get(url).json()["x-test-id"] == ["run-47"]
    finally:
        uninstrument_httpx()
        early_httpx.close()
        early_httpx2.close()


def test_instrumenting_twice_sends_one_header_and_one_undo_removes_it(url, uninstrumented):
    assert instrument_httpx() is True
    assert instrument_httpx() is False
    with request_context(test_id="run-48"), httpx2.Client(event_hooks=httpx_hooks()) as client:
        assert client.get(url).json()["x-test-id"] == ["run-48"]
        uninstrument_httpx()
        assert not is_instrumented()
        plain = httpx2.Client()
        try:
            assert "x-test-id" not in plain.get(url).json()
        finally:
            plain.close()


def test_a_wrapper_installed_after_ours_survives_uninstrumenting(url, uninstrumented):
    instrument_httpx()
    ours = httpx2.Client.send
    calls = []

    def theirs(self, request, *args, **kwargs):
        calls.append(request.url.path)
        return ours(self, request, *args, **kwargs)

    httpx2.Client.send = theirs
    try:
        uninstrument_httpx()
        assert httpx2.Client.send is theirs
        with request_context(test_id="run-49"), httpx2.Client() as client:
            seen = client.get(url + "/after").json()
        assert calls == ["/after"]
        assert "x-test-id" not in seen
    finally:
        httpx2.Client.send = ours.__wrapped__


def test_openai_sdk_carries_the_id_without_code_changes(url, echo_server, instrumented):
    echo_server.received.clear()
    with request_context(test_id="run-50", slug="checkout"):
        sdk = openai.OpenAI(base_url=url + "/v1", api_key="sk-test-12345", max_retries=0)
        answer = sdk.chat.completions.create(model="gpt-4o-mini", messages=[{"role": "user", "content": "hi"}])
    assert answer.choices[0].message.content == "hi"
    assert echo_server.received[-1]["x-test-id"] == ["run-50"]
    assert echo_server.received[-1]["x-aimock-context"] == ["checkout"]


def test_async_openai_sdk_carries_the_id_without_code_changes(url, echo_server, instrumented):
    echo_server.received.clear()

    async def main() -> None:
        sdk = openai.AsyncOpenAI(base_url=url + "/v1", api_key="sk-test-12345", max_retries=0)
        async with sdk:
            await sdk.chat.completions.create(model="gpt-4o-mini", messages=[{"role": "user", "content": "hi"}])

    with request_context(test_id="run-51"):
        asyncio.run(main())
    assert echo_server.received[-1]["x-test-id"] == ["run-51"]


def test_anthropic_sdk_carries_the_id_without_code_changes(url, echo_server, instrumented):
    echo_server.received.clear()
    with request_context(test_id="run-52", slug="checkout"):
        sdk = anthropic.Anthropic(base_url=url, api_key="sk-ant-test", max_retries=0)
        sdk.messages.create(
            model="claude-3-5-sonnet-20241022", max_tokens=8, messages=[{"role": "user", "content": "hi"}]
        )
    assert echo_server.received[-1]["x-test-id"] == ["run-52"]
    assert echo_server.received[-1]["x-aimock-context"] == ["checkout"]


def test_starlette_testclient_requests_carry_the_id(instrumented):
    async def headers(request: Request) -> JSONResponse:
        return JSONResponse({"x-test-id": request.headers.get("x-test-id")})

    app = Starlette(routes=[Route("/", headers)])
    with request_context(test_id="run-53"), TestClient(app) as client:
        assert client.get("/").json() == {"x-test-id": "run-53"}


# --- threads and executors ---------------------------------------------------------


def test_wrapped_callables_keep_the_id_in_executor_threads():
    def test_id() -> str | None:
        ctx = current_context()
        return ctx.test_id if ctx else None

    with ThreadPoolExecutor(max_workers=2) as pool:
        with request_context(test_id="run-54"):
            wrapped = wrap(test_id)
            plain = pool.submit(_in_empty_context, test_id).result()
        assert plain is None
        assert pool.submit(wrapped).result() == "run-54"


def test_one_wrapped_callable_can_run_in_several_threads_at_once():
    barrier = threading.Barrier(4, timeout=10)

    def test_id_when_all_arrived() -> str:
        barrier.wait()
        return current_context().test_id

    with request_context(test_id="run-55"):
        wrapped = wrap(test_id_when_all_arrived)
    with ThreadPoolExecutor(max_workers=4) as pool:
        results = [f.result() for f in [pool.submit(wrapped) for _ in range(4)]]
    assert results == ["run-55"] * 4


def test_copied_context_runs_a_thread_as_the_request(url, instrumented):
    seen: list[dict] = []
    with request_context(test_id="run-56"):
        ctx = contextvars.copy_context()

    def work() -> None:
        with httpx2.Client() as client:
            seen.append(client.get(url).json())

    thread = threading.Thread(target=ctx.run, args=(work,))
    thread.start()
    thread.join()
    assert seen[0]["x-test-id"] == ["run-56"]
