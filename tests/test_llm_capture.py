"""LLM calls recognised at the HTTP client: real httpx/httpx2 clients and the real openai
and anthropic SDKs against a real local server serving recorded provider bytes."""

from __future__ import annotations

import asyncio
import gzip
import json
import threading

import anthropic
import httpx
import httpx2
import openai
import pytest
from emitkit import capture
from llm_server import DATA, LLMServer, Reply, llm_capture_on_fixture, server_fixture  # noqa: F401 (fixtures)

import cvdiag
from cvdiag.read.validate import problems
from cvdiag.testing import reset
from cvdiag.write.llm_routes import clear_llm_endpoints, register_llm_endpoint
from cvdiag.write.propagation import instrument_httpx

CLIENT_LIBRARIES = pytest.mark.parametrize("lib", [httpx, httpx2], ids=["httpx", "httpx2"])
CHAT = "/v1/chat/completions"
BODY = {"model": "gpt-4o-mini", "stream": True, "messages": [{"role": "user", "content": "hi"}]}
RECORDED_CHAT = (DATA / "openai_chat_stream.sse").read_bytes()
FAST_RETRY = {"retry-after-ms": "5"}


pytestmark = pytest.mark.usefixtures("llm_capture_on")


def _md(env: dict, *keys: str) -> tuple:
    return tuple(env["metadata"].get(k) for k in keys)


HAPPY = ("outcome", "http_status", "finish_reason", "prompt_tokens", "completion_tokens", "output_chars", "chunks")


def _happy(env: dict) -> tuple:
    return (env["outcome"], *_md(env, *HAPPY[1:]))


# -- plain clients, every way of reading the body --------------------------------------


@CLIENT_LIBRARIES
def test_sync_stream_read_raw_writes_start_and_one_response(server, lib):
    server.plan(CHAT, Reply.sse("openai_chat_stream.sse", piece=37))
    with (
        capture("verbose") as cap,
        cvdiag.request_context(test_id="t-lines"),
        lib.Client() as client,
        client.stream("POST", server.url + CHAT, json=BODY) as response,
    ):
        raw = b"".join(response.iter_raw())
    assert raw == RECORDED_CHAT  # the caller's bytes are untouched
    start, end = cap.events()
    assert start["boundary"] == "backend.llm.call.start" and start["test_id"] == end["test_id"] == "t-lines"
    assert _md(start, "provider", "model", "api", "stream", "attempt", "source") == (
        "openai-compatible",
        "gpt-4o-mini",
        "chat.completions",
        True,
        0,
        "http",
    )
    assert _happy(end) == ("ok", 200, "stop", 19, 7, 24, 7)
    assert isinstance(end["metadata"]["ttft_ms"], int) and end["duration_ms"] == end["metadata"]["latency_ms"]


@CLIENT_LIBRARIES
def test_sync_non_streamed_json_read_by_dot_json(server, lib):
    body = {
        "choices": [{"message": {"content": "Hello there"}, "finish_reason": "length"}],
        "usage": {"prompt_tokens": 4, "completion_tokens": 2},
    }
    server.plan(CHAT, Reply.json(json.dumps(body).encode(), headers={"x-request-id": "req_123"}))
    with capture("verbose") as cap, lib.Client() as client:
        got = client.post(server.url + CHAT, json={**BODY, "stream": False}).json()
    assert got == body
    (end,) = cap.llm_responses()
    assert (end["outcome"], *_md(end, "finish_reason", "output_chars", "chunks", "stream", "request_id")) == (
        "ok",
        "length",
        11,
        None,
        False,
        "req_123",
    )


@CLIENT_LIBRARIES
def test_async_stream_read_by_aiter_lines_and_by_aread(server, lib):
    server.plan(CHAT, Reply.sse("openai_chat_stream.sse", piece=11))

    async def run():
        async with lib.AsyncClient() as client:
            async with client.stream("POST", server.url + CHAT, json=BODY) as response:
                lines = [line async for line in response.aiter_lines()]
            response = await client.post(server.url + CHAT, json=BODY)
            return lines, response.content

    with capture("verbose") as cap:
        lines, content = asyncio.run(run())
    assert content == RECORDED_CHAT and any("Hello" in line for line in lines)
    assert [_happy(e) for e in cap.llm_responses()] == [("ok", 200, "stop", 19, 7, 24, 7)] * 2


