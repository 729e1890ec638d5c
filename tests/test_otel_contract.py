"""One span to one envelope (spec section 9): the contract's tables, against spans the real
libraries finish, and against every convention family by its documented names."""

from __future__ import annotations

import asyncio
import dataclasses
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from otelkit import evidence, recorder, view

from cvdiag.contract.otel import FailureEchoes, SpanView, may_be_evidence, read_span, scrub_metadata, span_test_id
from cvdiag.contract.otel._conventions import ALLOWED_KEYS, FAMILIES
from cvdiag.contract.schema import CATALOG
from cvdiag.contract.scrubber import SCAN_LIMIT

pydantic_ai = pytest.importorskip("pydantic_ai")


def _pydantic_ai_spans(run: str) -> list[Any]:
    """Spans of a real pydantic-ai agent (its own instrumentation, GenAI names) driven by a
    FunctionModel: a tool that raises, an output that never validates, or a loop."""
    from pydantic import BaseModel
    from pydantic_ai import Agent
    from pydantic_ai.capabilities.instrumentation import Instrumentation
    from pydantic_ai.exceptions import UnexpectedModelBehavior, UsageLimitExceeded
    from pydantic_ai.messages import ModelResponse, TextPart, ToolCallPart
    from pydantic_ai.models.function import FunctionModel
    from pydantic_ai.models.instrumented import InstrumentationSettings
    from pydantic_ai.usage import UsageLimits

    provider, exporter = recorder()
    capabilities = [Instrumentation(settings=InstrumentationSettings(tracer_provider=provider))]

    class Forecast(BaseModel):
        degrees: int

    def model(messages: list[Any], info: Any) -> ModelResponse:
        if run == "output":
            call = ToolCallPart(info.output_tools[0].name, {"degrees": "warm"}, tool_call_id=f"o{len(messages)}")
            return ModelResponse(parts=[call])
        if run == "loop" or len(messages) == 1:
            call = ToolCallPart("lookup", {"city": "Oslo"}, tool_call_id=f"call_{len(messages)}")
            return ModelResponse(parts=[call])
        return ModelResponse(parts=[TextPart("done")])

    output_type: Any = Forecast if run == "output" else str
    agent = Agent(FunctionModel(model), output_type=output_type, capabilities=capabilities, name="weather")

    @agent.tool_plain
    def lookup(city: str) -> str:
        if run == "raise":
            raise ValueError("weather db down, key sk-proj-abcdefghijklmnopqrstuvwx")
        return "sunny"

    limits = UsageLimits(request_limit=3) if run == "loop" else None
    with pytest.raises((ValueError, UnexpectedModelBehavior, UsageLimitExceeded)):
        asyncio.run(agent.run("What is the weather in Oslo?", usage_limits=limits))
    return list(exporter.get_finished_spans())


def _one(found: list[tuple[str, str, dict[str, Any]]], boundary: str) -> tuple[str, dict[str, Any]]:
    hits = [(outcome, meta) for b, outcome, meta in found if b == boundary]
    assert len(hits) == 1, found
    return hits[0]


def test_pydantic_ai_tool_that_raised_is_a_failed_tool_call_naming_the_exception() -> None:
    found = evidence(_pydantic_ai_spans("raise"))
    outcome, tool = _one(found, "backend.tool.call.response")
    assert outcome == "err"
    assert tool["tool_name"] == "lookup" and tool["call_id"] == "call_1" and tool["kind"] == "function"
    assert tool["error_kind"] == "raised" and tool["error_class"] == "ValueError"
    assert tool["source"] == "otel" and tool["otel_convention"] == "genai"
    assert "weather db down" in tool["error_excerpt"]
    assert "sk-proj-abcdefghijklmnopqrstuvwx" not in str(scrub_metadata(tool))
    outcome, agent = _one(found, "backend.agent.exit")
    assert outcome == "err" and agent["agent_name"] == "weather" and agent["error_class"] == "ValueError"
    llm = [meta for b, _, meta in found if b == "backend.llm.call.response"]
    assert llm and llm[0]["model"] == "function:model:" and llm[0]["prompt_tokens"] > 0


