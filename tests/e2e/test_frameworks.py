"""Real agent frameworks behind ``CvdiagMiddleware``, with no LLM code of cvdiag's in the
apps: LangGraph + langchain-openai, pydantic-ai, the OpenAI Agents SDK (Responses API)
and the ``anthropic`` SDK (Messages API), each a small app in ``examples/`` that calls
``cvdiag.instrument_httpx()`` once and wraps its run in ``agent_scope``, streaming the
answer over SSE under real uvicorn, with aimock as the provider.

Every LLM call the frameworks make must show up at the HTTP client
(``backend.llm.call.*`` with ``source: http``), retries included, and ``cvdiag
diagnose`` must name the right class for each way a provider or an agent fails.
Each scenario is one aimock fixture (``e2e/fixtures/frameworks.json``), picked by the
user's message.
"""

from __future__ import annotations

import importlib.util
import json
from dataclasses import dataclass

import httpx2
import pytest
from conftest import REPO, Aimock, ExampleServer, ServedApp, _unavailable, serve_app

#: The slow fixture's time to first token (``streamingProfile.ttft``) and the slow
#: threshold given to the CLI: far enough apart that machine speed does not matter.
SLOW_TTFT_MS = 1200
SLOW_THRESHOLD_S = "1"
#: Heartbeats of an LLM call recorded at the HTTP client, small so the slow call shows some.
HEARTBEAT_S = "0.2"
RETRIES = 2  # the SDKs' default, set explicitly by each app (EXAMPLE_MAX_RETRIES)
HAPPY = "Your parcel shipped yesterday and arrives on Friday."


@dataclass(frozen=True)
class Framework:
    name: str
    app: str  # module:attribute under examples/
    requires: tuple[str, ...]  # importable modules the app needs
    api: str  # the wire format its LLM calls use
    provider: str  # what cvdiag names aimock's host for that format
    finish: str  # the provider's finish reason for a whole answer
    tool_finish: str  # ... and for an answer that asks for a tool
    tool_error: str = "OrderServiceDown"  # what the run raises when the tool does


FRAMEWORKS = [
    Framework(
        "langgraph",
        "examples.langgraph_app:app",
        ("langgraph", "langchain_openai"),
        "chat.completions",
        "openai-compatible",
        "stop",
        "tool_calls",
    ),
    Framework(
        "pydantic-ai",
        "examples.pydantic_ai_app:app",
        ("pydantic_ai",),
        "chat.completions",
        "openai-compatible",
        "stop",
        "tool_calls",
    ),
    Framework(
        "openai-agents",
        "examples.openai_agents_app:app",
        ("agents",),
        "responses",
        "openai-compatible",
        "completed",
        "completed",
        tool_error="UserError",  # the SDK wraps the tool's exception (failure_error_function=None)
    ),
    Framework(
        "anthropic",
        "examples.anthropic_app:app",
        ("anthropic",),
        "messages",
        "anthropic-compatible",
        "end_turn",
        "tool_use",
    ),
]


@dataclass(frozen=True)
class FrameworkServer(ServedApp):
    framework: Framework
    server: ExampleServer


@pytest.fixture(scope="module", params=FRAMEWORKS, ids=lambda f: f.name)
def framework(
    request: pytest.FixtureRequest, aimock: Aimock, tmp_path_factory: pytest.TempPathFactory
) -> FrameworkServer:
    fw: Framework = request.param
    missing = [m for m in fw.requires if importlib.util.find_spec(m) is None]
    if missing:
        _unavailable(f"{fw.name} needs {', '.join(missing)}; install the extra: pip install -e '.[frameworks]'")
    env = {
        "OPENAI_BASE_URL": f"{aimock.url}/v1",
        "OPENAI_API_KEY": "sk-test-e2e-placeholder",
        "ANTHROPIC_BASE_URL": aimock.url,
        "ANTHROPIC_API_KEY": "sk-ant-test-e2e-placeholder",
        "EXAMPLE_MAX_RETRIES": str(RETRIES),
        "EXAMPLE_HEARTBEAT_S": HEARTBEAT_S,
        "OPENAI_AGENTS_DISABLE_TRACING": "1",
    }
    with serve_app(fw.app, env, tmp_path_factory.mktemp(fw.name), request.config) as server:
        yield FrameworkServer(fw, server)


@pytest.fixture
def client(framework: FrameworkServer):
    # No x-test-id here on purpose: the plugin's propagation adds this test's id.
    with httpx2.Client(base_url=framework.server.url, timeout=30.0) as http:
        yield http


def sse_events(body: str) -> list[tuple[str, dict]]:
    """``(event name, data)`` of each server-sent event in ``body``."""
    events = []
    for block in body.split("\n\n"):
        lines = block.splitlines()
        data = [line[len("data: ") :] for line in lines if line.startswith("data: ")]
        if data:
            name = next((line[len("event: ") :] for line in lines if line.startswith("event: ")), "message")
            events.append((name, json.loads("\n".join(data))))
    return events


def deltas(body: str) -> str:
    return "".join(str(data["delta"]) for name, data in sse_events(body) if name == "message")


