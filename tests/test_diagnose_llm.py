"""Diagnosis from LLM calls seen at the HTTP client: envelopes written by the real
emitter while the real openai SDK talks to a real local server, then diagnosed."""

from __future__ import annotations

import json

import openai
import pytest
from cvdiag_cli import run
from emitkit import capture
from llm_server import LLMServer, Reply, llm_capture_on_fixture, server_fixture  # noqa: F401 (fixtures)
from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.responses import JSONResponse
from starlette.routing import Route
from starlette.testclient import TestClient

import cvdiag
from cvdiag.diagnosis import diagnose
from cvdiag.write.middleware import CvdiagMiddleware

CHAT = "/v1/chat/completions"
FAST_RETRY = {"retry-after-ms": "5"}
SERVER_ERROR = json.dumps({"error": {"message": "boom", "type": "server_error", "code": None}}).encode()


pytestmark = pytest.mark.usefixtures("llm_capture_on")


def _client(server: LLMServer, retries: int) -> openai.OpenAI:
    return openai.OpenAI(base_url=server.url + "/v1", api_key="sk-test-1", max_retries=retries)


def _chat(server: LLMServer, retries: int = 2, *, stream: bool = True) -> None:
    client = _client(server, retries)
    with cvdiag.agent_scope("support"):
        if stream:
            list(client.chat.completions.create(model="gpt-4o-mini", messages=[], stream=True))
        else:
            client.chat.completions.create(model="gpt-4o-mini", messages=[])


def _diagnosis(cap) -> tuple[str, str]:
    verdict = diagnose(cap.events())
    return verdict.cls, verdict.reason


def test_every_attempt_failing_names_status_type_and_attempts(server):
    server.plan(CHAT, Reply.json(SERVER_ERROR, 500, headers=FAST_RETRY))
    with capture("verbose") as cap, pytest.raises(openai.InternalServerError):
        _chat(server)
    cls, reason = _diagnosis(cap)
    assert cls == "llm-error"
    assert "3 attempts, all HTTP 500 (server_error)" in reason and "openai-compatible/gpt-4o-mini" in reason


def test_rate_limit_names_its_retry_after_even_at_the_default_tier(server):
    limited = json.dumps({"error": {"message": "slow", "type": "requests", "code": "rate_limit_exceeded"}})
    server.plan(CHAT, Reply.json(limited.encode(), 429, headers={"retry-after": "2"}))
    with capture("default") as cap, pytest.raises(openai.RateLimitError):
        _chat(server, retries=0)
    cls, reason = _diagnosis(cap)
    assert cls == "llm-error"
    assert "1 attempt, HTTP 429 (rate_limit_exceeded); retry-after 2.0 s" in reason


def test_retries_that_recovered_are_not_the_cause(server):
    server.plan(CHAT, Reply.json(SERVER_ERROR, 500, headers=FAST_RETRY), Reply.sse("openai_chat_stream.sse"))

    async def chat(request):
        await run_in_threadpool(_chat, server)
        return JSONResponse({"answer": "ok"})

    app = CvdiagMiddleware(Starlette(routes=[Route("/chat", chat)]), slug="support")
    with capture("verbose") as cap, TestClient(app) as client:
        assert client.get("/chat").status_code == 200
    assert [e["outcome"] for e in cap.of("backend.llm.call.response")] == ["err", "ok"]
    assert _diagnosis(cap) == (
        "ok",
        f"No failure found ({len(cap.events())} events; HTTP 200; 1 failed LLM attempt recovered by a retry).",
    )


def test_empty_answer_is_provider_empty_whatever_tokens_it_claims(server):
    empty = (
        b'data: {"choices":[{"index":0,"delta":{"role":"assistant","content":""},"finish_reason":null}]}\n\n'
        b'data: {"choices":[{"index":0,"delta":{},"finish_reason":"stop"}],'
        b'"usage":{"prompt_tokens":9,"completion_tokens":4}}\n\n'
        b"data: [DONE]\n\n"
    )
    server.plan(CHAT, Reply.sse(empty))
    with capture("verbose") as cap:
        _chat(server)
    cls, reason = _diagnosis(cap)
    assert (cls, reason) == (
        "provider-empty",
        "LLM call to openai-compatible/gpt-4o-mini answered ok but produced 0 characters of output "
        "(the provider claimed 4 tokens).",
    )


def test_stream_of_no_events_is_not_a_healthy_ok(server):
    server.plan(CHAT, Reply(pieces=[b": keep-alive\n\n"], headers={"content-type": "text/event-stream"}))
    with capture("verbose") as cap:
        _chat(server)
    (llm,) = [e for e in cap.events() if e["boundary"] == "backend.llm.call.response"]
    assert (llm["outcome"], llm["metadata"]["chunks"], llm["metadata"]["error_class"]) == ("err", 0, "IncompleteStream")
    assert _diagnosis(cap)[0] == "llm-error"


def test_agent_failure_names_its_exception_class():
    class ToolFailed(Exception):
        pass

    with capture("verbose") as cap, pytest.raises(ToolFailed), cvdiag.agent_scope("support"):
        raise ToolFailed("order lookup broke")
    (exit_,) = [e for e in cap.events() if e["boundary"] == "backend.agent.exit"]
    assert exit_["metadata"]["error_class"] == "ToolFailed"
    cls, reason = _diagnosis(cap)
    assert cls == "agent-error" and "raising ToolFailed" in reason


def test_transport_error_names_its_class_and_attempts(server):
    pieces = Reply.sse("openai_chat_stream.sse").pieces[:2]
    server.plan(CHAT, Reply(pieces=pieces, headers={"content-type": "text/event-stream"}, cut=True))
    with capture("verbose") as cap, pytest.raises(openai.APIConnectionError):
        _chat(server, retries=0)
    cls, reason = _diagnosis(cap)
    # plain words first: the answer had begun (a 200, one event), then the stream broke
    assert cls == "llm-error" and reason.startswith("The provider's stream broke off mid-answer: ")
    assert "answered HTTP 200 and 1 stream event, then the stream ended with RemoteProtocolError" in reason


def test_a_connection_refused_before_any_answer_names_its_class(tmp_path):
    from cvdiag.diagnosis import diagnose
    from cvdiag.testing import envelope

    md = {"provider": "openai", "model": "m", "error_class": "ConnectError", "http_status": None, "chunks": None}
    verdict = diagnose([envelope("backend.llm.call.response", metadata=md, test_id="t", outcome="err", duration_ms=3)])
    assert verdict.cls == "llm-error" and verdict.reason.startswith("LLM call to openai/m failed with ConnectError")


def test_timeline_shows_every_attempt_with_its_status(server, tmp_path):
    server.plan(CHAT, Reply.json(SERVER_ERROR, 500, headers=FAST_RETRY))
    log = tmp_path / "backend.ndjson"
    with (
        capture("verbose", file=log),
        cvdiag.request_context(test_id="t-retries"),
        pytest.raises(openai.InternalServerError),
    ):
        _chat(server)
    result = run("timeline", "t-retries", log, env={"NO_COLOR": "1", "COLUMNS": "200"})
    rows = [line for line in result.out.splitlines() if "backend.llm.call.response" in line]
    assert result.code == 0 and len(rows) == 3, result.out
    for attempt, row in enumerate(rows):
        assert f"attempt={attempt} http_status=500 error_class=HTTPStatusError" in row
    diagnosed = run("diagnose", "t-retries", log, env={"NO_COLOR": "1"})
    assert "3 attempts, all HTTP 500 (server_error)" in diagnosed.out
