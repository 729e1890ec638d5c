"""Agent-level causes (issue 15): tool calls, loops, answers that stopped short, a provider
that refused the key or the request; and the client that left an LLM call running
(issue 18, item 16). One positive and one near miss per class, the precedence between
them and today's classes, the table of words each with the real message it matches.
"""

from __future__ import annotations

import pickle
import random

import pytest
from frameworkkit import need

from cvdiag.diagnosis import CLASSES, Thresholds, diagnose
from cvdiag.diagnosis._causes import WORDS, cause_of, finish_cause
from cvdiag.testing import envelope

AGENT_CLASSES = (
    "tool-error",
    "tool-slow",
    "output-truncated",
    "content-filtered",
    "context-overflow",
    "agent-loop",
    "output-invalid",
    "llm-auth",
    "llm-config",
)


def _at(boundary: str, t: float, metadata: dict | None = None, **fields) -> dict:
    """An envelope ``t`` seconds after 10:00:00."""
    minutes, seconds = divmod(t, 60)
    at = {"ts": f"2026-11-21T10:{int(minutes):02d}:{seconds:06.3f}Z", "mono_ns": int(t * 1e9)}
    return envelope(boundary, metadata=metadata or {}, **(at | fields))


def _request(t: float = 0.0) -> list[dict]:
    return [_at("backend.request.ingress", t, {"method": "POST", "path": "/chat"})]


def _answer(t: float, *, finish: str = "stop", tools: tuple[str, ...] = (), valid: bool | None = None,
            model: str = "gpt-4o-mini", provider: str = "openai", schema: bool = False) -> list[dict]:  # fmt: skip
    """An LLM call that answered ok, asking for ``tools`` or giving a final answer."""
    start = {"provider": provider, "model": model, "output_schema": schema or None}
    answered = {
        "provider": provider,
        "model": model,
        "latency_ms": 500,
        "completion_tokens": 40,
        "output_chars": 200,
        "finish_reason": finish,
        "tool_calls": len(tools),
        "tool_names": list(tools) or None,
        "output_valid": valid,
    }
    return [
        _at("backend.llm.call.start", t, start),
        _at("backend.llm.call.response", t + 0.5, answered, outcome="ok", duration_ms=500),
    ]


def _tool(t: float, name: str, *, source: str = "wire", ms: int = 30, outcome: str = "ok", kind: str | None = None,
          excerpt: str | None = None, server: str | None = None, args_hash: str = "9a8b7c6d",
          answered: bool = True) -> list[dict]:  # fmt: skip
    call = {"tool_name": name, "call_id": f"c{int(t * 1000)}", "source": source, "server": server}
    out = [_at("backend.tool.call.start", t, call | {"args_chars": 20, "args_hash": args_hash})]
    if answered:
        result = {"result_chars": 10, "error_kind": kind, "error_excerpt": excerpt}
        out.append(_at("backend.tool.call.response", t + ms / 1000, call | result, outcome=outcome, duration_ms=ms))
    return out


def _done(t: float, status: int = 200, events: int = 3) -> list[dict]:
    metadata = {"http_status": status, "content_length": 300, "total_duration_ms": int(t * 1000),
                "sse_event_count": events}  # fmt: skip
    return [_at("backend.response.complete", t, metadata, outcome="ok" if status < 500 else "err")]


def _raised(t: float, exc: str, message: str) -> list[dict]:
    """The agent raised ``exc`` and the endpoint answered 500."""
    exit_md = {"terminal_outcome": "error", "total_duration_ms": 900, "error_class": exc, "error_message": message}
    caught = {"exception_type": exc, "message_scrubbed": message, "stack_brief": [], "truncated": False}
    return [
        _at("backend.agent.exit", t, exit_md, outcome="err"),
        *_done(t + 0.01, 500, 0),
        _at("backend.error.caught", t + 0.02, caught, outcome="err"),
    ]


def _refused(t: float, status: int, error_type: str | None, error_class: str, model: str = "gpt-4o-mini") -> list[dict]:
    failed = {"provider": "openai", "model": model, "latency_ms": 80, "error_class": error_class,
              "http_status": status, "error_type": error_type, "attempt": 0, "source": "http"}  # fmt: skip
    return [
        _at("backend.llm.call.start", t, {"provider": "openai", "model": model}),
        _at("backend.llm.call.response", t + 0.08, failed, outcome="err", duration_ms=80),
    ]


