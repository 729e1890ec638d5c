"""The example backend ``cvdiag demo`` runs: an agent that streams a simulated LLM's
answer over SSE, instrumented the way a real app would be.

Query parameters pick the failure: ``tokens`` (how many), ``delay`` (seconds per
token), ``latency`` (seconds before the LLM answers), ``fail=tool`` (a bug in the
app before the stream starts). It needs no network and no API key.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncIterator

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, StreamingResponse
from starlette.routing import Route

from cvdiag import CvdiagMiddleware, agent_scope, llm_call

MODEL = "sim-llm-1"
HEARTBEAT_S = float(os.environ.get("CVDIAG_DEMO_HEARTBEAT_S", "0.5"))
TOOLS = {"weather": "sunny"}


async def simulated_llm(prompt: str, tokens: int, delay: float, latency: float) -> AsyncIterator[str]:
    """A stand-in for a provider's streaming API."""
    await asyncio.sleep(latency)
    for i in range(tokens):
        yield f"token{i} "
        await asyncio.sleep(delay)


async def chat(request: Request) -> StreamingResponse:
    q = request.query_params
    tokens, delay, latency = int(q.get("tokens", "5")), float(q.get("delay", "0.02")), float(q.get("latency", "0"))
    if q.get("fail") == "tool":
        TOOLS[q.get("tool", "calendar")]  # a KeyError: the bug the demo shows
    prompt = q.get("q", "hello")

    async def stream() -> AsyncIterator[bytes]:
        async with agent_scope("demo-agent", model_id=MODEL):
            async with llm_call(
                "sim", MODEL, heartbeat_s=HEARTBEAT_S, prompt_token_count_estimate=len(prompt.split())
            ) as call:
                count = 0
                async for token in simulated_llm(prompt, tokens, delay, latency):
                    if count == 0:
                        call.first_token()
                    count += 1
                    yield f"event: token\ndata: {token}\n\n".encode()
                call.record(count, completion_tokens=count, finish_reason="stop")
            yield b"event: done\ndata: [DONE]\n\n"

    return StreamingResponse(stream(), media_type="text/event-stream")


async def health(request: Request) -> JSONResponse:
    return JSONResponse({"ok": True})


app = Starlette(routes=[Route("/chat", chat), Route("/health", health)])
app.add_middleware(CvdiagMiddleware, slug="demo", exclude_paths=["/health"])
