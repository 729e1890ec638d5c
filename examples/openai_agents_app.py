"""The OpenAI Agents SDK behind cvdiag, with no LLM code of cvdiag's in the app.

The agent talks to the Responses API (the SDK's default) and its answer is streamed as
server-sent events (see ``agent_sse``). Tracing to OpenAI's servers is turned off: the
LLM calls are on cvdiag's record instead.

    CVDIAG_ENABLED=1 CVDIAG_TIER=verbose OPENAI_BASE_URL=http://127.0.0.1:4010/v1 OPENAI_API_KEY=mock \\
        uvicorn examples.openai_agents_app:app --port 8000

Settings: the SDK's own environment variables, ``agent_sse``'s and ``tools``' (``EXAMPLE_*``).
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import openai
from agents import Agent, OpenAIResponsesModel, Runner, function_tool, set_trace_processors, set_tracing_disabled
from openai.types.responses import ResponseTextDeltaEvent

import cvdiag
from examples.agent_sse import HEARTBEAT_S, MAX_RETRIES, MODEL, SPANS, agent_app
from examples.tools import TOOL_ERRORS_TO_MODEL, TOOLS

cvdiag.instrument_httpx(heartbeat_s=HEARTBEAT_S)  # the one line: every LLM call below is now on the record
if SPANS:  # the SDK's traces on, exported nowhere, and read by cvdiag's tracing processor
    set_trace_processors([])
    cvdiag.instrument()
else:
    set_tracing_disabled(True)

client = openai.AsyncOpenAI(max_retries=MAX_RETRIES)
agent = Agent(
    name="support",
    instructions="Answer the customer's question.",
    model=OpenAIResponsesModel(MODEL, openai_client=client),
    # By default the SDK hands a tool's error to the model ("An error occurred while
    # running the tool...") and the run goes on; failure_error_function=None fails the run.
    tools=[function_tool(f) if TOOL_ERRORS_TO_MODEL else function_tool(f, failure_error_function=None) for f in TOOLS],
)


async def stream(agent: Agent, message: str) -> AsyncIterator[str]:
    """Run ``agent`` on ``message`` with the SDK's defaults, yielding its text deltas."""
    result = Runner.run_streamed(agent, message)
    async for event in result.stream_events():
        if event.type == "raw_response_event" and isinstance(event.data, ResponseTextDeltaEvent):
            yield event.data.delta


async def answer(message: str) -> AsyncIterator[str]:
    async for delta in stream(agent, message):
        yield delta


app = agent_app("openai-agents", "openai-agents-agent", MODEL, answer)