def _loop(times: int, *, same: bool = True) -> list[dict]:
    out: list[dict] = []
    for i in range(times):
        out += _answer(1.0 + i, tools=("lookup",))
        out += _tool(1.6 + i, "lookup", args_hash="00000000" if same else f"{i:08x}")
    return out


# -- one positive and one near miss per class ---------------------------------------------------

#: class -> (events that name it, events that look alike and must not, thresholds)
CASES: dict[str, tuple[list[dict], list[dict], Thresholds]] = {
    "tool-error": (
        _request()
        + _answer(0.1, tools=("forecast",))
        + _tool(
            0.7,
            "forecast",
            source="mcp",
            server="weather",
            outcome="err",
            kind="protocol",
            excerpt="Unknown city: Atlantis",
        )
        + _answer(0.8)
        + _done(1.5),
        # a call cancelled with its request (outcome timeout, no error kind) did not fail
        _request()
        + _answer(0.1, tools=("forecast",))
        + _tool(0.7, "forecast", outcome="timeout")
        + _answer(0.8)
        + _done(1.5),
        Thresholds(),
    ),
    "tool-slow": (
        _request() + _answer(0.1, tools=("crawl",)) + _tool(0.7, "crawl", ms=8000) + _answer(8.8) + _done(9.5),
        _request() + _answer(0.1, tools=("crawl",)) + _tool(0.7, "crawl", ms=2900) + _answer(3.7) + _done(4.5),
        Thresholds(slow_s=3.0),
    ),
    "output-truncated": (
        _request() + _answer(0.1, finish="length") + _done(0.8),
        _request() + _answer(0.1, finish="length") + _answer(0.7) + _done(1.5),  # an earlier answer only
        Thresholds(),
    ),
    "content-filtered": (
        _request() + _answer(0.1, finish="SAFETY", model="gemini-2.0-flash", provider="google") + _done(0.8),
        _request() + _answer(0.1, finish="STOP", model="gemini-2.0-flash", provider="google") + _done(0.8),
        Thresholds(),
    ),
    "context-overflow": (
        _request() + _refused(0.1, 400, "context_length_exceeded", "BadRequestError") + _done(0.3, 500, 0),
        _request() + _refused(0.1, 400, "context_length_exceeded", "BadRequestError") + _answer(0.5) + _done(1.2),
        Thresholds(),
    ),
    "agent-loop": (
        _request() + _loop(4) + _done(6.0, 200, 0),
        _request() + _loop(4, same=False) + _done(6.0, 200, 0),
        Thresholds(),
    ),
    "output-invalid": (
        _request() + _answer(0.1, valid=False, schema=True) + _done(0.8),
        _request() + _answer(0.1, valid=True, schema=True) + _done(0.8),
        Thresholds(),
    ),
    "llm-auth": (
        _request() + _refused(0.1, 401, "invalid_api_key", "AuthenticationError") + _done(0.3, 500, 0),
        _request() + _refused(0.1, 429, "rate_limit_exceeded", "RateLimitError") + _done(0.3, 500, 0),
        Thresholds(),
    ),
    "llm-config": (
        _request() + _refused(0.1, 404, "model_not_found", "NotFoundError", "gpt-nope") + _done(0.3, 500, 0),
        # the app's own NotFoundError is not the provider's
        _request() + _raised(0.2, "NotFoundError", "order 12 not found"),
        Thresholds(),
    ),
}


def test_every_agent_class_is_a_class_and_has_a_case():
    assert set(AGENT_CLASSES) <= set(CLASSES)
    assert set(CASES) == set(AGENT_CLASSES)


@pytest.mark.parametrize("cls", sorted(CASES))
def test_each_class_names_its_cause_and_its_near_miss_does_not(cls):
    positive, near_miss, thresholds = CASES[cls]
    got = diagnose(positive, thresholds)
    assert got.cls == cls, got.reason
    assert got.confidence >= 0.8
    missed = diagnose(near_miss, thresholds)
    assert missed.cls != cls, missed.reason


