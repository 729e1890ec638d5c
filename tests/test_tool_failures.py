"""The failure table: every entry against the text its framework really writes (built with the
framework's own code where it is importable), and the body parsers against anything."""

from __future__ import annotations

import json
import warnings
from collections.abc import Callable

import pytest
from frameworkkit import need
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cvdiag.write._tool_failures import FAILURES, TAIL_CHARS, is_failure
from cvdiag.write._tool_wire import CALLS_PER_ANSWER, AnswerTools, AskedCalls


def _langgraph(template: str, **fields: str) -> str:
    tool_node = need("langgraph.prebuilt.tool_node")
    return getattr(tool_node, template).format(**fields)


def _pydantic_ai_retry() -> str:
    RetryPromptPart = need("pydantic_ai.messages").RetryPromptPart

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return RetryPromptPart(content="Unknown city 'Atlantis'", tool_name="get_weather").model_response()


def _pydantic_ai_failed() -> str:
    ToolReturnPart = need("pydantic_ai.messages").ToolReturnPart
    return ToolReturnPart(tool_name="get_weather", content="upstream timed out", outcome="failed").model_response_str()


def _openai_agents() -> str:
    return need("agents.tool").default_tool_error_function(None, ValueError("boom"))  # type: ignore[arg-type]


def _fastmcp_crash() -> str:
    """The isError text FastMCP (the ``mcp`` package's server) sends for a tool that raised."""
    import asyncio

    server = need("mcp.server.mcpserver").MCPServer("probe")

    @server.tool()
    def explode(city: str) -> str:
        raise ValueError(f"no weather for {city}")

    async def call() -> str:
        result = await server.call_tool("explode", {"city": "Atlantis"})
        return result.content[0].text if hasattr(result, "content") else str(result)

    try:
        return asyncio.run(call())
    except Exception as exc:  # this release raises the ToolError instead of returning it
        return str(exc)


#: One real sample per table entry (the names must cover FAILURES exactly), built when a
#: test asks: a sample made by a framework that is not installed skips its tests, saying so.
SAMPLES: dict[str, Callable[[], str]] = {
    "langgraph-mcp-error": lambda: _langgraph(
        "TOOL_CALL_ERROR_TEMPLATE", error=repr(Exception("Error executing tool get_weather: no weather for Atlantis"))
    ).replace("Exception(", "ToolException(", 1),
    "langgraph-tool-error": lambda: _langgraph(
        "TOOL_CALL_ERROR_TEMPLATE", error=repr(ValueError("no weather for Atlantis"))
    ),
    "langgraph-invalid-tool": lambda: _langgraph(
        "INVALID_TOOL_NAME_ERROR_TEMPLATE", requested_tool="get_wether", available_tools="get_weather, get_time"
    ),
    "langgraph-tool-execution": lambda: _langgraph(
        "TOOL_EXECUTION_ERROR_TEMPLATE", tool_name="get_weather", tool_kwargs="{'city': 'x'}", error="boom"
    ),
    "langchain-tool-exception": lambda: "Tool execution error",
    "openai-agents-tool-error": _openai_agents,
    "pydantic-ai-retry": _pydantic_ai_retry,
    "pydantic-ai-error-object": _pydantic_ai_failed,
    "mcp-tool-error": _fastmcp_crash,
    "pydantic-ai-mcp-error": lambda: "Tool 'get_weather' returned an error",
    "openai-agents-mcp-error": lambda: "Error invoking MCP tool get_weather on server 'weather': Connection closed",
}
HEALTHY = [
    "Sunny, 21°C",
    '{"temperature": 21, "error": null}',
    "Error handling in Python is done with try/except.",  # starts like LangGraph's, is not one
    '{"items": [], "next": null}',
    "",
]


def test_every_entry_has_a_real_sample():
    assert set(SAMPLES) == {f.name for f in FAILURES}


@pytest.mark.parametrize("failure", FAILURES, ids=[f.name for f in FAILURES])
def test_each_entry_names_its_own_sample(failure):
    sample = SAMPLES[failure.name]()
    found = is_failure(sample)
    assert found is failure, (failure.name, sample, found)


@pytest.mark.parametrize("failure", FAILURES, ids=[f.name for f in FAILURES])
def test_each_entry_still_matches_inside_a_megabyte(failure):
    sample = SAMPLES[failure.name]()
    if failure.ends is not None and failure.starts is not None and "\n" in sample:
        head, _, tail = sample.rpartition("\n")
        padded = head + " filler" * 150_000 + "\n" + tail
    else:
        padded = sample
    assert len(padded) < TAIL_CHARS or is_failure(padded) is not None


