"""LLM calls and propagation through aiohttp, requests and urllib3 after ``cvdiag.instrument()``:
real clients against a real local server serving recorded provider bytes, every way of
reading a body, and the same bytes with and without cvdiag."""

from __future__ import annotations

import asyncio
import contextvars
import gzip
import json
import subprocess
import sys
import threading

import aiohttp
import pytest
import requests
import urllib3
from clientkit import BODY, CHAT, HAPPY, RECORDED, happy, instrumented_fixture  # noqa: F401 (fixture)
from emitkit import capture
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from llm_server import DATA, Reply, server_fixture  # noqa: F401 (fixture)

import cvdiag
from cvdiag.write.context import bind, new_context, unbind

ERROR_500 = json.dumps({"error": {"message": "boom", "type": "server_error"}}).encode()


def _md(env: dict, *keys: str) -> tuple:
    return tuple(env["metadata"].get(k) for k in keys)


def _one_call(cap, client: str) -> dict:
    starts = cap.of("backend.llm.call.start")
    (end,) = cap.llm_responses()
    assert [s["metadata"]["client"] for s in starts] == [client]
    assert end["metadata"]["client"] == client
    return end


# -- aiohttp ---------------------------------------------------------------------------


async def _aiohttp_read(url: str, style: str, body: dict = BODY, **session_kwargs) -> bytes:
    async with aiohttp.ClientSession(**session_kwargs) as session, session.post(url + CHAT, json=body) as response:
        if style == "read":
            return await response.read()
        if style == "iter_chunked":
            return b"".join([c async for c in response.content.iter_chunked(13)])
        if style == "iter_any":
            return b"".join([c async for c in response.content.iter_any()])
        if style == "readline":
            out = b""
            while line := await response.content.readline():
                out += line
            return out
        if style == "aiter":
            return b"".join([line async for line in response.content])
        if style == "iter_chunks":
            return b"".join([c async for c, _ in response.content.iter_chunks()])
        raise AssertionError(style)


@pytest.mark.parametrize("style", ["read", "iter_chunked", "iter_any", "readline", "aiter", "iter_chunks"])
def test_aiohttp_every_reading_style_gets_the_bytes_and_one_call(server, style):
    server.plan(CHAT, Reply.sse("openai_chat_stream.sse", piece=37))
    with capture("verbose") as cap, cvdiag.request_context(test_id="t-aiohttp"):
        got = asyncio.run(_aiohttp_read(server.url, style))
    assert got == RECORDED
    end = _one_call(cap, "aiohttp")
    assert end["test_id"] == "t-aiohttp"
    assert happy(end) == HAPPY
    assert _md(end, "provider", "model", "api", "stream", "attempt") == (
        "openai-compatible",
        "gpt-4o-mini",
        "chat.completions",
        True,
        0,
    )
    assert 0 <= end["metadata"]["ttft_ms"] <= end["metadata"]["latency_ms"]
    assert server.requests[-1][1]["x-test-id"] == "t-aiohttp"


def test_aiohttp_gzip_inflated_by_aiohttp_or_left_to_the_caller(server):
    server.plan(CHAT, Reply.sse("openai_chat_stream.sse", gzip=True))
    with capture("verbose") as cap:
        inflated = asyncio.run(_aiohttp_read(server.url, "read"))
        raw = asyncio.run(_aiohttp_read(server.url, "read", auto_decompress=False))
    assert inflated == RECORDED and gzip.decompress(raw) == RECORDED
    assert [happy(e) for e in cap.llm_responses()] == [HAPPY, HAPPY]


def test_aiohttp_non_streamed_json_and_its_request_id(server):
    body = {
        "choices": [{"message": {"content": "Hello there"}, "finish_reason": "length"}],
        "usage": {"prompt_tokens": 4, "completion_tokens": 2},
    }
    server.plan(CHAT, Reply.json(json.dumps(body).encode(), headers={"x-request-id": "req_9"}))

    async def run():
        body = json.dumps({**BODY, "stream": False})
        async with aiohttp.ClientSession() as session, session.post(server.url + CHAT, data=body) as response:
            return await response.json()

    with capture("verbose") as cap:
        assert asyncio.run(run()) == body
    end = _one_call(cap, "aiohttp")
    assert (end["outcome"], *_md(end, "finish_reason", "output_chars", "stream", "request_id")) == (
        "ok",
        "length",
        11,
        False,
        "req_9",
    )