def assert_zero_code(framework: FrameworkServer, events: list[dict]) -> None:
    """Every LLM line came from the HTTP client, none from a hand-written ``llm_call``."""
    calls = [e for e in events if e["boundary"] in ("backend.llm.call.start", "backend.llm.call.response")]
    assert calls, "no backend.llm.call.* line at all"
    fw = framework.framework
    for e in calls:
        meta = e["metadata"]
        assert (meta["source"], meta["provider"], meta["api"]) == ("http", fw.provider, fw.api), e["boundary"]


def test_happy_stream_is_one_ok_call_with_its_tokens(client, framework, aimock, cvdiag_test_id) -> None:
    response = client.get("/chat", params={"q": "where is my parcel?"})

    assert response.status_code == 200
    assert deltas(response.text) == HAPPY
    assert [c["response"]["status"] for c in aimock.journal(cvdiag_test_id)] == [200]
    events, (llm,) = framework.llm_envelopes(cvdiag_test_id)
    assert_zero_code(framework, events)
    assert len([e for e in events if e["boundary"] == "backend.llm.call.start"]) == 1
    meta = llm["metadata"]
    assert llm["outcome"] == "ok"
    assert (meta["http_status"], meta["attempt"], meta["stream"]) == (200, 0, True)
    assert (meta["prompt_tokens"], meta["completion_tokens"]) == (21, 13)
    assert meta["finish_reason"] == framework.framework.finish
    assert meta["output_chars"] == len(HAPPY)
    assert meta["ttft_ms"] is not None and meta["ttft_ms"] <= meta["latency_ms"]
    assert meta["chunks"] > 1
    assert framework.diagnose(cvdiag_test_id)["class"] == "ok"


def test_provider_500_is_an_llm_error_with_every_attempt(client, framework, aimock, cvdiag_test_id) -> None:
    response = client.get("/chat", params={"q": "the provider is down"})

    assert response.status_code == 502
    assert [c["response"]["status"] for c in aimock.journal(cvdiag_test_id)] == [500] * (RETRIES + 1)
    events, calls = framework.llm_envelopes(cvdiag_test_id)
    assert_zero_code(framework, events)
    assert [c["metadata"]["attempt"] for c in calls] == list(range(RETRIES + 1))
    assert {(c["outcome"], c["metadata"]["http_status"]) for c in calls} == {("err", 500)}
    assert {c["metadata"]["error_type"] for c in calls} == {"server_error"}
    verdict = framework.diagnose(cvdiag_test_id)
    assert verdict["class"] == "llm-error"
    assert "500" in verdict["reason"]
    assert f"{RETRIES + 1} attempts" in verdict["reason"]


def test_provider_500_then_success_shows_both_attempts_and_is_ok(client, framework, aimock, cvdiag_test_id) -> None:
    """The SDK's retry recovers: the failed attempt is on the record, the test is fine."""
    response = client.get("/chat", params={"q": "a flaky provider"})

    assert response.status_code == 200
    assert deltas(response.text) == "Answered on the second try."
    assert [c["response"]["status"] for c in aimock.journal(cvdiag_test_id)] == [500, 200]
    events, calls = framework.llm_envelopes(cvdiag_test_id)
    assert_zero_code(framework, events)
    got = [(c["metadata"]["attempt"], c["outcome"], c["metadata"]["http_status"]) for c in calls]
    assert got == [(0, "err", 500), (1, "ok", 200)]
    assert (calls[1]["metadata"]["prompt_tokens"], calls[1]["metadata"]["completion_tokens"]) == (10, 6)
    assert framework.diagnose(cvdiag_test_id)["class"] == "ok"


def test_provider_429_is_an_llm_error_with_its_retry_after(client, framework, aimock, cvdiag_test_id) -> None:
    response = client.get("/chat", params={"q": "too many requests"})

    assert response.status_code == 429
    assert response.headers["retry-after"] == "1"  # relayed by the app
    assert [c["response"]["status"] for c in aimock.journal(cvdiag_test_id)] == [429] * (RETRIES + 1)
    events, calls = framework.llm_envelopes(cvdiag_test_id)
    assert_zero_code(framework, events)
    assert [c["metadata"]["attempt"] for c in calls] == list(range(RETRIES + 1))
    assert {(c["outcome"], c["metadata"]["http_status"], c["metadata"]["retry_after_ms"]) for c in calls} == {
        ("err", 429, 1000)
    }
    assert {c["metadata"]["error_type"] for c in calls} <= {"rate_limit_error", "rate_limit_exceeded"}
    verdict = framework.diagnose(cvdiag_test_id)
    assert verdict["class"] == "llm-error"  # the app relays the provider's 429: not the edge
    assert "429" in verdict["reason"]