def test_pydantic_ai_output_that_never_validated_is_an_invalid_output_not_an_agent_error() -> None:
    found = evidence(_pydantic_ai_spans("output"))
    outcome, output = _one(found, "backend.agent.output")
    assert outcome == "err" and output["valid"] is False and output["attempts"] == 2
    assert output["error_class"] == "UnexpectedModelBehavior" and output["agent_name"] == "weather"
    assert not [b for b, _, _ in found if b == "backend.agent.exit"]


def test_pydantic_ai_request_limit_is_the_frameworks_own_limit_with_its_value() -> None:
    found = evidence(_pydantic_ai_spans("loop"))
    outcome, agent = _one(found, "backend.agent.exit")
    assert outcome == "err" and agent["terminal_outcome"] == "error"
    assert (agent["limit_name"], agent["limit_value"]) == ("request_limit", 3)
    assert agent["error_class"] == "UsageLimitExceeded"
    tools = [meta for b, outcome, meta in found if b == "backend.tool.call.response" and outcome == "ok"]
    assert len(tools) == 3 and tools[0]["result_chars"] == len("sunny")


# -- every family by its documented names (a library none of the tests installs) --------------


def test_an_invented_framework_is_read_the_day_it_emits_genai_spans() -> None:
    tool = view(
        "execute_tool fetch_invoice",
        {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.call.id": "tc-9", "gen_ai.agent.name": "billing"},
        exception=("acme.tools.InvoiceNotFound", "invoice 42 missing"),
        ms=3400,
    )
    ev = read_span(tool)
    assert ev is not None and ev.boundary == "backend.tool.call.response" and ev.outcome == "err"
    assert ev.metadata["tool_name"] == "fetch_invoice" and ev.metadata["error_class"] == "InvoiceNotFound"
    assert ev.duration_ms == 3400 and ev.convention == "genai"
    agent = view(
        "invoke_agent billing",
        {"gen_ai.operation.name": "invoke_agent"},
        exception=("acme.AcmeLoopLimit", "Max turns (6) exceeded"),
    )
    ev = read_span(agent)
    assert ev is not None and ev.boundary == "backend.agent.exit"
    assert (ev.metadata["agent_name"], ev.metadata["limit_name"], ev.metadata["limit_value"]) == (
        "billing",
        "max_turns",
        6,
    )


def test_an_invented_framework_is_read_the_day_it_emits_openinference_spans() -> None:
    ev = read_span(
        view(
            "lookup_stock",
            {"openinference.span.kind": "TOOL", "tool.name": "lookup_stock", "input.value": '{"sku": 1}'},
            exception=("StockError", "warehouse offline"),
        )
    )
    assert ev is not None and ev.convention == "openinference"
    assert ev.metadata["tool_name"] == "lookup_stock" and ev.metadata["error_class"] == "StockError"
    assert '{"sku": 1}' not in str(ev.metadata)


@pytest.mark.parametrize(
    ("message", "error_class", "limit"),
    [
        ("Max turns (3) exceeded", "MaxTurnsExceeded", ("max_turns", 3)),
        (
            "Recursion limit of 25 reached without hitting a stop condition.",
            "GraphRecursionError",
            ("recursion_limit", 25),
        ),
        ("Max iterations of 4 reached! Either something went wrong", "WorkflowRuntimeError", ("max_iterations", 4)),
        ("Max number of llm calls limit of `5` exceeded", "LlmCallsLimitExceededError", ("max_llm_calls", 5)),
        (
            "The next tool call(s) would exceed the tool_calls_limit of 2 (tool_calls=3).",
            "UsageLimitExceeded",
            ("tool_calls_limit", 2),
        ),
        ("Reached max steps.", "AgentMaxStepsError", ("max_steps", None)),
    ],
)
def test_each_frameworks_limit_is_named_with_its_value(message: str, error_class: str, limit: tuple) -> None:
    for attrs in ({"openinference.span.kind": "CHAIN"}, {"gen_ai.operation.name": "invoke_agent"}):
        ev = read_span(view("LangGraph", attrs, exception=(f"pkg.errors.{error_class}", message)))
        assert ev is not None and ev.boundary == "backend.agent.exit"
        assert (ev.metadata["limit_name"], ev.metadata.get("limit_value")) == limit


def test_a_chain_that_did_not_hit_a_limit_is_no_evidence() -> None:
    assert read_span(view("RunnableSequence", {"openinference.span.kind": "CHAIN"})) is None
    failed = view("agent", {"openinference.span.kind": "CHAIN"}, exception=("KeyError", "'x'"))
    assert read_span(failed) is None


def test_a_structured_output_that_failed_its_schema_is_an_invalid_output() -> None:
    message = (
        "1 validation error for Forecast\ndegrees\n  Input should be a valid integer, unable to parse string as an"
        " integer [type=int_parsing, input_value='warm and sunny', input_type=str]"
    )
    ev = read_span(
        view(
            "RunnableSequence",
            {"openinference.span.kind": "CHAIN"},
            exception=("pydantic_core._pydantic_core.ValidationError", message),
        )
    )
    assert ev is not None and ev.boundary == "backend.agent.output" and ev.outcome == "err"
    assert ev.metadata["valid"] is False and ev.metadata["schema_name"] == "Forecast"
    assert (
        ev.metadata["error_excerpt"] == "degrees: Input should be a valid integer, unable to parse string as an"
        " integer [type=int_parsing]"
    )
    assert "warm and sunny" not in str(ev.metadata)


def _failed_output(span_id: str, parent: str | None, message: str = "1 validation error for Forecast") -> SpanView:
    failed = view("RunnableSequence", {"openinference.span.kind": "CHAIN"}, exception=("ValidationError", message))
    return dataclasses.replace(failed, trace_id="ab" * 16, span_id=span_id, parent_span_id=parent)


def test_a_failure_the_spans_around_it_pass_on_is_read_once() -> None:
    echoes = FailureEchoes()
    parser, sequence, graph = (
        _failed_output("01" * 8, "02" * 8),
        _failed_output("02" * 8, "03" * 8),
        _failed_output("03" * 8, None),
    )
    read = [echoes.is_echo(v, ev) for v in (parser, sequence, graph) if (ev := read_span(v)) is not None]
    assert read == [False, True, True]  # the parser's failure, then two spans passing it on
    other = _failed_output("04" * 8, "05" * 8, "1 validation error for Report")
    parent = _failed_output("05" * 8, None)
    assert [echoes.is_echo(v, read_span(v)) for v in (other, parent)] == [False, False]  # its own failure


def test_the_failures_remembered_for_their_parents_are_bounded() -> None:
    echoes = FailureEchoes(most=2)
    for i in range(3):
        child = _failed_output(f"{i:016x}", f"{i + 100:016x}")
        echoes.is_echo(child, read_span(child))
    oldest = _failed_output(f"{100:016x}", None)
    newest = _failed_output(f"{102:016x}", None)
    assert (echoes.is_echo(oldest, read_span(oldest)), echoes.is_echo(newest, read_span(newest))) == (False, True)


def test_an_openllmetry_tool_and_llm_call() -> None:
    tool = read_span(
        view(
            "get_weather.tool",
            {
                "traceloop.span.kind": "tool",
                "traceloop.entity.name": "get_weather",
                "traceloop.entity.input": "secret prompt",
            },
            exception=("ConnectionError", "weather api unreachable"),
        )
    )
    assert tool is not None and tool.convention == "openllmetry" and tool.metadata["tool_name"] == "get_weather"
    llm = read_span(
        view(
            "openai.chat",
            {
                "llm.request.type": "chat",
                "gen_ai.system": "openai",
                "gen_ai.request.model": "gpt-4o-mini",
                "gen_ai.prompt.0.content": "hi",
                "gen_ai.usage.prompt_tokens": 12,
                "gen_ai.completion.0.content": "yo",
            },
            kind=3,
        )
    )
    assert llm is not None and llm.boundary == "backend.llm.call.response" and llm.outcome == "ok"
    assert (llm.metadata["provider"], llm.metadata["model"], llm.metadata["prompt_tokens"]) == (
        "openai",
        "gpt-4o-mini",
        12,
    )
    assert "hi" not in llm.metadata.values() and "yo" not in llm.metadata.values()


def test_an_mcp_tool_error_result_is_a_protocol_failure_of_an_mcp_tool() -> None:
    server = view(
        "tools/call search",
        {
            "mcp.method.name": "tools/call",
            "gen_ai.operation.name": "execute_tool",
            "gen_ai.tool.name": "search",
            "error.type": "tool_error",
        },
        error=True,
        kind=2,
    )
    ev = read_span(server)
    assert ev is not None and ev.boundary == "backend.tool.call.response"
    assert (ev.metadata["kind"], ev.metadata["error_kind"], ev.metadata["tool_name"]) == ("mcp", "protocol", "search")
    client = view("MCP send tools/call search", {"mcp.method.name": "tools/call", "jsonrpc.request.id": "3"}, kind=3)
    ev = read_span(client)
    assert ev is not None and ev.outcome == "ok" and ev.metadata["tool_name"] == "search"


def test_a_local_fault_of_the_apps_http_client_is_not_the_providers_error() -> None:
    trace = (
        "Traceback (most recent call last):\n  ...\nRuntimeError: Event loop is closed\n\nThe above exception was"
        " the direct cause of the following exception:\n\nopenai.APIConnectionError: Connection error."
    )
    ev = read_span(
        view(
            "chat gpt-4o-mini",
            {"gen_ai.operation.name": "chat", "gen_ai.provider.name": "openai"},
            exception=("openai.APIConnectionError", "Connection error."),
            stacktrace=trace,
            kind=3,
        )
    )
    assert ev is not None and ev.boundary == "backend.llm.call.response" and ev.outcome == "err"
    assert ev.metadata["error_class"] == "RuntimeError" and "http_status" not in ev.metadata


def test_a_provider_status_in_the_exception_message_is_the_calls_http_status() -> None:
    ev = read_span(
        view(
            "chat gpt-4o",
            {"gen_ai.operation.name": "chat"},
            exception=("pydantic_ai.exceptions.ModelHTTPError", "status_code: 503, model_name: gpt-4o"),
        )
    )
    assert ev is not None and ev.metadata["http_status"] == 503 and ev.metadata["error_class"] == "ModelHTTPError"


def test_an_http_server_span_is_the_requests_terminal() -> None:
    ev = read_span(view("POST /chat", {"http.request.method": "POST", "http.response.status_code": 502}, kind=2))
    assert ev is not None and ev.boundary == "backend.response.complete" and ev.outcome == "err"
    assert ev.metadata["http_status"] == 502 and ev.convention == "http"
    assert read_span(view("SELECT", {"db.system": "postgresql"}, kind=3)) is None


def test_the_test_id_comes_from_the_span_then_its_resource_then_baggage() -> None:
    assert span_test_id(view("x", {"test.id": "T-1", "cvdiag.test_id": "t-2"})) == "t-2"
    assert span_test_id(view("x", {}, resource={"test.id": "Run 7"})) == "run7"
    assert span_test_id(view("x", {}), {"cvdiag.test_id": "from-baggage"}) == "from-baggage"
    assert span_test_id(view("x", {"session.id": "s-1"}), attr="session.id") == "s-1"
    assert span_test_id(view("x", {"session.id": "s-1", "test.id": "t"}), attr="session.id") == "t"
    assert span_test_id(view("x", {"test.id": "!!!"})) is None


def test_a_huge_attribute_costs_no_more_than_the_scan_limit() -> None:
    huge = "x" * 10_000_000
    ev = read_span(
        view(
            "execute_tool big",
            {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": huge},
            exception=("E", huge),
        )
    )
    assert ev is not None and all(len(v) <= SCAN_LIMIT for v in ev.metadata.values() if isinstance(v, str))
    assert all(len(v) <= 256 for v in scrub_metadata(ev.metadata).values() if isinstance(v, str))


def test_every_table_entry_names_its_source() -> None:
    for family in FAMILIES:
        assert family.source
        assert all(a.source and a.key for a in family.attrs)


# -- the allow-list, for any attributes ---------------------------------------------------------

_PROMPT = "PROMPT-Zq8w secret user text"
_FORBIDDEN = (
    "gen_ai.prompt.0.content",
    "gen_ai.completion.0.content",
    "gen_ai.input.messages",
    "gen_ai.output.messages",
    "input.value",
    "output.value",
    "llm.input_messages.0.message.content",
    "gen_ai.tool.call.arguments",
    "gen_ai.tool.call.result",
    "traceloop.entity.input",
    "traceloop.entity.output",
    "gen_ai.system_instructions",
    "tool.parameters",
)
_KEYS = st.sampled_from(sorted(ALLOWED_KEYS) + list(_FORBIDDEN) + ["openinference.span.kind", "x.custom"])
_VALUES = st.one_of(
    st.text(max_size=40),
    st.sampled_from(
        [
            "TOOL",
            "AGENT",
            "LLM",
            "CHAIN",
            "execute_tool",
            "invoke_agent",
            "chat",
            "tool",
            "agent",
            "tools/call",
            "tool_error",
            "429",
            _PROMPT,
        ]
    ),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=True),
    st.booleans(),
    st.tuples(st.text(max_size=8), st.text(max_size=8)),
)


@settings(max_examples=400, deadline=None)
@given(
    name=st.sampled_from(["execute_tool t", "invoke_agent a", "chat m", "tools/call t", "running tool", "x", ""]),
    attrs=st.dictionaries(_KEYS, _VALUES, max_size=12),
    error=st.booleans(),
    exc=st.none() | st.tuples(st.text(max_size=30), st.text(max_size=60)),
    kind=st.integers(min_value=0, max_value=5),
)
def test_any_span_is_an_envelope_of_allow_listed_keys_or_nothing_never_a_prompt(
    name: str, attrs: dict[str, Any], error: bool, exc: tuple[str, str] | None, kind: int
) -> None:
    forbidden = {k: _PROMPT for k in _FORBIDDEN}
    span = view(name, {**attrs, **forbidden}, error=error, exception=exc, kind=kind)
    ev = read_span(span)
    if ev is None:
        return
    allowed = CATALOG[ev.boundary].metadata
    assert allowed is not None and set(ev.metadata) <= allowed
    assert ev.outcome in ("ok", "err", "timeout", "info")
    assert _PROMPT not in repr(dict(ev.metadata)) or _PROMPT in repr(attrs) or _PROMPT in repr(exc)
    for value in scrub_metadata(ev.metadata).values():
        assert not isinstance(value, str) or len(value) <= 512


def test_a_span_view_built_badly_is_no_evidence_not_a_crash() -> None:
    class Hostile:
        def __str__(self) -> str:
            raise RuntimeError("boom")

    span = SpanView(
        "execute_tool x",
        "0" * 32,
        "0" * 16,
        None,
        0,
        -5,
        True,
        None,
        {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": Hostile()},
    )
    ev = read_span(span)
    assert ev is None or ev.duration_ms is None


def test_pydantic_ai_retries_are_errors_handed_back_and_failed_output_checks() -> None:
    cause = (
        "1 validation error for Forecast\ndegrees\n  Input should be a valid integer [type=int_parsing,"
        " input_value='warm', input_type=str]"
    )
    attrs = {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "final_result"}
    output = read_span(
        view(
            "execute_tool final_result",
            {**attrs, "pydantic_ai.output.retry.cause": cause, "pydantic_ai.output.retry.attempt": 1},
        )
    )
    assert output is not None and output.boundary == "backend.agent.output" and output.outcome == "err"
    assert (output.metadata["valid"], output.metadata["attempts"], output.metadata["schema_name"]) == (
        False,
        1,
        "Forecast",
    )
    assert "warm" not in str(output.metadata)
    done = read_span(view("running output function", {}))
    assert done is not None and done.boundary == "backend.agent.output" and done.metadata["valid"] is True
    retried = read_span(
        view(
            "execute_tool lookup",
            {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "lookup",
             "pydantic_ai.tool.retry.cause": "no city called Atlantis"},
        )
    )  # fmt: skip
    assert retried is not None and retried.outcome == "err" and retried.metadata["handed_back"] is True
    assert retried.metadata["error_excerpt"] == "no city called Atlantis"


def test_a_span_no_convention_marks_is_skipped_before_it_is_read() -> None:
    assert may_be_evidence("GET /v1/users", {"http.request.method": "GET", "url.full": "http://x"}) is False
    assert may_be_evidence("SELECT", {"db.system": "postgresql"}) is False
    assert may_be_evidence("lookup", {"openinference.span.kind": "TOOL"}) is True
    assert may_be_evidence("execute_tool lookup", {}) is True  # the GenAI name alone