@CLIENT_LIBRARIES
def test_gzipped_stream_is_read_and_the_caller_gets_the_same_text(server, lib):
    server.plan(CHAT, Reply.sse("openai_chat_stream.sse", gzip=True))
    with capture("verbose") as cap, lib.Client() as client:
        response = client.post(server.url + CHAT, json=BODY)
    assert response.headers["content-encoding"] == "gzip" and response.content == RECORDED_CHAT
    (end,) = cap.llm_responses()
    assert _happy(end) == ("ok", 200, "stop", 19, 7, 24, 7)


def test_requests_that_are_not_llm_calls_write_nothing(server):
    server.plan("/v1/users", Reply.json(b'{"model":"x"}'))
    server.plan("/v1/embeddings", Reply.json(b"{}"))
    with capture("debug") as cap, httpx2.Client() as client:
        responses = [
            client.post(server.url + "/v1/users", json={"model": "gpt-4o"}),
            client.get(server.url + CHAT),
            client.post(server.url + "/v1/embeddings", json={"input": "no model: an unrelated service"}),
        ]
    assert cap.events() == []
    assert {type(r.stream).__name__ for r in responses} == {"BoundSyncStream"}  # bodies never observed


def test_llm_false_and_the_environment_switch_turn_recognition_off(server, monkeypatch):
    server.plan(CHAT, Reply.sse("openai_chat_stream.sse"))
    with capture("debug") as cap, httpx2.Client() as client:
        instrument_httpx(llm=False)
        client.post(server.url + CHAT, json=BODY)
        monkeypatch.setenv("CVDIAG_LLM_CAPTURE", "0")
        instrument_httpx()
        client.post(server.url + CHAT, json=BODY)
        monkeypatch.setenv("CVDIAG_LLM_CAPTURE", "1")
        instrument_httpx()
        client.post(server.url + CHAT, json=BODY)
    assert len(cap.llm_responses()) == 1


def test_registered_gateway_endpoint_is_recognised(server):
    server.plan("/llm/v2/generate", Reply.sse("anthropic_messages_stream.sse"))
    register_llm_endpoint("/llm/v2/generate", api="messages", provider="acme-gateway")
    try:
        with capture("verbose") as cap, httpx2.Client() as client:
            client.post(server.url + "/llm/v2/generate", json={"model": "house-model", "stream": True})
    finally:
        clear_llm_endpoints()
    (end,) = cap.llm_responses()
    assert (*_md(end, "provider", "model", "api"), *_happy(end)) == (
        "acme-gateway",
        "house-model",
        "messages",
        "ok",
        200,
        "tool_use",
        25,
        15,
        23,
        11,
    )
    with pytest.raises(ValueError, match="api must be one of"):
        register_llm_endpoint("/x", api="chat", provider="p")


# -- the openai SDK --------------------------------------------------------------------


def _openai(server: LLMServer, **kwargs) -> openai.OpenAI:
    return openai.OpenAI(base_url=server.url + "/v1", api_key="sk-test-1", **kwargs)


def test_openai_sdk_stream_and_non_stream(server):
    server.plan(CHAT, Reply.sse("openai_chat_stream.sse"))
    client = _openai(server)
    with capture("verbose") as cap:
        stream = client.chat.completions.create(model="gpt-4o-mini", messages=[], stream=True)
        text = "".join(c.choices[0].delta.content or "" for c in stream if c.choices)
    assert text == 'Hello, wörld!\n Say "hi".'
    (end,) = cap.llm_responses()
    assert _happy(end) == ("ok", 200, "stop", 19, 7, 24, 7)


def test_openai_sdk_retries_are_each_a_call_with_their_attempt(server):
    error = json.dumps({"error": {"message": "boom", "type": "server_error", "code": None}}).encode()
    server.plan(
        CHAT,
        Reply.json(error, 500, headers=FAST_RETRY),
        Reply.json(error, 500, headers=FAST_RETRY),
        Reply.sse("openai_chat_stream.sse"),
    )
    with capture("verbose") as cap:
        stream = _openai(server, max_retries=2).chat.completions.create(model="gpt-4o-mini", messages=[], stream=True)
        list(stream)
    calls = cap.llm_responses()
    assert [_md(e, "attempt", "http_status", "error_type", "error_class", "retry_after_ms") for e in calls] == [
        (0, 500, "server_error", "HTTPStatusError", 5),
        (1, 500, "server_error", "HTTPStatusError", 5),
        (2, 200, None, None, None),
    ]
    assert [e["outcome"] for e in calls] == ["err", "err", "ok"]
    assert [h.get("x-stainless-retry-count") for _, h in server.requests] == ["0", "1", "2"]