def test_reasons_name_the_tool_its_excerpt_the_limit_the_finish_reason_and_the_status():
    reasons = {cls: diagnose(CASES[cls][0], CASES[cls][2]).reason for cls in CASES}
    assert reasons["tool-error"] == (
        "Tool forecast (mcp, server weather) failed (protocol): 'Unknown city: Atlantis'; "
        "the response still completed with HTTP 200."
    )
    assert "Tool crawl (wire) took 8.0 s (slow threshold 3 s)" in reasons["tool-slow"]
    assert "finish_reason length" in reasons["output-truncated"]
    assert "finish_reason SAFETY" in reasons["content-filtered"]
    assert "HTTP 400 (context_length_exceeded)" in reasons["context-overflow"]
    assert "called lookup 4 times with the same arguments" in reasons["agent-loop"]
    assert "output_valid false" in reasons["output-invalid"]
    assert "HTTP 401 (invalid_api_key)" in reasons["llm-auth"]
    assert "openai/gpt-nope answered HTTP 404 (model_not_found)" in reasons["llm-config"]


def test_a_tool_error_reason_quotes_the_excerpt_and_counts_the_calls():
    events = CASES["tool-error"][0] + _tool(0.75, "clock", source="mcp", server="time")
    got = diagnose(events)
    assert got.reason == (
        "Tool forecast (mcp, server weather) failed (protocol): 'Unknown city: Atlantis'; "
        "1 of 2 tool calls failed; the response still completed with HTTP 200."
    )
    assert got.evidence["tool_calls"] == {"started": 2, "answered": 2, "failed": 1}
    assert got.evidence["tool_error"] == {
        "tool": "forecast", "source": "mcp", "server": "weather", "kind": "protocol",
        "excerpt": "Unknown city: Atlantis",
    }  # fmt: skip


def test_a_healthy_http_answer_is_never_ok_with_high_confidence_when_an_agent_cause_is_in_it():
    for cls, (positive, _, thresholds) in CASES.items():
        got = diagnose(positive, thresholds)
        assert not (got.cls == "ok" and got.confidence >= 0.9), cls
    # signs that name no cause alone still lower the confidence of ok
    for events in (
        _request() + _answer(0.1, finish="length") + _answer(0.7) + _done(1.5),
        _request() + _loop(2) + _answer(3.0) + _done(3.8),
    ):
        got = diagnose(events)
        assert got.cls == "ok" and got.confidence < 0.9, got.reason
        assert "but" in got.reason


def test_a_swallowed_tool_error_on_a_passing_test_is_flagged():
    """The harness saw the answer and passed; the test still gets the class, not ok."""
    harness = [
        _at("probe.start", 0.0, {"url": "http://app/chat", "viewport": None}),
        _at("probe.dom.firsttoken", 2.0, {"delta_ms_from_start": 2000, "text_length": 10}),
        _at("probe.exit", 2.1, {"terminal_outcome": "ok", "total_duration_ms": 2100, "sse_event_count": 3,
                                "first_token_delta_ms": 2000, "failure_classifier": None}, outcome="ok"),
    ]  # fmt: skip
    got = diagnose(harness + CASES["tool-error"][0])
    assert got.cls == "tool-error"


# -- precedence ---------------------------------------------------------------------------------


def test_a_tool_error_the_endpoint_turned_into_a_500_is_tool_error_not_server_error():
    events = _request() + _tool(
        0.1,
        "search",
        source="mcp",
        server="docs",
        outcome="err",
        kind="transport",
        excerpt="ConnectError: All connection attempts failed",
    )
    events += _raised(0.3, "ExceptionGroup", "unhandled errors in a TaskGroup (1 sub-exception)")
    got = diagnose(events)
    assert got.cls == "tool-error" and "(transport): 'ConnectError" in got.reason


def test_a_framework_limit_beats_agent_error_and_server_error():
    events = _request() + _loop(3) + _raised(5.0, "GraphRecursionError", "Recursion limit of 6 reached without ...")
    got = diagnose(events)
    assert got.cls == "agent-loop"
    assert "Recursion limit of 6 reached" in got.reason and "called lookup 3 times" in got.reason


def test_a_tool_that_keeps_failing_until_the_limit_is_tool_error_not_agent_loop():
    events = _request()
    for i in range(3):
        events += _answer(1.0 + i, tools=("lookup",))
        events += _tool(1.6 + i, "lookup", outcome="err", kind="reported", excerpt="Error: boom", args_hash="0")
    events += _raised(5.0, "GraphRecursionError", "Recursion limit of 6 reached")
    assert diagnose(events).cls == "tool-error"


def test_the_words_of_a_context_overflow_beat_the_generic_400():
    events = _request() + _refused(0.1, 400, "invalid_request_error", "BadRequestError")
    assert diagnose(events + _done(0.3, 500, 0)).cls == "llm-config"
    events += _raised(
        0.3, "BadRequestError", "invalid_request_error: prompt is too long: 208310 tokens > 200000 maximum"
    )
    got = diagnose(events)
    assert got.cls == "context-overflow" and "prompt is too long" in got.reason


