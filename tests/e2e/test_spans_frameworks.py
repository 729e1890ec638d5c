"""Spans in the process, end to end (issue 33, item 1): the framework apps of ``examples/``
with ``EXAMPLE_SPANS=1`` (``cvdiag.instrument()`` and each framework's own documented
switch for its spans, nothing else of cvdiag's) under real uvicorn, aimock as the provider.

pydantic-ai through its native instrumentation, the OpenAI Agents SDK through its tracing
processors, LangGraph through OpenInference's LangChain instrumentor, and two frameworks
no other test uses, smolagents and Agno, through their OpenInference instrumentors. What
the frameworks record becomes envelopes under the test's id (``source: otel``): the tool
that raised with its exception, the slow tool the client gave up on, the framework's own
limit, the output that failed validation; each tool call once, beside the wire's start.
"""

from __future__ import annotations

import time
from collections.abc import Iterator

import httpx2
import pytest
from agent_rig import SLOW_THRESHOLD_S, SLOW_TOOL_S, Run, Servers, ask_fixture  # noqa: F401 (the ask fixture)
from conftest import Aimock

FRAMEWORKS = ("langgraph", "pydantic-ai", "openai-agents", "smolagents", "agno")
#: Long enough for the first LLM call, far shorter than the slow tool.
CLIENT_TIMEOUT_S = 0.5


@pytest.fixture(scope="module")
def servers(
    aimock: Aimock, tmp_path_factory: pytest.TempPathFactory, request: pytest.FixtureRequest
) -> Iterator[Servers]:
    with Servers(aimock, tmp_path_factory, request.config) as started:
        env = started.app_env() | {"EXAMPLE_SPANS": "1", "OPENAI_AGENTS_DISABLE_TRACING": "0"}
        started.start({name: (name, env) for name in FRAMEWORKS})
        yield started


def one_response_per_call(run: Run) -> list[dict]:
    """The tool call responses, each answering a start the wire wrote, none twice (a run
    cut at its limit may leave its last asked call unanswered)."""
    starts = {s["metadata"]["call_id"] for s in run.lines("backend.tool.call.start")}
    answered = [r["metadata"]["call_id"] for r in run.tools]
    assert len(answered) == len(set(answered)) and set(answered) <= starts
    assert len(starts) - len(answered) <= 1
    return run.tools


# -- a tool that raised: tool-error naming the tool and the exception ----------------------------------

#: The exception class each framework's spans name (the SDK's own traces name none).
RAISED = {
    "langgraph": "OrderServiceDown",
    "pydantic-ai": "ToolRetryError",  # the app hands the error back through ModelRetry
    "openai-agents": None,
    "smolagents": "OrderServiceDown",
    "agno": None,
}


@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_a_tool_that_raised_is_a_tool_error_from_its_span(ask, framework) -> None:
    run = ask(framework, "look up order B-42")

    assert run.response.status_code == 200 and run.sse_error is None  # the framework handed it back
    responses = one_response_per_call(run)
    assert responses
    for failed in responses:
        meta = failed["metadata"]
        assert (failed["outcome"], meta["tool_name"], meta["source"], meta["error_kind"]) == (
            "err",
            "lookup_order",
            "otel",
            "raised",
        )
        assert meta.get("error_class") == RAISED[framework]
        assert meta["kind"] == "function" and meta["otel_convention"]
        assert failed["test_id"] == run.test_id
    if framework != "openai-agents":  # its default redacts the error from its traces
        assert "order service unavailable while looking up B-42" in responses[0]["metadata"]["error_excerpt"]
    if framework in ("pydantic-ai", "openai-agents"):
        assert responses[0]["metadata"]["handed_back"] is True
    verdict = run.diagnose()
    assert verdict["class"] == "tool-error"
    assert "lookup_order" in verdict["reason"]


# -- a slow tool the client gave up on ------------------------------------------------------------------