def test_a_client_without_a_retry_count_gets_attempts_counted_until_reset(server):
    """Same test id, path and body after a failure is the next attempt; ``reset()``
    forgets the failures, so a test that counts attempts starts from 0."""
    server.plan(CHAT, Reply.json(b'{"error": {"type": "server_error"}}', 500))
    attempts = []
    for forget in (False, False, True, False):
        if forget:
            reset()
        with capture("default") as cap, cvdiag.request_context(test_id="retrying"), httpx.Client() as client:
            client.post(server.url + CHAT, json=BODY)
        attempts += [_md(e, "attempt") for e in cap.llm_responses()]
    assert attempts == [(0,), (1,), (0,), (1,)]


def test_rate_limit_429_at_default_tier_writes_the_failed_call_only(server):
    error = json.dumps({"error": {"message": "slow down", "type": "requests", "code": "rate_limit_exceeded"}})
    server.plan(CHAT, Reply.json(error.encode(), 429, headers={"retry-after": "2", "x-request-id": "req_429"}))
    with capture("default") as cap, pytest.raises(openai.RateLimitError):
        _openai(server, max_retries=0).chat.completions.create(model="gpt-4o-mini", messages=[])
    assert cap.boundaries() == ["backend.llm.call.response"]  # promoted; its start stays verbose
    (end,) = cap.llm_responses()
    assert (end["outcome"], *_md(end, "http_status", "error_type", "retry_after_ms", "request_id", "attempt")) == (
        "err",
        429,
        "rate_limit_exceeded",
        2000,
        "req_429",
        0,
    )


def test_stream_cut_by_the_provider_is_err_with_the_transport_error(server):
    pieces = Reply.sse("openai_chat_stream.sse").pieces[:3]
    server.plan(CHAT, Reply(pieces=pieces, headers={"content-type": "text/event-stream"}, cut=True))
    with capture("verbose") as cap, pytest.raises(openai.APIConnectionError):
        list(_openai(server, max_retries=0).chat.completions.create(model="gpt-4o-mini", messages=[], stream=True))
    (end,) = cap.llm_responses()
    # The class the transport raised, under the SDK's wrapper: the connection broke mid-body.
    assert (end["outcome"], *_md(end, "error_class", "http_status", "output_chars")) == (
        "err",
        "RemoteProtocolError",
        200,
        5,
    )


def test_stream_ending_without_its_terminal_event_is_incomplete(server):
    pieces = Reply.sse("openai_chat_stream.sse").pieces[:3]
    server.plan(CHAT, Reply(pieces=pieces, headers={"content-type": "text/event-stream"}))
    with capture("verbose") as cap:
        list(_openai(server).chat.completions.create(model="gpt-4o-mini", messages=[], stream=True))
    (end,) = cap.llm_responses()
    assert (end["outcome"], *_md(end, "error_class", "finish_reason")) == ("err", "IncompleteStream", None)


def test_caller_abandoning_the_stream_is_timeout_cancelled(server):
    server.plan(CHAT, Reply.sse("openai_chat_stream.sse", delay=0.02))
    with capture("verbose") as cap:
        stream = _openai(server).chat.completions.create(model="gpt-4o-mini", messages=[], stream=True)
        for chunk in stream:
            if chunk.choices and chunk.choices[0].delta.content:
                break
        stream.close()
    (end,) = cap.llm_responses()
    assert (end["outcome"], *_md(end, "error_class", "http_status")) == ("timeout", "CancelledError", 200)
    assert end["metadata"]["output_chars"] >= 5