def test_an_auth_or_config_refusal_beats_llm_error_but_a_mix_with_an_outage_does_not():
    assert diagnose(_refused(0.1, 403, "permission_error", "PermissionDeniedError")).cls == "llm-auth"
    mixed = _refused(0.1, 503, "overloaded", "InternalServerError") + _refused(0.5, 401, None, "AuthenticationError")
    assert diagnose(mixed).cls == "llm-error"


def test_a_truncated_answer_beats_the_invalid_output_it_caused():
    events = _request() + _raised(
        0.5, "ModelBehaviorError", "Response incomplete: incomplete_details=max_output_tokens"
    )
    assert diagnose(events).cls == "output-truncated"
    events = _request() + _answer(0.1, finish="length", valid=False, schema=True) + _done(0.8)
    assert diagnose(events).cls == "output-truncated"


def test_a_filtered_empty_answer_is_content_filtered_not_provider_empty():
    events = _request() + _answer(0.1, finish="content_filter") + _done(0.8, 200, 0)
    events[-2]["metadata"]["output_chars"] = 0
    assert diagnose(events).cls == "content-filtered"
    events[-2]["metadata"]["finish_reason"] = "stop"
    assert diagnose(events).cls == "provider-empty"


def test_the_output_tool_failing_is_structured_output_not_a_tool_error():
    events = _request() + _answer(0.1, tools=("final_result",), schema=True)
    events += _tool(0.7, "final_result", outcome="err", kind="reported", excerpt="1 validation error")
    events += _raised(0.9, "UnexpectedModelBehavior", "Exceeded maximum output retries (1)")
    got = diagnose(events)
    assert got.cls == "output-invalid" and "Exceeded maximum output retries" in got.reason


def test_a_slow_llm_call_comes_before_a_slow_tool():
    events = _request() + _answer(0.1, tools=("crawl",)) + _tool(0.7, "crawl", ms=5000) + _done(6.0)
    events[2]["metadata"]["latency_ms"] = 4000
    assert diagnose(events, Thresholds(slow_s=3.0)).cls == "llm-slow"


def test_an_mcp_call_never_answered_is_tool_error_and_a_wire_call_never_answered_is_not():
    events = _request() + _answer(0.1, tools=("search",)) + _tool(0.7, "search", source="mcp", server="docs",
                                                                   answered=False)  # fmt: skip
    got = diagnose(events)
    assert got.cls == "tool-error" and got.reason == "Tool search (mcp, server docs) was called and never answered."
    wire = _request() + _answer(0.1, tools=("search",)) + _tool(0.7, "search", answered=False)
    assert diagnose(wire).cls == "incomplete"


def _given_up(t: float, name: str, ms: int, kind: str) -> list[dict]:
    """A wire call whose result never came back: the line the request's end writes for it."""
    call = {"tool_name": name, "call_id": f"c{int(t * 1000)}", "source": "wire", "server": None}
    result = {"result_chars": None, "error_kind": kind, "error_excerpt": None}
    return [
        _at("backend.tool.call.start", t, call | {"args_chars": 20, "args_hash": "9a8b7c6d"}),
        _at("backend.tool.call.response", t + ms / 1000, call | result, outcome="timeout", duration_ms=ms),
    ]


def test_a_wire_call_given_up_at_the_end_of_its_request_is_evidence_not_the_cause():
    hang_up = _request() + _answer(0.1, tools=("crawl",)) + _given_up(0.7, "crawl", 8000, "timeout")
    hang_up += [_at("backend.sse.aborted", 8.7, {"termination_kind": "rst", "bytes_before_abort": 0}, outcome="err",
                    duration_ms=8700)]  # fmt: skip
    got = diagnose(hang_up, Thresholds(slow_s=3.0))
    assert got.cls == "client-disconnect", got.reason  # not tool-error, not tool-slow (8 s up to the hang-up)
    raised = _request() + _answer(0.1, tools=("crawl",)) + _given_up(0.7, "crawl", 300, "raised")
    raised += _raised(1.0, "RuntimeError", "crawler crashed")
    got = diagnose(raised)
    assert got.cls != "tool-error" and "crawler crashed" in got.reason, (got.cls, got.reason)
    # the same line from an MCP call (the call itself seen) is the tool's own timeout: tool-error
    mcp = _request() + _answer(0.1, tools=("crawl",)) + _tool(0.7, "crawl", source="mcp", outcome="timeout",
                                                              kind="timeout", ms=300) + _done(1.5)  # fmt: skip
    assert diagnose(mcp).cls == "tool-error"


