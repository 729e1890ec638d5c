"""A small agent backend instrumented with cvdiag: Starlette, the official ``openai``
SDK, and the model's answer streamed to the client as server-sent events. cvdiag's
whole footprint: the middleware, ``instrument_httpx()`` and one ``agent_scope``; the LLM
call is recorded at the HTTP client. The same with LangGraph, pydantic-ai, the OpenAI
Agents SDK or the ``anthropic`` SDK: ``*_app.py`` beside this file.

Run it against any OpenAI-compatible server (the e2e tests use aimock)::

    CVDIAG_ENABLED=1 CVDIAG_TIER=verbose OPENAI_BASE_URL=http://127.0.0.1:4010/v1 \\
        uvicorn examples.app:app --port 8000
    curl -N -H 'x-test-id: demo-1' 'http://127.0.0.1:8000/chat?q=hello'

Settings (environment): ``OPENAI_BASE_URL`` (required), ``OPENAI_API_KEY`` (a
placeholder by default), ``EXAMPLE_MODEL`` (``gpt-4o-mini``), ``EXAMPLE_HEARTBEAT_S``
(10; the e2e tests make it small so a slow call shows heartbeats),
``EXAMPLE_MAX_RETRIES`` (0: a provider error reaches the client at once instead of
after the SDK's back-off).
"""

from __future__ import annotations

import json
import os
from collections.abc import AsyncIterator

import anyio
import openai
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, Response, StreamingResponse
from starlette.routing import Route

import cvdiag

MODEL = os.environ.get("EXAMPLE_MODEL", "gpt-4o-mini")
HEARTBEAT_S = float(os.environ.get("EXAMPLE_HEARTBEAT_S", "10"))

# The one line. Every request the SDK sends now carries x-test-id and the other
# allow-listed headers of the request being handled (so the LLM mock's journal joins
# the backend's log), and every LLM call it makes writes backend.llm.call.* lines.
cvdiag.instrument_httpx(heartbeat_s=HEARTBEAT_S)

client = openai.AsyncOpenAI(
    base_url=os.environ["OPENAI_BASE_URL"],
    api_key=os.environ.get("OPENAI_API_KEY", "sk-test-example-key"),
    max_retries=int(os.environ.get("EXAMPLE_MAX_RETRIES", "0")),
)


def _sse(data: dict[str, object], event: str | None = None) -> str:
    head = f"event: {event}\n" if event else ""
    return f"{head}data: {json.dumps(data)}\n\n"


async def _answer(message: str) -> AsyncIterator[str]:
    """The agent: one streamed LLM call, each delta forwarded as an SSE event. No
    ``llm_call`` here: ``instrument_httpx()`` records the call (start, heartbeats,
    response with status, attempts, time to first token, tokens and finish reason)."""
    async with cvdiag.agent_scope("example-agent", model_id=MODEL):
        stream = await client.chat.completions.create(
            model=MODEL,
            messages=[{"role": "user", "content": message}],
            stream=True,
            stream_options={"include_usage": True},
        )
        finish_reason = None
        try:
            async for chunk in stream:
                for choice in chunk.choices:
                    finish_reason = choice.finish_reason or finish_reason
                    if choice.delta.content:
                        yield _sse({"delta": choice.delta.content})
        finally:
            # When the client hangs up, Starlette cancels this generator through an
            # anyio cancel scope, which would cancel the close too; shield it so the
            # connection to the provider is released now, not when it is collected.
            with anyio.CancelScope(shield=True):
                await stream.close()
        yield _sse({"finish_reason": finish_reason}, event="done")


def _relay(exc: openai.APIStatusError) -> Response:
    """A provider error becomes the client's error: 429 stays 429 (with its
    Retry-After), anything else from the provider is a 502 Bad Gateway."""
    status = 429 if exc.status_code == 429 else 502
    headers = {}
    if status == 429 and (retry_after := exc.response.headers.get("retry-after")):
        headers["retry-after"] = retry_after
    body = {"error": f"the model provider answered {exc.status_code}"}
    return JSONResponse(body, status_code=status, headers=headers)


async def _prepend(first: str, rest: AsyncIterator[str]) -> AsyncIterator[str]:
    yield first
    async for item in rest:
        yield item


async def chat(request: Request) -> Response:
    if request.method == "POST":
        message = str((await request.json()).get("message", ""))
    else:
        message = request.query_params.get("q", "")
    answer = _answer(message)
    # Wait for the first delta before committing to a 200, so a provider that
    # refuses the call is relayed with a real status code instead of a broken stream.
    try:
        first = await anext(answer)
    except openai.APIStatusError as exc:
        return _relay(exc)
    except openai.APIConnectionError:
        return JSONResponse({"error": "the model provider could not be reached"}, status_code=502)
    return StreamingResponse(_prepend(first, answer), media_type="text/event-stream")


async def health(request: Request) -> Response:
    return PlainTextResponse("ok")


app = Starlette(
    routes=[Route("/chat", chat, methods=["GET", "POST"]), Route("/health", health)],
    middleware=[Middleware(cvdiag.CvdiagMiddleware, slug="example", exclude_paths=("/health",))],
)