def test_async_openai_stream_cancelled_mid_way_is_timeout(server):
    server.plan(CHAT, Reply.sse("openai_chat_stream.sse", delay=0.2))
    got_first = asyncio.Event

    async def run():
        first = got_first()
        client = openai.AsyncOpenAI(base_url=server.url + "/v1", api_key="sk-test-1")

        async def consume():
            stream = await client.chat.completions.create(model="gpt-4o-mini", messages=[], stream=True)
            async for _ in stream:
                first.set()

        task = asyncio.create_task(consume())
        await first.wait()
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        await client.close()

    with capture("verbose") as cap:
        asyncio.run(run())
    (end,) = cap.llm_responses()
    assert (end["outcome"], end["metadata"]["error_class"]) == ("timeout", "CancelledError")


def test_async_openai_stream_and_responses_api(server):
    server.plan(CHAT, Reply.sse("openai_chat_stream.sse"))
    server.plan("/v1/responses", Reply.sse("openai_responses_stream.sse"))

    async def run():
        client = openai.AsyncOpenAI(base_url=server.url + "/v1", api_key="sk-test-1")
        stream = await client.chat.completions.create(model="gpt-4o-mini", messages=[], stream=True)
        async for _ in stream:
            pass
        events = await client.responses.create(model="gpt-4o-mini", input="hi", stream=True)
        async for _ in events:
            pass
        await client.close()

    with capture("verbose") as cap:
        asyncio.run(run())
    chat, responses = cap.llm_responses()
    assert _happy(chat) == ("ok", 200, "stop", 19, 7, 24, 7)
    assert (*_happy(responses), responses["metadata"]["api"]) == ("ok", 200, "completed", 11, 3, 8, 9, "responses")


# -- the anthropic SDK -----------------------------------------------------------------