def test_aiohttp_429_and_500_name_the_provider_error_and_count_attempts(server):
    server.plan(
        CHAT,
        Reply.json(
            b'{"error":{"type":"rate_limit_error","code":"rate_limit_exceeded"}}', 429, headers={"retry-after": "2"}
        ),
        Reply.json(ERROR_500, 500),
        Reply.sse("openai_chat_stream.sse"),
    )

    async def run():
        async with aiohttp.ClientSession() as session:
            for _ in range(3):
                async with session.post(server.url + CHAT, json=BODY) as response:
                    await response.read()

    with capture("default") as cap, cvdiag.request_context(test_id="t-retries"):
        asyncio.run(run())
    calls = cap.llm_responses()  # default tier: only the failures are written
    got = [
        (c["outcome"], *_md(c, "attempt", "http_status", "error_type", "retry_after_ms", "error_class")) for c in calls
    ]
    assert got == [
        ("err", 0, 429, "rate_limit_exceeded", 2000, "HTTPStatusError"),
        ("err", 1, 500, "server_error", None, "HTTPStatusError"),
    ]


def test_aiohttp_raise_for_status_still_writes_the_failed_call(server):
    server.plan(CHAT, Reply.json(ERROR_500, 500))

    async def run():
        async with aiohttp.ClientSession(raise_for_status=True) as session:
            await session.post(server.url + CHAT, json=BODY)

    with capture("verbose") as cap, pytest.raises(aiohttp.ClientResponseError):
        asyncio.run(run())
    end = _one_call(cap, "aiohttp")
    assert (end["outcome"], *_md(end, "http_status", "error_class")) == ("err", 500, "HTTPStatusError")


def test_aiohttp_stream_cut_by_the_provider_is_err(server):
    pieces = Reply.sse("openai_chat_stream.sse").pieces[:3]
    server.plan(CHAT, Reply(pieces=pieces, headers={"content-type": "text/event-stream"}, cut=True))
    with capture("verbose") as cap, pytest.raises(aiohttp.ClientPayloadError):
        asyncio.run(_aiohttp_read(server.url, "readline"))
    end = _one_call(cap, "aiohttp")
    assert (end["outcome"], *_md(end, "error_class", "http_status", "output_chars")) == (
        "err",
        "ClientPayloadError",
        200,
        5,
    )


def test_aiohttp_body_given_up_or_cancelled_is_timeout(server):
    server.plan(CHAT, Reply.sse("openai_chat_stream.sse", delay=0.05))

    async def give_up():
        async with aiohttp.ClientSession() as session, session.post(server.url + CHAT, json=BODY) as response:
            while b"Hello" not in await response.content.readline():
                pass

    async def cancelled():
        task = asyncio.create_task(_aiohttp_read(server.url, "readline"))
        await asyncio.sleep(0.15)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    with capture("verbose") as cap:
        asyncio.run(give_up())
        asyncio.run(cancelled())
    calls = cap.llm_responses()
    assert [(c["outcome"], *_md(c, "error_class", "http_status")) for c in calls] == [
        ("timeout", "CancelledError", 200)
    ] * 2
    assert all(c["metadata"]["finish_reason"] is None for c in calls)


def test_aiohttp_session_made_before_instrument_is_covered_and_headers_keep_their_order(server):
    cvdiag.uninstrument()
    server.plan("/echo", Reply.json(b"{}"))

    async def run():
        session = aiohttp.ClientSession(headers={"x-app": "1"})
        cvdiag.instrument()
        try:
            async with session.post(server.url + "/echo", headers={"X-Test-Id": "mine", "x-one": "a"}) as r:
                await r.read()
            async with session.get(server.url + "/echo", headers=[("x-one", "a"), ("x-two", "b")]) as r:
                await r.read()
        finally:
            await session.close()

    token = bind(new_context(test_id="t-before", forward={"x-diag-hops": "3"}))
    try:
        asyncio.run(run())
    finally:
        unbind(token)
    (_, first), (_, second) = server.requests[-2:]
    assert first["x-test-id"] == "mine"  # the caller's header wins
    assert second["x-test-id"] == "t-before" and second["x-diag-hops"] == "3"
    names = list(second)
    assert names.index("x-one") < names.index("x-two") < names.index("x-test-id")


# -- requests and urllib3 --------------------------------------------------------------