@pytest.mark.parametrize("framework", ["langgraph", "pydantic-ai", "openai-agents", "agno"])
def test_a_slow_tool_the_client_gave_up_on_is_on_the_record(servers, cvdiag_test_id, framework) -> None:
    server = servers.server(framework)
    with pytest.raises(httpx2.TimeoutException):
        httpx2.get(f"{server.url}/chat", params={"q": "is sku S-1 in stock"}, timeout=CLIENT_TIMEOUT_S)
    run = Run(cvdiag_test_id, None, server)  # type: ignore[arg-type]
    deadline = time.monotonic() + 10
    while not run.lines("backend.sse.aborted") and time.monotonic() < deadline:
        time.sleep(0.1)
    (slow,) = one_response_per_call(run)
    meta = slow["metadata"]
    assert (slow["outcome"], meta["tool_name"], meta["source"]) == ("ok", "check_stock", "otel")
    assert slow["duration_ms"] >= SLOW_TOOL_S * 1000
    (aborted,) = run.lines("backend.sse.aborted")  # the client hung up while the tool ran
    assert aborted["duration_ms"] >= slow["duration_ms"]
    if framework == "openai-agents":
        return  # its streamed LLM call stays open while the tool runs: diagnosed llm-slow (read side)
    verdict = run.diagnose("--slow-s", SLOW_THRESHOLD_S)
    assert verdict["class"] == "tool-slow"  # not a bare client-disconnect
    assert "check_stock" in verdict["reason"]


# -- the framework's own limit ---------------------------------------------------------------------------

LIMITS = {
    "langgraph": ("GraphRecursionError", "recursion_limit", 10),
    "pydantic-ai": ("UsageLimitExceeded", "request_limit", 50),
    "openai-agents": ("MaxTurnsExceeded", "max_turns", 10),
}


@pytest.mark.parametrize("framework", list(LIMITS))
def test_the_framework_limit_is_named_with_its_value(ask, framework) -> None:
    run = ask(framework, "keep tracking parcel P-9")

    error, name, value = LIMITS[framework]
    assert run.sse_error == error
    one_response_per_call(run)
    (limit,) = [e for e in run.lines("backend.agent.exit") if e["metadata"].get("source") == "otel"]
    meta = limit["metadata"]
    assert (limit["outcome"], meta["error_class"], meta["limit_name"], meta["limit_value"]) == (
        "err",
        error,
        name,
        value,
    )
    verdict = run.diagnose()
    assert verdict["class"] == "agent-loop"
    assert error in verdict["reason"]


# -- an output that failed validation --------------------------------------------------------------------


def _the_failed_output(run) -> dict:
    """The one output line of a run, invalid, from spans: its metadata."""
    (output,) = run.lines("backend.agent.output")
    assert (output["outcome"], output["metadata"]["valid"], output["metadata"]["source"]) == ("err", False, "otel")
    return output["metadata"]


def test_an_output_that_never_validated_is_invalid_from_its_span(ask) -> None:
    """pydantic-ai retries its output tool until its retries run out."""
    run = ask("pydantic-ai", "report on order R-5", route="/chat/report")

    assert run.sse_error == "UnexpectedModelBehavior"
    meta = _the_failed_output(run)
    assert (meta["error_class"], meta["attempts"]) == ("UnexpectedModelBehavior", 2)
    assert run.diagnose()["class"] == "output-invalid"


def test_a_structured_output_that_failed_its_schema_is_invalid_from_its_span(ask) -> None:
    """LangGraph/LangChain's with_structured_output raising: its parser's span says why."""
    run = ask("langgraph", "report on order R-6", route="/chat/report")

    assert run.sse_error == "OutputParserException"
    meta = _the_failed_output(run)  # the parser's; the sequence around it only passed it on
    assert (meta["schema_name"], meta["agent_name"], meta["error_class"]) == (
        "OrderReport",
        "PydanticOutputParser",
        "OutputParserException",
    )
    verdict = run.diagnose()
    assert verdict["class"] == "output-invalid"
    assert "OrderReport" in verdict["reason"]


def test_llm_calls_the_wire_saw_are_not_written_again(ask) -> None:
    run = ask("pydantic-ai", "look up order B-42")

    sources = {e["metadata"]["source"] for e in run.lines("backend.llm.call.response")}
    assert sources == {"http"}  # pydantic-ai's chat spans are the same calls
