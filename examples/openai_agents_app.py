"""The OpenAI Agents SDK behind cvdiag, with no LLM code of cvdiag's in the app.

The agent talks to the Responses API (the SDK's default) and its answer is streamed as
server-sent events (see ``agent_sse``). Tracing to OpenAI's servers is turned off: the
LLM calls are on cvdiag's record instead.

    CVDIAG_ENABLED=1 CVDIAG_TIER=verbose OPENAI_BASE_URL=http://127.0.0.1:4010/v1 \\
        uvicorn examples.openai_agents_app:app --port 8000

Settings (environment): ``OPENAI_BASE_URL``, ``OPENAI_API_KEY`` (a placeholder by
default), ``EXAMPLE_MODEL`` (``gpt-4o-mini``), ``EXAMPLE_MAX_RETRIES`` (2, the SDK's),
``EXAMPLE_HEARTBEAT_S`` (10).
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator

import openai
from agents import Agent, OpenAIResponsesModel, Runner, function_tool, set_tracing_disabled
from openai.types.responses import ResponseTextDeltaEvent

import cvdiag
from examples.agent_sse import HEARTBEAT_S, agent_app
from examples.tools import lookup_order

cvdiag.instrument_httpx(heartbeat_s=HEARTBEAT_S)  # the one line: every LLM call below is now on the record
set_tracing_disabled(True)

MODEL = os.environ.get("EXAMPLE_MODEL", "gpt-4o-mini")
client = openai.AsyncOpenAI(
    base_url=os.environ["OPENAI_BASE_URL"],
    api_key=os.environ.get("OPENAI_API_KEY", "sk-test-example-key"),
    max_retries=int(os.environ.get("EXAMPLE_MAX_RETRIES", "2")),
)
agent = Agent(
    name="support",
    instructions="Answer the customer's question.",
    model=OpenAIResponsesModel(MODEL, openai_client=client),
    # failure_error_function=None: a tool that raises fails the run (by default the
    # SDK would hand the error text to the model instead).
    tools=[function_tool(lookup_order, failure_error_function=None)],
)


async def answer(message: str) -> AsyncIterator[str]:
    result = Runner.run_streamed(agent, message)
    async for event in result.stream_events():
        if event.type == "raw_response_event" and isinstance(event.data, ResponseTextDeltaEvent):
            yield event.data.delta


app = agent_app("openai-agents", "openai-agents-agent", MODEL, answer)