def _requests_read(url: str, style: str, body: dict = BODY) -> bytes:
    with requests.Session() as session:
        response = session.post(url + CHAT, json=body, stream=style != "content")
        with response:
            if style == "content":
                return response.content
            if style == "iter_content":
                return b"".join(response.iter_content(13))
            if style == "iter_lines":
                return b"\n".join(response.iter_lines(delimiter=b"\n"))
            if style == "raw_stream":
                return b"".join(response.raw.stream(7, decode_content=True))
            if style == "raw_read":
                return response.raw.read(decode_content=True)
            raise AssertionError(style)


@pytest.mark.parametrize("style", ["content", "iter_content", "iter_lines", "raw_stream", "raw_read"])
@pytest.mark.parametrize("chunked", [True, False], ids=["chunked", "content-length"])
def test_requests_every_reading_style_gets_the_bytes_and_one_call(server, style, chunked):
    headers = {} if chunked else {"content-length": str(len(RECORDED))}
    server.plan(CHAT, Reply.sse("openai_chat_stream.sse", piece=37, headers=headers))
    with capture("verbose") as cap, cvdiag.request_context(test_id="t-requests"):
        got = _requests_read(server.url, style)
    assert got == RECORDED
    end = _one_call(cap, "urllib3")
    assert end["test_id"] == "t-requests" and happy(end) == HAPPY
    assert server.requests[-1][1]["x-test-id"] == "t-requests"


def test_requests_gzip_and_urllib3_preloaded_bodies(server):
    server.plan(CHAT, Reply.sse("openai_chat_stream.sse", gzip=True))
    with capture("verbose") as cap:
        assert _requests_read(server.url, "iter_content") == RECORDED
        assert urllib3.PoolManager().request("POST", server.url + CHAT, json=BODY).data == RECORDED
    assert [happy(e) for e in cap.llm_responses()] == [HAPPY, HAPPY]


def test_requests_in_a_thread_keeps_the_test_id_when_the_context_goes_with_it(server):
    server.plan(CHAT, Reply.sse("openai_chat_stream.sse"))
    seen: list[str] = []

    def work() -> None:
        _requests_read(server.url, "content")
        seen.append(server.requests[-1][1].get("x-test-id", ""))

    async def to_thread() -> None:
        await asyncio.to_thread(work)  # asyncio copies the context into the thread

    with capture("verbose") as cap, cvdiag.request_context(test_id="t-thread"):
        asyncio.run(to_thread())
        worker = threading.Thread(target=cvdiag.wrap(work))
        worker.start()
        worker.join()
        ctx = contextvars.copy_context()
        worker = threading.Thread(target=ctx.run, args=(work,))
        worker.start()
        worker.join()
    assert seen == ["t-thread"] * 3
    assert {c["test_id"] for c in cap.llm_responses()} == {"t-thread"}


def test_requests_cut_stream_is_err_and_a_closed_one_is_timeout(server):
    pieces = Reply.sse("openai_chat_stream.sse").pieces[:3]
    server.plan(
        CHAT,
        Reply(pieces=pieces, headers={"content-type": "text/event-stream"}, cut=True),
        Reply.sse("openai_chat_stream.sse", delay=0.02),
    )
    with capture("verbose") as cap:
        with pytest.raises(requests.exceptions.ChunkedEncodingError):
            _requests_read(server.url, "iter_lines")
        with requests.post(server.url + CHAT, json=BODY, stream=True) as response:
            next(response.iter_lines())
    cut, closed = cap.llm_responses()
    assert (cut["outcome"], *_md(cut, "error_class", "http_status", "output_chars")) == ("err", "ProtocolError", 200, 5)
    assert (closed["outcome"], *_md(closed, "error_class")) == ("timeout", "CancelledError")


def test_requests_500_json_error_names_the_provider_error(server):
    server.plan(CHAT, Reply.json(ERROR_500, 500, headers={"request-id": "req_5"}))
    with capture("verbose") as cap:
        assert requests.post(server.url + CHAT, json=BODY).status_code == 500
    end = _one_call(cap, "urllib3")
    assert (end["outcome"], *_md(end, "http_status", "error_type", "request_id")) == (
        "err",
        500,
        "server_error",
        "req_5",
    )


# -- every client: what is not an LLM call, switches, undo, import order ----------------


def test_requests_that_are_not_llm_calls_write_nothing_but_carry_the_id(server):
    server.plan("/v1/users", Reply.json(b'{"model":"x"}'))
    with capture("verbose") as cap, cvdiag.request_context(test_id="t-plain"):
        requests.post(server.url + "/v1/users", json={"model": "x"})
        asyncio.run(_aiohttp_plain(server.url + "/v1/users"))
    assert cap.events() == []
    assert [h["x-test-id"] for _, h in server.requests[-2:]] == ["t-plain", "t-plain"]


