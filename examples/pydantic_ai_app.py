"""pydantic-ai behind cvdiag, with no LLM code of cvdiag's in the app.

The agent's answer is streamed as server-sent events. pydantic-ai's ``run_stream`` is a
context manager that must be entered and left in the same task: ``agent_sse`` runs the
whole agent in one task and hands the deltas over a queue, which is the streaming
pattern that works (awaiting the first delta in the endpoint and iterating the rest in
``StreamingResponse`` does not).

A second agent at ``/chat/report`` answers with structured output (an ``OrderReport``,
through pydantic-ai's default final-result tool).

    CVDIAG_ENABLED=1 CVDIAG_TIER=verbose OPENAI_BASE_URL=http://127.0.0.1:4010/v1 OPENAI_API_KEY=mock \\
        uvicorn examples.pydantic_ai_app:app --port 8000

Settings: the SDK's own environment variables, ``agent_sse``'s and ``tools``' (``EXAMPLE_*``).
"""

from __future__ import annotations

import functools
from collections.abc import AsyncIterator, Callable

import openai
from pydantic import BaseModel
from pydantic_ai import Agent, ModelRetry
from pydantic_ai.models.openai import OpenAIChatModel
from pydantic_ai.providers.openai import OpenAIProvider

import cvdiag
from examples.agent_sse import HEARTBEAT_S, MAX_RETRIES, MODEL, SPANS, agent_app
from examples.tools import TOOL_ERRORS_TO_MODEL, TOOLS

cvdiag.instrument_httpx(heartbeat_s=HEARTBEAT_S)  # the one line: every LLM call below is now on the record
if SPANS:
    cvdiag.instrument()  # and the spans below become evidence
    Agent.instrument_all()  # pydantic-ai's documented switch: its spans on


def handed_back(function: Callable[..., str]) -> Callable[..., str]:
    """``function`` with its errors given to the model: pydantic-ai's documented way is
    ``ModelRetry`` (any other exception fails the run)."""

    @functools.wraps(function)
    def tool(*args: object, **kwargs: object) -> str:
        try:
            return function(*args, **kwargs)
        except Exception as exc:
            raise ModelRetry(f"{type(exc).__name__}: {exc}") from exc

    return tool


class OrderReport(BaseModel):
    order_id: str
    status: str


client = openai.AsyncOpenAI(max_retries=MAX_RETRIES)
model = OpenAIChatModel(MODEL, provider=OpenAIProvider(openai_client=client))
agent = Agent(model, tools=[handed_back(f) if TOOL_ERRORS_TO_MODEL else f for f in TOOLS])
report_agent = Agent(model, output_type=OrderReport)


async def answer(message: str) -> AsyncIterator[str]:
    async with agent.run_stream(message) as result:
        async for delta in result.stream_text(delta=True):
            yield delta


async def report(message: str) -> AsyncIterator[str]:
    result = await report_agent.run(message)
    yield result.output.model_dump_json()


app = agent_app("pydantic-ai", "pydantic-ai-agent", MODEL, answer, more={"report": report})