def test_stream_cut_by_the_provider_is_an_llm_error(client, framework, aimock, cvdiag_test_id) -> None:
    response = client.get("/chat", params={"q": "the provider cuts me off"})

    assert response.status_code == 200
    names = [name for name, _ in sse_events(response.text)]
    assert names[0] == "message" and names[-1] == "error"  # some text, then the app's error event
    (call,) = aimock.journal(cvdiag_test_id)
    assert call["response"]["interrupted"] is True
    events, (llm,) = framework.llm_envelopes(cvdiag_test_id)
    assert_zero_code(framework, events)
    assert (llm["outcome"], llm["metadata"]["http_status"]) == ("err", 200)
    assert llm["metadata"]["output_chars"] > 0
    assert llm["metadata"]["finish_reason"] is None
    assert framework.diagnose(cvdiag_test_id)["class"] == "llm-error"


def test_slow_provider_beats_and_is_llm_slow(client, framework, aimock, cvdiag_test_id) -> None:
    response = client.get("/chat", params={"q": "take your time"})

    assert response.status_code == 200
    assert deltas(response.text) == "A slow answer, but a whole one."
    events, (llm,) = framework.llm_envelopes(cvdiag_test_id)
    assert_zero_code(framework, events)
    assert llm["outcome"] == "ok"
    assert llm["metadata"]["ttft_ms"] >= SLOW_TTFT_MS
    assert llm["metadata"]["latency_ms"] >= SLOW_TTFT_MS
    heartbeats = [e for e in events if e["boundary"] == "backend.llm.call.heartbeat"]
    assert heartbeats
    assert all(h["metadata"]["elapsed_ms_since_start"] <= llm["metadata"]["latency_ms"] for h in heartbeats)
    assert framework.diagnose(cvdiag_test_id, "--slow-s", SLOW_THRESHOLD_S)["class"] == "llm-slow"
    assert framework.diagnose(cvdiag_test_id)["class"] == "ok"  # under the default 30 s threshold


def test_empty_completion_is_provider_empty_whatever_tokens_it_claims(
    client, framework, aimock, cvdiag_test_id
) -> None:
    response = client.get("/chat", params={"q": "say nothing"})

    assert deltas(response.text) == ""
    events, calls = framework.llm_envelopes(cvdiag_test_id)
    assert_zero_code(framework, events)
    assert calls
    for llm in calls:
        assert (llm["outcome"], llm["metadata"]["http_status"]) == ("ok", 200)
        assert llm["metadata"]["output_chars"] == 0
        assert llm["metadata"]["completion_tokens"] == 4  # the provider claims 4 tokens
    assert framework.diagnose(cvdiag_test_id)["class"] == "provider-empty"


def test_client_hanging_up_cancels_the_call_and_is_a_client_disconnect(
    client, framework, aimock, cvdiag_test_id
) -> None:
    with client.stream("GET", "/chat", params={"q": "tell me a very long tale"}) as response:
        assert response.status_code == 200
        first = next(response.iter_lines())
        assert first.startswith("data: ")
    # leaving the block closed the connection after the first event

    assert len(aimock.journal(cvdiag_test_id)) == 1
    events, (llm,) = framework.llm_envelopes(cvdiag_test_id)
    assert_zero_code(framework, events)
    assert (llm["outcome"], llm["metadata"]["error_class"]) == ("timeout", "CancelledError")
    assert llm["metadata"]["output_chars"] > 0
    (aborted,) = [e for e in events if e["boundary"] == "backend.sse.aborted"]
    assert aborted["metadata"]["termination_kind"] == "rst"
    (agent,) = [e for e in events if e["boundary"] == "backend.agent.exit"]
    assert agent["metadata"]["terminal_outcome"] == "cancelled"
    verdict = framework.diagnose(cvdiag_test_id)
    assert verdict["class"] == "client-disconnect"
    assert "after the first byte" in verdict["reason"]


def test_tool_that_raises_is_an_agent_error_naming_it(client, framework, aimock, cvdiag_test_id) -> None:
    response = client.get("/chat", params={"q": "what is the status of order A-17?"})

    assert response.status_code == 200
    tool_error = framework.framework.tool_error
    assert sse_events(response.text) == [("error", {"error": tool_error})]
    assert [c["response"]["status"] for c in aimock.journal(cvdiag_test_id)] == [200]
    events, (llm,) = framework.llm_envelopes(cvdiag_test_id)
    assert_zero_code(framework, events)
    assert (llm["outcome"], llm["metadata"]["http_status"]) == ("ok", 200)
    assert llm["metadata"]["finish_reason"] == framework.framework.tool_finish
    assert llm["metadata"]["output_chars"] > 0  # the tool call's arguments
    (agent,) = [e for e in events if e["boundary"] == "backend.agent.exit"]
    assert (agent["metadata"]["terminal_outcome"], agent["metadata"]["error_class"]) == ("error", tool_error)
    verdict = framework.diagnose(cvdiag_test_id)
    assert verdict["class"] == "agent-error"
    assert tool_error in verdict["reason"]


def test_apps_have_no_cvdiag_llm_code() -> None:
    """The zero-code promise, checked where it is made: the framework apps never open
    an ``llm_call`` and never record tokens by hand."""
    for fw in FRAMEWORKS:
        source = (REPO / (fw.app.split(":")[0].replace(".", "/") + ".py")).read_text()
        assert "cvdiag.instrument_httpx(" in source
        assert "llm_call" not in source and ".record(" not in source