@pytest.mark.parametrize("text", HEALTHY)
def test_healthy_results_are_not_failures(text):
    assert is_failure(text) is None


@given(st.text(max_size=2000))
def test_is_failure_never_raises(text):
    is_failure(text)


# -- the body parsers never raise and stay bounded -------------------------------------

APIS = ["chat.completions", "responses", "messages", "generate_content", "embeddings", "other"]
_json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=20),
    lambda children: st.lists(children, max_size=5) | st.dictionaries(st.text(max_size=12), children, max_size=5),
    max_leaves=12,
)
_shapes = st.fixed_dictionaries(
    {},
    optional={
        "choices": st.lists(
            st.fixed_dictionaries(
                {},
                optional={
                    "delta": st.fixed_dictionaries({}, optional={"tool_calls": st.lists(_json_values, max_size=4)}),
                    "message": st.fixed_dictionaries({}, optional={"tool_calls": st.lists(_json_values, max_size=4)}),
                    "index": _json_values,
                },
            ),
            max_size=3,
        ),
        "type": st.sampled_from(["content_block_start", "content_block_delta", "response.output_item.done", "x"]),
        "content_block": _json_values,
        "item": _json_values,
        "candidates": _json_values,
        "output": _json_values,
        "content": _json_values,
        "delta": _json_values,
        "index": _json_values,
    },
)


@settings(max_examples=50, suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from(APIS), st.lists(_shapes | _json_values, max_size=6), st.binary(max_size=200))
def test_answer_readers_never_raise_and_stay_bounded(api, events, noise):
    tools = AnswerTools(api, text_cap=100)
    block = b"".join(b"data: " + json.dumps(e).encode() + b"\n\n" for e in events) + noise
    tools.block(block + b'\n"tool_calls" "functionCall" "tool_use" "function_call" "input_json_delta"\n')
    for event in events:
        tools.body(event)
    assert len(tools.calls) <= CALLS_PER_ANSWER
    assert tools.text is None or tools.text_size <= 100
    for call in tools.calls:
        line = call.start_line()
        assert len(line["args_hash"]) == 8 and line["args_chars"] >= 0


@settings(max_examples=50, suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from(APIS), st.lists(_json_values | _shapes, max_size=8), st.binary(max_size=300), st.booleans())
def test_request_readers_never_raise(api, elements, noise, valid):
    memory = AskedCalls()
    from cvdiag.write._tool_wire import Asked

    memory.asked("t", [Asked("call_1", "f"), Asked(None, "g")], 0)
    key = {"chat.completions": "messages", "messages": "messages", "responses": "input"}.get(api, "contents")
    body = json.dumps({key: elements}).encode() if valid else b'{"' + key.encode() + b'":[' + noise
    for _ in range(2):  # the second read goes through the remembered conversation
        watch = memory.request("t", api, body)
        assert watch is None or all(outcome in ("ok", "err") for _, outcome, _ in watch.results)
        body = body[:-1] + b',{"role":"tool","tool_call_id":"call_1","content":"x"}]}' if valid else body + noise
    assert len(memory.pending) <= 1


@settings(max_examples=50, suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(st.binary(max_size=400), st.lists(st.binary(max_size=120), max_size=6), st.booleans(), st.integers(100, 599))
def test_mcp_answers_never_raise(request_tail, chunks, event_stream, status):
    import httpx

    from cvdiag.testing import capture
    from cvdiag.write import _mcp_capture

    arguments = {"x": request_tail.decode("latin-1")}
    body = json.dumps(
        {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "t", "arguments": arguments}}
    )
    body = body.encode()
    request = httpx.Request("POST", "http://mcp.local:9/mcp", content=body)
    with capture(tier="verbose") as lines:
        exchange = _mcp_capture.begin(request, lambda: body)
        if exchange is not None:
            exchange.http_status = status
            exchange._event_stream = event_stream
            for chunk in chunks:
                exchange.feed(chunk)
            exchange.ended()
            exchange.abandoned()  # a second ending changes nothing
    assert exchange is not None
    assert [e["boundary"] for e in lines if not e["boundary"].startswith("cvdiag.")] == [
        "backend.tool.call.start",
        "backend.tool.call.response",
    ]


@given(st.binary(max_size=600))
def test_requested_schema_never_raises(body):
    from cvdiag.write._output_schema import requested

    requested(body)
    requested(b'{"response_format":{"type":"json_schema","json_schema":{"schema":' + body)
    requested(b'{"tools":[{"name":"final_result","parameters":' + body)