def test_anthropic_sdk_stream_and_overloaded_error(server):
    overloaded = json.dumps({"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}})
    server.plan(
        "/v1/messages",
        Reply.json(overloaded.encode(), 529, headers={**FAST_RETRY, "request-id": "req_ant"}),
        Reply.sse("anthropic_messages_stream.sse", piece=50),
    )
    client = anthropic.Anthropic(base_url=server.url, api_key="sk-ant-test", max_retries=1)
    with (
        capture("verbose") as cap,
        client.messages.stream(model="claude-3-5-sonnet-20241022", max_tokens=64, messages=[]) as stream,
    ):
        text = "".join(stream.text_stream)
    assert text == "Hello!"
    failed, ok = cap.llm_responses()
    assert (failed["outcome"], *_md(failed, "provider", "http_status", "error_type", "request_id", "attempt")) == (
        "err",
        "anthropic-compatible",
        529,
        "overloaded_error",
        "req_ant",
        0,
    )
    assert (*_happy(ok), ok["metadata"]["attempt"]) == ("ok", 200, "tool_use", 25, 15, 23, 11, 1)


# -- manual scopes: enriched, never doubled ---------------------------------------------


def test_inside_llm_call_the_http_exchange_enriches_the_scope(server):
    server.plan(CHAT, Reply.sse("openai_chat_stream.sse"))
    client = _openai(server)
    with capture("verbose") as cap, cvdiag.agent_scope("planner"), cvdiag.llm_call("openai", "gpt-4o-mini"):
        list(client.chat.completions.create(model="gpt-4o-mini", messages=[], stream=True))
    assert cap.boundaries() == [
        "backend.agent.enter",
        "backend.llm.call.start",
        "backend.llm.call.response",
        "backend.agent.exit",
    ]
    (end,) = cap.llm_responses()
    assert (*_happy(end), *_md(end, "source", "provider", "api", "attempt")) == (
        "ok",
        200,
        "stop",
        19,
        7,
        24,
        7,
        "scope",
        "openai",
        "chat.completions",
        0,
    )
    assert isinstance(end["metadata"]["ttft_ms"], int)


# -- heartbeats ------------------------------------------------------------------------


def test_slow_call_heartbeats_while_open_and_never_after(server):
    server.plan(CHAT, Reply.sse("openai_chat_stream.sse", delay=0.05))
    instrument_httpx(llm=True, heartbeat_s=0.03)
    with capture("verbose") as cap, httpx2.Client() as client:
        client.post(server.url + CHAT, json=BODY)
        threading.Event().wait(0.1)
    names = cap.boundaries()
    assert names[0] == "backend.llm.call.start" and names[-1] == "backend.llm.call.response"
    assert names.count("backend.llm.call.heartbeat") >= 3


def test_gzip_error_body_still_names_the_error(server):
    error = json.dumps({"error": {"code": 429, "status": "RESOURCE_EXHAUSTED"}}).encode()
    server.plan("/v1beta/models/gemini-2.0-flash:streamGenerateContent", Reply.json(error, 429, gzip=True))
    with capture("default") as cap, httpx2.Client() as client:
        response = client.post(
            server.url + "/v1beta/models/gemini-2.0-flash:streamGenerateContent?alt=sse", json={"contents": []}
        )
    assert response.json() == json.loads(gzip.decompress(gzip.compress(error)))
    (end,) = cap.llm_responses()
    assert _md(end, "provider", "model", "api", "stream", "error_type") == (
        "gemini-compatible",
        "gemini-2.0-flash",
        "generate_content",
        True,
        "RESOURCE_EXHAUSTED",
    )


# -- the contract -----------------------------------------------------------------------


def test_failed_llm_call_scope_is_promoted_to_the_default_tier():
    class ProviderDown(Exception):
        pass

    with capture("default") as cap, pytest.raises(ProviderDown), cvdiag.llm_call("openai", "gpt-4o-mini"):
        raise ProviderDown
    with capture("default") as ok_cap, cvdiag.llm_call("openai", "gpt-4o-mini"):
        pass
    assert cap.boundaries() == ["backend.llm.call.response"] and ok_cap.boundaries() == []
    assert _md(cap.one("backend.llm.call.response"), "error_class", "source") == ("ProviderDown", "scope")


def test_validator_checks_the_llm_keys(server):
    server.plan(CHAT, Reply.sse("openai_chat_stream.sse"))
    with capture("verbose") as cap, httpx2.Client() as client:
        client.post(server.url + CHAT, json=BODY)
    (end,) = cap.llm_responses()
    bad = {**end, "metadata": {**end["metadata"], "attempt": -1, "api": "chat", "http_status": 42, "stream": "yes"}}
    assert problems(bad) == [
        "metadata api is not one of chat.completions, responses, completions, embeddings, messages, "
        "generate_content, other",
        "metadata stream is not a boolean",
        "metadata attempt is not a count (int >= 0)",
        "metadata http_status is not an HTTP status (100-599)",
    ]


def test_anthropic_and_responses_non_streamed_answers(server):
    message = {
        "id": "msg_1",
        "type": "message",
        "role": "assistant",
        "model": "claude-3-5-sonnet-20241022",
        "content": [{"type": "text", "text": "Bonjour"}],
        "stop_reason": "max_tokens",
        "stop_sequence": None,
        "usage": {"input_tokens": 6, "output_tokens": 2},
    }
    server.plan("/v1/messages", Reply.json(json.dumps(message).encode(), headers={"request-id": "req_a1"}))
    client = anthropic.Anthropic(base_url=server.url, api_key="sk-ant-test", max_retries=0)
    with capture("verbose") as cap:
        answer = client.messages.create(model="claude-3-5-sonnet-20241022", max_tokens=2, messages=[])
    assert answer.content[0].text == "Bonjour"
    (end,) = cap.llm_responses()
    assert (end["outcome"], *_md(end, "api", "stream", "finish_reason", "prompt_tokens", "output_chars")) == (
        "ok",
        "messages",
        False,
        "max_tokens",
        6,
        7,
    )
    assert _md(end, "request_id", "completion_tokens", "chunks", "ttft_ms") == ("req_a1", 2, None, None)


_COLLECTED_UNDER_A_LOCK = r"""
import gc, json, os, sys
os.environ.update(CVDIAG_ENABLED="1", CVDIAG_STDOUT="0", CVDIAG_TIER="verbose", CVDIAG_FILE=sys.argv[1])
import httpx
import cvdiag
from cvdiag.write import _llm_capture as llm_capture
from cvdiag.write.context import new_context
from cvdiag.write.llm_routes import LLMRoute

route = LLMRoute("openai", "chat.completions", "m", True)
lost = llm_capture.Exchange(route, new_context(), None, 0)
lost._retry_key = ("t", "/v1/chat/completions", 1)
lost.start()
body = llm_capture._observed_types(httpx.Client)[0](object(), lost)
body.cycle = body  # httpx keeps Response -> stream -> Response: only the cyclic GC frees it
del body, lost
gc.disable()
with llm_capture.between_calls.lock:  # held while ending a call allocates; the GC may run right here
    gc.collect()
next_call = llm_capture.Exchange(route, new_context(), None, 0)
next_call.start()  # the next call ends the one nobody closed
cvdiag.flush()
print("done")
"""


def test_a_body_nobody_closed_never_deadlocks_the_collector_and_still_ends(tmp_path) -> None:
    """The garbage collector can free an unclosed body on a thread that holds one of
    cvdiag's locks: ending the call there would deadlock. It ends at the next call."""
    import subprocess
    import sys

    out = tmp_path / "lines.ndjson"
    script = tmp_path / "collect.py"
    script.write_text(_COLLECTED_UNDER_A_LOCK)
    done = subprocess.run([sys.executable, str(script), str(out)], capture_output=True, text=True, timeout=60)
    assert done.stdout.strip() == "done", done.stderr
    lines = [json.loads(line) for line in out.read_text().splitlines()]
    ended = [e for e in lines if e["boundary"] == "backend.llm.call.response"]
    assert [(e["outcome"], e["metadata"]["error_class"]) for e in ended] == [("timeout", "CancelledError")]
    assert sum(e["boundary"] == "backend.llm.call.start" for e in lines) == 2


def test_a_secret_in_a_request_id_is_scrubbed_before_it_is_cut(server) -> None:
    key = "sk-proj-" + "Zx9Q" * 30  # past the 64 characters a request id is cut to
    server.plan(CHAT, Reply.json(b'{"choices":[]}', headers={"x-request-id": "req_" + "9" * 52 + ";" + key}))
    with capture("verbose") as cap, httpx.Client() as client:
        client.post(server.url + CHAT, json={**BODY, "stream": False})
    (end,) = cap.llm_responses()
    assert "sk-pr" not in json.dumps(end) and "Zx9Q" not in json.dumps(end)


def test_a_token_count_no_64_bit_field_holds_still_writes_the_call(server) -> None:
    """A provider (or a proxy) can put any number in usage: the line is still written."""
    body = {
        "choices": [{"message": {"content": "Hi"}, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 123456789012345678901234, "completion_tokens": 2},
    }
    server.plan(CHAT, Reply.json(json.dumps(body).encode()))
    with capture("verbose") as cap, httpx.Client() as client:
        client.post(server.url + CHAT, json={**BODY, "stream": False}).json()
    (end,) = cap.llm_responses()
    assert (end["outcome"], *_md(end, "prompt_tokens", "completion_tokens", "output_chars")) == ("ok", None, 2, 2)


def test_a_stream_read_after_its_llm_call_block_closed_is_a_call_of_its_own(server) -> None:
    """A helper opens the stream inside ``llm_call`` and returns it; the caller reads it
    after the block: the scope's line is written, and the attempt is not lost."""
    server.plan(CHAT, Reply.sse("openai_chat_stream.sse", piece=11))
    with capture("verbose") as cap, httpx.Client() as client:
        with cvdiag.llm_call("openai", "gpt-4o-mini"):
            request = client.build_request("POST", server.url + CHAT, json={**BODY, "stream": True})
            response = client.send(request, stream=True)
        response.read()
        response.close()
    ends = cap.llm_responses()
    assert [(e["outcome"], e["metadata"]["source"]) for e in ends] == [("ok", "scope"), ("ok", "http")]
    assert ends[1]["metadata"]["finish_reason"] == "stop" and ends[1]["metadata"]["output_chars"] > 0


def test_closing_an_error_body_that_stalls_is_quick_and_still_ends_the_call(server) -> None:
    """An SDK closes a 5xx body unread before it retries; cvdiag reads a little of it for
    the provider's error type, but a body that stalls after its headers (a proxy's 502)
    must not hold the close for the client's whole read timeout."""
    server.plan(CHAT, Reply.json(b'{"error":{"type":"server_error"}}', status=502, delay=15.0))

    async def run() -> None:
        async with httpx.AsyncClient(timeout=60) as client:
            request = client.build_request("POST", server.url + CHAT, json={**BODY, "stream": True})
            response = await client.send(request, stream=True)
            assert response.status_code == 502
            await asyncio.wait_for(response.aclose(), 10)  # a hang guard, not a speed test

    with capture("verbose") as cap:
        asyncio.run(run())
    (end,) = cap.llm_responses()
    assert (end["outcome"], *_md(end, "http_status", "error_class")) == ("err", 502, "HTTPStatusError")
