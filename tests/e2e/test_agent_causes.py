"""Agent-level causes end to end (issue 15): every HTTP exchange is healthy, or the provider
says no in its own words, and cvdiag must still name what went wrong above the transport.

The framework apps of ``examples/`` (LangGraph, pydantic-ai, the OpenAI Agents SDK and the
``anthropic`` SDK, wired with ``instrument_httpx()`` + ``CvdiagMiddleware`` +
``agent_scope`` only, each framework's defaults but for the scenario's one setting) run
under real uvicorn (see ``agent_rig``); aimock is the provider
(``e2e/fixtures/agent_causes.json``; each scenario is picked by the user's message).
Each test asserts what a user sees: the tool and LLM lines in the server's log and the
class and reason of the real ``cvdiag diagnose`` on that log.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from agent_rig import SLOW_THRESHOLD_S, SLOW_TOOL_S, Run, Servers, ask_fixture  # noqa: F401 (the ask fixture)
from conftest import Aimock

FRAMEWORKS = ("langgraph", "pydantic-ai", "openai-agents", "anthropic")


@pytest.fixture(scope="module")
def servers(
    aimock: Aimock, tmp_path_factory: pytest.TempPathFactory, request: pytest.FixtureRequest
) -> Iterator[Servers]:
    with Servers(aimock, tmp_path_factory, request.config) as started:
        started.start({name: (name, started.app_env()) for name in FRAMEWORKS})
        yield started


def assert_failed_tool(run: Run, name: str, source: str, error_kind: str, excerpt: str) -> dict:
    """The one failed call of ``name``, from ``source``, with its kind and error excerpt."""
    (failed,) = [t for t in run.tools if t["outcome"] != "ok"]
    meta = failed["metadata"]
    assert (meta["tool_name"], meta["source"], meta["error_kind"]) == (name, source, error_kind)
    assert failed["outcome"] in ("err", "timeout")
    if excerpt:
        assert excerpt in meta["error_excerpt"]
    assert len(run.lines("backend.tool.call.start")) >= len(run.tools)
    return failed


# -- tool-error: a tool raised and the framework handed the error back to the model ------------------

#: What each framework tells the model when the tool raised (its own words, from the wire):
#: the OpenAI Agents SDK's default hides the exception from the model, so its words are all.
HANDED_BACK = {
    "langgraph": "Error: OrderServiceDown('order service unavailable while looking up B-42')",
    "pydantic-ai": "OrderServiceDown: order service unavailable while looking up B-42",
    "openai-agents": "An error occurred while running the tool. Please try again.",
    "anthropic": "OrderServiceDown: order service unavailable while looking up B-42",
}


@pytest.mark.parametrize("framework", list(HANDED_BACK))
def test_tool_error_handed_back_to_the_model_is_a_tool_error(ask, aimock, framework) -> None:
    run = ask(framework, "look up order B-42")

    assert run.response.status_code == 200
    assert run.text == "Sorry, I cannot look up order B-42 right now."  # the run went on
    assert run.sse_error is None
    assert [c["response"]["status"] for c in aimock.journal(run.test_id)][-1] == 200
    failed = assert_failed_tool(run, "lookup_order", "wire", "reported", HANDED_BACK[framework])
    assert failed["metadata"]["server"] is None
    assert failed["duration_ms"] is not None
    (asked,) = [e for e in run.lines("backend.llm.call.response") if e["metadata"].get("tool_calls")]
    assert (asked["metadata"]["tool_calls"], asked["metadata"]["tool_names"]) == (1, ["lookup_order"])
    verdict = run.diagnose()
    assert verdict["class"] == "tool-error"
    assert "lookup_order" in verdict["reason"]
    assert HANDED_BACK[framework] in verdict["reason"]
    row = run.listed()  # the swallowed tool error is flagged in the list of tests too
    assert (row["terminal"], row["status"], row["class"]) == ("complete", "fail", "tool-error")


# -- tool-slow ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("framework", ["langgraph", "anthropic"])
def test_tool_over_the_slow_threshold_is_tool_slow(ask, framework) -> None:
    run = ask(framework, "is sku S-1 in stock")

    assert run.text == "Yes, 3 items of S-1 are in stock."
    (call,) = run.tools
    meta = call["metadata"]
    assert (call["outcome"], meta["tool_name"], meta["source"], meta["error_kind"]) == (
        "ok",
        "check_stock",
        "wire",
        None,
    )
    assert call["duration_ms"] >= SLOW_TOOL_S * 1000
    verdict = run.diagnose("--slow-s", SLOW_THRESHOLD_S)
    assert verdict["class"] == "tool-slow"
    assert "check_stock" in verdict["reason"]
    assert run.diagnose()["class"] == "ok"  # under the default threshold


# -- output-truncated, content-filtered: the final answer's finish reason -----------------------------


@pytest.mark.parametrize(("framework", "finish"), [("langgraph", "length"), ("anthropic", "max_tokens")])
def test_answer_cut_at_the_token_limit_is_output_truncated(ask, framework, finish) -> None:
    run = ask(framework, "explain the returns policy")

    assert run.response.status_code == 200
    (llm,) = run.lines("backend.llm.call.response")
    assert (llm["outcome"], llm["metadata"]["finish_reason"]) == ("ok", finish)
    verdict = run.diagnose()
    assert verdict["class"] == "output-truncated"
    assert finish in verdict["reason"]


@pytest.mark.parametrize(
    ("framework", "message", "finish"),
    [
        ("langgraph", "write something forbidden", "content_filter"),
        ("pydantic-ai", "write something forbidden", "content_filter"),
        ("anthropic", "say something you must refuse", "refusal"),
    ],
)
def test_filtered_answer_is_content_filtered(ask, framework, message, finish) -> None:
    run = ask(framework, message)

    llm = run.lines("backend.llm.call.response")[-1]
    assert llm["metadata"]["finish_reason"] == finish
    verdict = run.diagnose()
    assert verdict["class"] == "content-filtered"
    assert finish in verdict["reason"]


# -- the provider says no: context-overflow, llm-auth, llm-config -------------------------------------


@pytest.mark.parametrize(
    ("framework", "message", "status", "cls", "words"),
    [
        ("openai-agents", "paste the whole archive", 400, "context-overflow", "context window"),
        ("langgraph", "paste the whole archive", 400, "context-overflow", "context window"),
        ("anthropic", "quote the whole manual", 400, "context-overflow", "context window"),
        ("pydantic-ai", "answer with my revoked key", 401, "llm-auth", "401"),
        ("anthropic", "answer with my revoked key", 401, "llm-auth", "401"),
        ("langgraph", "ask the retired model", 404, "llm-config", "404"),
        ("openai-agents", "ask the retired model", 404, "llm-config", "404"),
    ],
)
def test_provider_refusal_is_named_by_its_cause(ask, aimock, framework, message, status, cls, words) -> None:
    run = ask(framework, message)

    assert run.response.status_code == 502  # the app relays the refusal
    # Not retried: the SDKs retry 408/409/429/5xx only.
    assert [c["response"]["status"] for c in aimock.journal(run.test_id)] == [status]
    (llm,) = run.lines("backend.llm.call.response")
    assert (llm["outcome"], llm["metadata"]["http_status"]) == ("err", status)
    verdict = run.diagnose()
    assert verdict["class"] == cls
    assert words in verdict["reason"].lower()


# -- agent-loop: the same tool with the same arguments until the framework's turn limit ---------------


@pytest.mark.parametrize(
    ("framework", "error"), [("langgraph", "GraphRecursionError"), ("openai-agents", "MaxTurnsExceeded")]
)
def test_same_tool_every_turn_until_the_limit_is_an_agent_loop(ask, framework, error) -> None:
    run = ask(framework, "keep tracking parcel P-9")

    assert run.sse_error == error
    calls = run.tools
    assert len(calls) >= 3
    assert {(t["metadata"]["tool_name"], t["outcome"]) for t in calls} == {("track_parcel", "ok")}
    starts = run.lines("backend.tool.call.start")
    assert len({s["metadata"]["args_hash"] for s in starts}) == 1  # the same arguments every time
    verdict = run.diagnose()
    assert verdict["class"] == "agent-loop"
    assert "track_parcel" in verdict["reason"] or error in verdict["reason"]


# -- output-invalid: structured output that never validates -------------------------------------------


def test_structured_output_that_never_validates_is_output_invalid(ask) -> None:
    run = ask("pydantic-ai", "report on order R-5", route="/chat/report")

    assert run.sse_error == "UnexpectedModelBehavior"
    starts = run.lines("backend.llm.call.start")
    assert starts and all(s["metadata"]["output_schema"] is True for s in starts)
    answers = run.lines("backend.llm.call.response")
    assert answers and all(a["metadata"]["output_valid"] is False for a in answers)
    (agent,) = run.lines("backend.agent.exit")
    assert agent["metadata"]["error_message"].startswith("Exceeded maximum out")  # pydantic-ai's words
    verdict = run.diagnose()
    assert verdict["class"] == "output-invalid"


# -- MCP: a real MCP server over streamable HTTP and over stdio ---------------------------------------