async def _aiohttp_plain(url: str) -> None:
    async with aiohttp.ClientSession() as session, session.post(url, json={"model": "x"}) as r:
        await r.read()


def test_nothing_is_written_while_cvdiag_is_disabled(server, capsys):
    server.plan(CHAT, Reply.sse("openai_chat_stream.sse"))
    assert asyncio.run(_aiohttp_read(server.url, "read")) == RECORDED
    assert _requests_read(server.url, "content") == RECORDED
    assert capsys.readouterr() == ("", "")


def test_switches_undo_and_idempotence(server, monkeypatch):
    from aiohttp import ClientSession
    from urllib3.connectionpool import HTTPConnectionPool

    originals = (ClientSession._request, HTTPConnectionPool.urlopen)
    cvdiag.uninstrument()
    bare = (ClientSession._request, HTTPConnectionPool.urlopen)
    assert bare != originals
    states = cvdiag.instrument(aiohttp=False)
    assert (states["aiohttp"], states["urllib3"]) == ("off", "on")
    assert ClientSession._request is bare[0] and HTTPConnectionPool.urlopen is not bare[1]
    monkeypatch.setenv("CVDIAG_INSTRUMENT_OFF", "requests, botocore")
    states = cvdiag.instrument()
    assert (states["aiohttp"], states["urllib3"], states["botocore"]) == ("on", "off", "off")
    assert HTTPConnectionPool.urlopen is bare[1]
    monkeypatch.delenv("CVDIAG_INSTRUMENT_OFF")
    cvdiag.instrument()
    cvdiag.instrument()
    server.plan("/echo", Reply.json(b"{}"))
    with cvdiag.request_context(test_id="t-twice"):
        r = requests.get(server.url + "/echo")
    assert r.request.headers.get("x-test-id") is None  # the caller's own headers are not changed
    assert [k for k in server.requests[-1][1] if k == "x-test-id"] == ["x-test-id"]
    cvdiag.uninstrument()
    assert (ClientSession._request, HTTPConnectionPool.urlopen) == bare


def test_a_library_imported_after_instrument_is_instrumented_on_import():
    code = """
import sys, cvdiag
states = cvdiag.instrument()
assert "aiohttp" not in sys.modules and "urllib3" not in sys.modules, sys.modules.keys()
assert (states["aiohttp"], states["urllib3"]) == ("pending", "pending"), states
import requests, aiohttp
from aiohttp import ClientSession
from urllib3.connectionpool import HTTPConnectionPool
assert ClientSession._request.__module__ == "cvdiag.write._aiohttp_capture"
assert HTTPConnectionPool.urlopen.__module__ == "cvdiag.write._urllib3_capture"
assert cvdiag.instrument()["aiohttp"] == "on"
cvdiag.uninstrument()
assert ClientSession._request.__module__ == "aiohttp.client"
print("ok")
"""
    # httpx is imported by instrument() and must not pull aiohttp or urllib3 in with it.
    code = "import sys; sys.modules['httpx'] = sys.modules['httpx2'] = None\n" + code
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.stdout.strip() == "ok", done.stderr


def test_importing_cvdiag_and_instrumenting_start_no_thread():
    code = """
import threading, cvdiag
cvdiag.instrument()
import aiohttp, requests
print(threading.active_count())
"""
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.stdout.strip() == "1", done.stderr


# -- the same bytes with and without cvdiag, whatever the pieces and the reads ---------


_SSE = st.lists(
    st.text(alphabet=st.characters(codec="utf-8", exclude_characters="\r"), max_size=40), min_size=1, max_size=12
).map(
    lambda texts: (
        b"".join(b"data: " + json.dumps({"choices": [{"delta": {"content": t}}]}).encode() + b"\n\n" for t in texts)
        + b"data: [DONE]\n\n"
    )
)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(body=_SSE, piece=st.integers(1, 64), style=st.sampled_from(["iter_chunked", "iter_any", "readline", "read"]))
def test_aiohttp_bytes_are_the_same_with_and_without_cvdiag(server, body, piece, style):
    reply = Reply.sse(body, piece=piece)
    server.plan(CHAT, reply, reply)
    with capture("verbose") as cap:
        watched = asyncio.run(_aiohttp_read(server.url, style))
    cvdiag.uninstrument()
    try:
        bare = asyncio.run(_aiohttp_read(server.url, style))
    finally:
        cvdiag.instrument()
    assert watched == bare == body
    (end,) = cap.llm_responses()
    assert end["outcome"] == "ok"


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    body=_SSE,
    piece=st.integers(1, 64),
    style=st.sampled_from(["iter_content", "iter_lines", "raw_stream", "raw_read", "content"]),
)
def test_requests_bytes_are_the_same_with_and_without_cvdiag(server, body, piece, style):
    reply = Reply.sse(body, piece=piece)
    server.plan(CHAT, reply, reply)
    with capture("verbose") as cap:
        watched = _requests_read(server.url, style)
    cvdiag.uninstrument()
    try:
        bare = _requests_read(server.url, style)
    finally:
        cvdiag.instrument()
    assert watched == bare
    (end,) = cap.llm_responses()
    assert end["outcome"] == "ok"


