"""Tool calls from the wire under real agent frameworks (LangGraph, pydantic-ai, the OpenAI
Agents SDK) with their own default HTTP clients, against the local stand-in provider: a
tool that fails is written as a failed tool call although every HTTP exchange was healthy."""

from __future__ import annotations

import asyncio
import json

import pytest
from emitkit import capture
from frameworkkit import need
from llm_server import Reply, llm_capture_on_fixture, server_fixture  # noqa: F401 (fixtures)

import cvdiag

pytestmark = pytest.mark.usefixtures("llm_capture_on")

CHAT = "/v1/chat/completions"
RESPONSES = "/v1/responses"


def _chat(message: dict) -> Reply:
    choice = {"index": 0, "finish_reason": "tool_calls" if "tool_calls" in message else "stop", "message": message}
    body = {"id": "c", "object": "chat.completion", "created": 1, "model": "gpt-4o-mini", "choices": [choice]}
    return Reply.json(json.dumps(body).encode())


def _asks(call_id: str) -> Reply:
    call = {"id": call_id, "type": "function", "function": {"name": "get_weather", "arguments": '{"city":"Atlantis"}'}}
    return _chat({"role": "assistant", "content": None, "tool_calls": [call]})


DONE = _chat({"role": "assistant", "content": "I could not find the weather."})


def _tool_lines(cap) -> list[tuple]:
    return [
        (e["boundary"].rsplit(".", 1)[-1], e["outcome"], e["metadata"]["call_id"], e["metadata"].get("error_kind"))
        for e in cap.events()
        if e["boundary"].startswith("backend.tool.call.")
    ]


def _excerpt(cap) -> str:
    (response,) = cap.of("backend.tool.call.response")
    return response["metadata"]["error_excerpt"]


# langgraph.prebuilt's create_react_agent is what the installed LangGraph documents
# (langchain.agents, its successor, is not installed here).
@pytest.mark.filterwarnings("ignore:create_react_agent has been moved")
def test_langgraph_tool_node_hands_the_error_back(server):
    need("langchain_openai")
    need("langgraph")
    from langchain_core.tools import tool
    from langchain_openai import ChatOpenAI
    from langgraph.prebuilt import ToolNode, create_react_agent

    @tool
    def get_weather(city: str) -> str:
        """The weather in a city."""
        raise ValueError(f"no station in {city}")

    server.plan(CHAT, _asks("call_lg"), DONE)
    model = ChatOpenAI(model="gpt-4o-mini", base_url=server.url + "/v1", api_key="sk-test")
    agent = create_react_agent(model, ToolNode([get_weather], handle_tool_errors=True))
    with capture("verbose") as cap, cvdiag.request_context(test_id="fw-langgraph"):
        agent.invoke({"messages": [("user", "weather?")]})
    assert _tool_lines(cap) == [("start", "info", "call_lg", None), ("response", "err", "call_lg", "reported")]
    assert _excerpt(cap) == "Error: ValueError('no station in Atlantis')\n Please fix your mistakes."


def test_pydantic_ai_model_retry_is_a_reported_failure(server):
    need("pydantic_ai")
    from pydantic_ai import Agent, ModelRetry
    from pydantic_ai.models.openai import OpenAIChatModel
    from pydantic_ai.providers.openai import OpenAIProvider

    server.plan(CHAT, _asks("call_pa"), DONE)
    model = OpenAIChatModel("gpt-4o-mini", provider=OpenAIProvider(base_url=server.url + "/v1", api_key="sk-test"))
    agent = Agent(model)

    @agent.tool_plain
    def get_weather(city: str) -> str:
        raise ModelRetry(f"Unknown city {city}")

    with capture("verbose") as cap, cvdiag.request_context(test_id="fw-pydantic-ai"):
        agent.run_sync("weather?")
    assert _tool_lines(cap) == [("start", "info", "call_pa", None), ("response", "err", "call_pa", "reported")]
    assert "Unknown city Atlantis" in _excerpt(cap)


def test_openai_agents_sdk_default_tool_error_on_the_responses_api(server):
    need("agents")
    from agents import Agent, Runner, function_tool, set_tracing_disabled
    from agents.models.openai_responses import OpenAIResponsesModel
    from openai import AsyncOpenAI

    def response(output: list[dict], rid: str) -> Reply:
        usage = {
            "input_tokens": 1,
            "output_tokens": 1,
            "total_tokens": 2,
            "input_tokens_details": {"cached_tokens": 0},
            "output_tokens_details": {"reasoning_tokens": 0},
        }
        body = {
            "id": rid,
            "object": "response",
            "created_at": 1,
            "status": "completed",
            "model": "gpt-4o-mini",
            "output": output,
            "usage": usage,
            "parallel_tool_calls": True,
            "tool_choice": "auto",
            "tools": [],
        }
        return Reply.json(json.dumps(body).encode())

    call = {
        "type": "function_call",
        "id": "fc_1",
        "call_id": "call_oa",
        "name": "get_weather",
        "arguments": '{"city":"Oslo"}',
        "status": "completed",
    }
    text = {"type": "output_text", "text": "Sorry.", "annotations": []}
    message = {"type": "message", "id": "m1", "role": "assistant", "status": "completed", "content": [text]}
    server.plan(RESPONSES, response([call], "r1"), response([message], "r2"))
    set_tracing_disabled(True)

    @function_tool
    def get_weather(city: str) -> str:
        raise RuntimeError("station offline")

    client = AsyncOpenAI(base_url=server.url + "/v1", api_key="sk-test")
    agent = Agent(name="weather", tools=[get_weather], model=OpenAIResponsesModel("gpt-4o-mini", client))
    with capture("verbose") as cap, cvdiag.request_context(test_id="fw-agents"):
        asyncio.run(Runner.run(agent, "weather?"))
    assert _tool_lines(cap) == [("start", "info", "call_oa", None), ("response", "err", "call_oa", "reported")]
    assert _excerpt(cap) == "An error occurred while running the tool. Please try again."