# -- issue 18 item 16: a stream nobody closes ---------------------------------------------------


def _orphaned(hang_up_at: float, beats_to: int, kind: str = "rst") -> list[dict]:
    events = [
        *_request(),
        _at("backend.agent.enter", 0.01, {"agent_name": "smol", "model_id": "gpt-4o"}),
        _at("backend.llm.call.start", 0.1, {"provider": "openai", "model": "gpt-4o"}),
        _at("backend.sse.first_byte", 0.3, {"delta_ms_from_ingress": 300}, outcome="ok"),
        _at("backend.sse.aborted", hang_up_at, {"termination_kind": kind, "bytes_before_abort": 120}, outcome="err",
            duration_ms=int(hang_up_at * 1000)),
    ]  # fmt: skip
    events += [
        _at("backend.llm.call.heartbeat", 0.1 + s, {"elapsed_ms_since_start": s * 1000}) for s in range(5, beats_to, 5)
    ]
    return events


def test_an_llm_call_left_running_after_the_client_hung_up_is_client_disconnect():
    got = diagnose(_orphaned(1.0, 55))  # beats for 50 s after a hang-up at 1 s
    assert got.cls == "client-disconnect", got.reason
    assert got.reason == (
        "The client went away (rst) after the first byte, after 120 bytes and 1.0 s; "
        "its LLM call was left running after the client had gone (heartbeats to 50.0 s)."
    )
    assert got.evidence["orphaned_llm_call"] is True
    # heartbeats that stop under the threshold after the hang-up: still the hang-up, not a stall
    assert diagnose(_orphaned(1.0, 15, "fin_premature")).cls == "client-disconnect"


def test_a_client_that_gave_up_on_a_call_already_slow_or_stalled_keeps_the_calls_class():
    slow = _orphaned(35.0, 55)  # the call was 35 s old when the client left
    assert diagnose(slow).cls == "llm-slow"
    stalled = _orphaned(20.0, 10)  # last heartbeat at 5 s, long before the client left at 20 s
    assert diagnose(stalled).cls == "llm-stalled"


# -- the table of words -------------------------------------------------------------------------


@pytest.mark.parametrize("words", WORDS, ids=[f"{w.cls}:{w.words[0]}" for w in WORDS])
def test_each_entry_of_the_table_matches_its_real_example(words):
    assert all(word == word.lower() for word in words.words)  # the text is lower-cased once
    assert cause_of(words.example, from_llm=True) == words.cls
    if words.llm_only:
        assert cause_of(words.example) != words.cls  # too common to trust outside an LLM call
    else:
        assert cause_of(words.example) == words.cls
    assert words.origin


@pytest.mark.parametrize(
    ("reason", "cls"),
    [
        ("length", "output-truncated"),
        ("max_tokens", "output-truncated"),
        ("max_output_tokens", "output-truncated"),
        ("MAX_TOKENS", "output-truncated"),
        ("content_filter", "content-filtered"),
        ("refusal", "content-filtered"),
        ("SAFETY", "content-filtered"),
        ("PROHIBITED_CONTENT", "content-filtered"),
        ("model_context_window_exceeded", "context-overflow"),
        ("stop", None),
        ("STOP", None),
        ("end_turn", None),
        ("tool_calls", None),
        ("tool_use", None),
    ],
)
def test_finish_reasons_of_every_provider(reason, cls):
    assert finish_cause(reason) == cls


