"""pydantic-ai behind cvdiag, with no LLM code of cvdiag's in the app.

The agent's answer is streamed as server-sent events. pydantic-ai's ``run_stream`` is a
context manager that must be entered and left in the same task: ``agent_sse`` runs the
whole agent in one task and hands the deltas over a queue, which is the streaming
pattern that works (awaiting the first delta in the endpoint and iterating the rest in
``StreamingResponse`` does not).

    CVDIAG_ENABLED=1 CVDIAG_TIER=verbose OPENAI_BASE_URL=http://127.0.0.1:4010/v1 OPENAI_API_KEY=mock \\
        uvicorn examples.pydantic_ai_app:app --port 8000

Settings: the SDK's own environment variables, and ``agent_sse``'s (``EXAMPLE_*``).
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import openai
from pydantic_ai import Agent
from pydantic_ai.models.openai import OpenAIChatModel
from pydantic_ai.providers.openai import OpenAIProvider

import cvdiag
from examples.agent_sse import HEARTBEAT_S, MAX_RETRIES, MODEL, agent_app
from examples.tools import lookup_order

cvdiag.instrument_httpx(heartbeat_s=HEARTBEAT_S)  # the one line: every LLM call below is now on the record

client = openai.AsyncOpenAI(max_retries=MAX_RETRIES)
agent = Agent(OpenAIChatModel(MODEL, provider=OpenAIProvider(openai_client=client)), tools=[lookup_order])


async def answer(message: str) -> AsyncIterator[str]:
    async with agent.run_stream(message) as result:
        async for delta in result.stream_text(delta=True):
            yield delta


app = agent_app("pydantic-ai", "pydantic-ai-agent", MODEL, answer)
