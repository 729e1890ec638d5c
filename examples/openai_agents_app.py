"""The OpenAI Agents SDK behind cvdiag, with no LLM code of cvdiag's in the app.

The agent talks to the Responses API (the SDK's default) and its answer is streamed as
server-sent events (see ``agent_sse``). Tracing to OpenAI's servers is turned off: the
LLM calls are on cvdiag's record instead.

    CVDIAG_ENABLED=1 CVDIAG_TIER=verbose OPENAI_BASE_URL=http://127.0.0.1:4010/v1 OPENAI_API_KEY=mock \\
        uvicorn examples.openai_agents_app:app --port 8000

Settings: the SDK's own environment variables, and ``agent_sse``'s (``EXAMPLE_*``).
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import openai
from agents import Agent, OpenAIResponsesModel, Runner, function_tool, set_tracing_disabled
from openai.types.responses import ResponseTextDeltaEvent

import cvdiag
from examples.agent_sse import HEARTBEAT_S, MAX_RETRIES, MODEL, agent_app
from examples.tools import lookup_order

cvdiag.instrument_httpx(heartbeat_s=HEARTBEAT_S)  # the one line: every LLM call below is now on the record
set_tracing_disabled(True)

client = openai.AsyncOpenAI(max_retries=MAX_RETRIES)
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