def test_real_framework_names_and_messages_name_their_class():
    """The frameworks' own exception classes, and their messages where raising one needs
    no network: the table must match what they really say, not what we remember."""
    need("langgraph")
    need("pydantic_ai")
    need("agents")
    import langgraph.errors
    import openai
    import pydantic_ai.exceptions as pe
    from agents import exceptions as ae
    from pydantic_ai.usage import RunUsage, UsageLimits

    with pytest.raises(pe.UsageLimitExceeded) as limit:
        UsageLimits(request_limit=1).check_before_request(RunUsage(requests=1))
    names = [
        (f"{type(limit.value).__name__}: {limit.value}", "agent-loop"),
        (str(limit.value), "agent-loop"),  # the message alone, as a caught-and-logged error shows it
        (langgraph.errors.GraphRecursionError.__name__, "agent-loop"),
        (ae.MaxTurnsExceeded.__name__, "agent-loop"),
        (pe.UnexpectedModelBehavior.__name__, "output-invalid"),
        (ae.ModelBehaviorError.__name__, "output-invalid"),
        (pe.OutputTokenLimitExceeded.__name__, "output-truncated"),
        (pe.IncompleteToolCall.__name__, "output-truncated"),
        (openai.LengthFinishReasonError.__name__, "output-truncated"),
        (pe.ContentFilterError.__name__, "content-filtered"),
        (openai.ContentFilterFinishReasonError.__name__, "content-filtered"),
        (pe.ModelContextWindowExceededError.__name__, "context-overflow"),
        (pe.ModelAuthenticationError.__name__, "llm-auth"),
        (pe.ModelNotFoundError.__name__, "llm-config"),
    ]
    for text, cls in names:
        assert cause_of(text) == cls, text
    for sdk_class, cls in ((openai.AuthenticationError, "llm-auth"), (openai.PermissionDeniedError, "llm-auth"),
                           (openai.NotFoundError, "llm-config"), (openai.BadRequestError, "llm-config")):  # fmt: skip
        assert cause_of(sdk_class.__name__, from_llm=True) == cls


def test_langgraph_recursion_limit_message_is_matched_as_raised():
    from typing import TypedDict

    need("langgraph")
    from langgraph.errors import GraphRecursionError
    from langgraph.graph import END, StateGraph

    class State(TypedDict):
        n: int

    graph = StateGraph(State)
    graph.add_node("again", lambda state: {"n": state["n"] + 1})
    graph.set_entry_point("again")
    graph.add_conditional_edges("again", lambda state: "again", {"again": "again", END: END})
    with pytest.raises(GraphRecursionError) as raised:
        graph.compile().invoke({"n": 0}, {"recursion_limit": 3})
    assert cause_of(str(raised.value)) == "agent-loop"  # the message alone names it
    assert cause_of(f"GraphRecursionError: {raised.value}") == "agent-loop"


def test_pydantic_ai_giving_up_on_output_is_matched_as_raised():
    need("pydantic_ai")
    from pydantic import BaseModel
    from pydantic_ai import Agent
    from pydantic_ai.exceptions import UnexpectedModelBehavior
    from pydantic_ai.messages import ModelResponse, ToolCallPart
    from pydantic_ai.models.function import FunctionModel

    class City(BaseModel):
        name: str
        population: int

    def never_valid(messages, info):
        tool = info.output_tools[0].name
        return ModelResponse(parts=[ToolCallPart(tool, {"name": "Atlantis"})])

    agent = Agent(FunctionModel(never_valid), output_type=City, retries=1)
    with pytest.raises(UnexpectedModelBehavior) as raised:
        agent.run_sync("which city?")
    text = f"{type(raised.value).__name__}: {raised.value}"
    assert cause_of(text) == "output-invalid", text


# -- bounded ------------------------------------------------------------------------------------


def test_thousands_of_tool_calls_keep_the_evidence_bounded():
    from cvdiag.diagnosis import Evidence

    ev = Evidence("t")
    for env in _request() + _tool(0.1, "warm", args_hash="ffffffff"):
        ev.add(env)
    small = len(pickle.dumps(ev))
    for i in range(5000):
        for env in _tool(0.2 + i / 1000, f"tool-{i}", args_hash=f"{i:08x}", outcome="err" if i % 2 else "ok",
                         kind="raised" if i % 2 else None, excerpt="x" * 500 if i % 2 else None):  # fmt: skip
            ev.add(env)
    for i in range(200):
        message = "Recursion limit of 3 reached " + "y" * 300
        ev.add(
            _at(
                "backend.agent.exit",
                9.0,
                {"terminal_outcome": "error", "error_class": f"E{i}", "error_message": message},
            )
        )
    assert len(pickle.dumps(ev)) < small + 2048
    assert (
        diagnose(_request() + _tool(0.1, "a", outcome="err", kind="raised", excerpt="z" * 5000)).reason.count("z") < 130
    )


def test_order_of_arrival_does_not_change_an_agent_verdict():
    rng = random.Random(15)
    for cls, (positive, _, thresholds) in CASES.items():
        expected = diagnose(positive, thresholds)
        for _ in range(5):
            shuffled = list(positive)
            rng.shuffle(shuffled)
            got = diagnose(shuffled, thresholds)
            assert (got.cls, got.reason) == (expected.cls, expected.reason), cls