def test_a_gzip_bomb_is_read_in_bounded_steps_and_passed_on_whole(server):
    bomb = b"data: " + b"x" * (4 << 20) + b"\n\n"
    server.plan(CHAT, Reply(pieces=[bomb], headers={"content-type": "text/event-stream"}, gzip=True))
    with capture("verbose") as cap:
        got = _requests_read(server.url, "iter_content")
        got2 = asyncio.run(_aiohttp_read(server.url, "iter_any", auto_decompress=False))
    assert got == bomb and gzip.decompress(got2) == bomb
    assert len(cap.llm_responses()) == 2


@pytest.mark.parametrize("lib", ["httpx", "httpx2"])
def test_httpx_lines_name_their_library_too(server, lib):
    module = __import__(lib)
    server.plan(CHAT, Reply.sse("openai_chat_stream.sse"))
    with capture("verbose") as cap, module.Client() as client:
        assert client.post(server.url + CHAT, json=BODY).content == RECORDED
    assert happy(_one_call(cap, lib)) == HAPPY


def test_a_reader_that_breaks_never_reaches_the_caller(server, monkeypatch):
    from cvdiag.write import _llm_stream

    def broken(self, data):
        raise RuntimeError("a bug in cvdiag's reader")

    monkeypatch.setattr(_llm_stream.AnswerReader, "feed", broken)
    server.plan(CHAT, Reply.sse("openai_chat_stream.sse", piece=37))
    with capture("verbose", strict=False) as cap:
        assert asyncio.run(_aiohttp_read(server.url, "iter_any")) == RECORDED
        assert _requests_read(server.url, "iter_content") == RECORDED
    assert [c["outcome"] for c in cap.llm_responses()] == ["ok", "ok"]  # whole bodies, facts unknown
    assert cvdiag.stats()["internal_errors"] >= 2


def test_a_wrapper_put_over_ours_stays_after_uninstrument_and_ours_passes_through(server):
    from aiohttp import ClientSession
    from urllib3.connectionpool import HTTPConnectionPool

    cvdiag.uninstrument()
    bare = (ClientSession._request, HTTPConnectionPool.urlopen)
    cvdiag.instrument()
    ours = (ClientSession._request, HTTPConnectionPool.urlopen)
    seen: list[str] = []

    async def their_request(self, *args, **kwargs):
        seen.append("aiohttp")
        return await ours[0](self, *args, **kwargs)

    def their_urlopen(self, *args, **kwargs):
        seen.append("urllib3")
        return ours[1](self, *args, **kwargs)

    ClientSession._request, HTTPConnectionPool.urlopen = their_request, their_urlopen
    try:
        cvdiag.uninstrument()
        assert (ClientSession._request, HTTPConnectionPool.urlopen) == (their_request, their_urlopen)
        server.plan("/echo", Reply.json(b"{}"))
        with cvdiag.request_context(test_id="t-under-theirs"):
            requests.get(server.url + "/echo")
            assert "x-test-id" not in server.requests[-1][1]  # ours is off: it only passes through

            async def one() -> None:
                async with aiohttp.ClientSession() as session, session.get(server.url + "/echo") as response:
                    await response.read()

            asyncio.run(one())
            assert "x-test-id" not in server.requests[-1][1]
        assert seen == ["urllib3", "aiohttp"]
        cvdiag.instrument()  # ours again, over theirs: theirs is what it calls
        assert ClientSession._request is ours[0] and HTTPConnectionPool.urlopen is ours[1]
    finally:
        cvdiag.uninstrument()
        ClientSession._request, HTTPConnectionPool.urlopen = bare