def test_an_orphaned_call_that_answered_long_after_the_hang_up_is_still_the_hang_up():
    events = _orphaned(1.0, 5)  # no heartbeat: it answered instead, 40 s after it started
    answered = {"provider": "openai", "model": "gpt-4o", "latency_ms": 40000, "output_chars": 900}
    events.append(_at("backend.llm.call.response", 40.1, answered, outcome="ok", duration_ms=40000))
    got = diagnose(events)
    assert got.cls == "client-disconnect", got.reason
    assert got.reason.endswith("its LLM call was left running after the client had gone.")


def test_agent_error_quotes_the_agents_message():
    exit_md = {"terminal_outcome": "error", "total_duration_ms": 90, "error_class": "ValueError",
               "error_message": "no forecast for the moon"}  # fmt: skip
    events = [
        _at("backend.agent.enter", 0.0, {"agent_name": "weather", "model_id": None}),
        _at("backend.agent.exit", 0.1, exit_md, outcome="err"),
        *_done(0.2),
    ]
    assert diagnose(events).reason == (
        "Agent weather exited with terminal_outcome error, raising ValueError ('no forecast for the moon'); "
        "the response still completed with HTTP 200."
    )


def test_a_call_cancelled_as_the_client_left_is_not_left_running():
    events = _orphaned(1.0, 5)
    cancelled = {"provider": "openai", "model": "gpt-4o", "latency_ms": 950, "error_class": "CancelledError"}
    events.append(_at("backend.llm.call.response", 1.05, cancelled, outcome="timeout", duration_ms=950))
    events.append(_at("backend.llm.call.heartbeat", 1.3, {"elapsed_ms_since_start": 1200}))  # in flight as it left
    got = diagnose(events)
    assert got.cls == "client-disconnect" and "left running" not in got.reason, got.reason
    assert "its LLM call was cancelled" in got.reason


# -- one MCP call seen twice: on the MCP traffic and on the wire's hand-back ---------------------

HANDED_BACK = "An error occurred while running the tool. Please try again."
MCP_RAISED = "Error executing tool lookup_order: The order service is down"


def _mcp_call_handed_back(*, mcp_at: float = 0.6, mcp_ms: int = 300, wire_outcome: str = "err",
                          mcp_outcome: str = "err", mcp_name: str = "lookup_order") -> list[dict]:  # fmt: skip
    """The model asks at 0.5 for lookup_order, the MCP call runs inside (by default
    0.6-0.9), the framework hands its error back in the request at 1.4."""
    wire_failed = wire_outcome == "err"
    mcp_failed = mcp_outcome == "err"
    return (
        _request()
        + _answer(0.0, tools=("lookup_order",))
        + _tool(
            0.5,
            "lookup_order",
            ms=900,
            outcome=wire_outcome,
            kind="reported" if wire_failed else None,
            excerpt=HANDED_BACK if wire_failed else None,
        )
        + _tool(
            mcp_at,
            mcp_name,
            source="mcp",
            server="orders",
            ms=mcp_ms,
            outcome=mcp_outcome,
            kind="protocol" if mcp_failed else None,
            excerpt=MCP_RAISED if mcp_failed else None,
        )
        + _answer(1.4)
        + _done(2.0)
    )


def test_an_mcp_call_and_the_wire_hand_back_of_its_error_are_one_call():
    got = diagnose(_mcp_call_handed_back())
    assert (got.cls, got.reason) == (
        "tool-error",
        f"Tool lookup_order (mcp, server orders) failed (protocol): '{MCP_RAISED}'; "
        "the response still completed with HTTP 200.",
    )
    assert got.evidence["tool_calls"] == {"started": 1, "answered": 1, "failed": 1}
    assert got.evidence["tool_error"]["server"] == "orders"


def test_an_mcp_error_the_wire_handed_back_as_plain_text_is_one_failed_call():
    """The Agents SDK hands an isError result back as the tool's own text: only MCP tells."""
    got = diagnose(_mcp_call_handed_back(wire_outcome="ok"))
    assert got.cls == "tool-error" and "tool calls failed" not in got.reason
    assert got.evidence["tool_calls"] == {"started": 1, "answered": 1, "failed": 1}


@pytest.mark.parametrize(
    "apart",
    [
        {"mcp_at": 0.3},  # the MCP call started before the model asked
        {"mcp_at": 1.2, "mcp_ms": 400},  # it ended after the wire's result was sent
        {"mcp_name": "cancel_order"},  # another tool
    ],
    ids=["started-before", "ended-after", "other-tool"],
)
def test_an_mcp_call_whose_times_or_name_do_not_fit_the_wire_call_stays_apart(apart):
    got = diagnose(_mcp_call_handed_back(**apart))
    assert got.evidence["tool_calls"] == {"started": 2, "answered": 2, "failed": 2}
    assert "2 of 2 tool calls failed" in got.reason


def test_one_mcp_call_merges_with_one_wire_call_only():
    events = _mcp_call_handed_back() + _tool(0.55, "lookup_order", ms=900, outcome="err", kind="reported",
                                             excerpt=HANDED_BACK)  # fmt: skip
    got = diagnose(events)
    assert got.evidence["tool_calls"] == {"started": 2, "answered": 2, "failed": 2}
    assert "failed (protocol)" in got.reason and "2 of 2 tool calls failed" in got.reason


def test_the_merge_does_not_depend_on_the_order_of_arrival():
    events = _mcp_call_handed_back()
    expected = diagnose(events)
    rng = random.Random(7)
    for _ in range(10):
        shuffled = list(events)
        rng.shuffle(shuffled)
        got = diagnose(shuffled)
        assert (got.reason, got.evidence["tool_calls"]) == (expected.reason, expected.evidence["tool_calls"])


def test_thousands_of_wire_and_mcp_calls_keep_the_merge_bounded():
    from cvdiag.diagnosis import Evidence

    def pair(i: int) -> list[dict]:
        t = 1.0 + i
        return _tool(t, f"tool-{i}", ms=900) + _tool(t + 0.1, f"tool-{i}", source="mcp", server="s", ms=300)

    ev = Evidence("t")
    for env in _request() + [e for i in range(100) for e in pair(i)]:
        ev.add(env)
    size = len(pickle.dumps(ev))
    for env in [e for i in range(100, 5100) for e in pair(i)]:
        ev.add(env)
    assert len(pickle.dumps(ev)) < size + 512


def test_an_mcp_call_seen_on_the_wire_too_counts_once_towards_a_loop():
    """Two calls with the same arguments, each seen on MCP and on the wire, are two calls
    (not four: not a loop), the run still asking for more."""

    def twice_seen(t: float) -> list[dict]:
        return _tool(t, "lookup_order", ms=900) + _tool(t + 0.1, "lookup_order", source="mcp", server="orders", ms=300)

    events = _request() + _answer(0.0, tools=("lookup_order",)) + twice_seen(0.5)
    events += _answer(1.4, tools=("lookup_order",)) + twice_seen(1.9) + _answer(2.8, tools=("lookup_order",))
    got = diagnose(events + _done(3.5))
    assert got.cls != "agent-loop", got.reason
    looping = events + twice_seen(3.3) + _answer(4.2, tools=("lookup_order",)) + _done(5.0)
    assert diagnose(looping).reason == (
        "The model called lookup_order 3 times with the same arguments and never gave a final answer."
    )


def test_failed_llm_attempts_are_told_in_time_order_whatever_the_order_of_arrival():
    """Two files merged out of order: the statuses in the order they happened, the error
    type the provider named first and the retry-after it gave last, either way."""
    attempts = [
        ("429", {"http_status": 429, "error_type": "rate_limit_error", "retry_after_ms": 1000}),
        ("503", {"http_status": 503, "error_type": "overloaded_error", "retry_after_ms": 4000}),
        ("500", {"http_status": 500}),
    ]
    events = _request()
    for i, (_, md) in enumerate(attempts):
        events.append(
            _at("backend.llm.call.response", 1.0 + i, {"provider": "anthropic", "attempt": i, **md}, outcome="err")
        )
    in_order = diagnose(events)
    facts = in_order.evidence
    assert (facts["llm_error_statuses"], facts["llm_error_type"]) == ([429, 503, 500], "rate_limit_error")
    assert in_order.reason.endswith("HTTP 429, 503, 500 (rate_limit_error); retry-after 4.0 s.")
    for arrival in (events[:1] + events[:0:-1], [events[0], events[2], events[3], events[1]]):
        got = diagnose(arrival)
        assert (got.cls, got.reason, got.evidence) == (in_order.cls, in_order.reason, in_order.evidence)
