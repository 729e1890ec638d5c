"""Serve any agent framework's answer as server-sent events, instrumented with cvdiag.

The pattern, in one place for every framework example beside this file:

- ``cvdiag.instrument_httpx()`` once, before the framework builds its SDK client: every
  LLM call the framework makes (through httpx) then writes its own
  ``backend.llm.call.*`` lines, retries and all, with no ``llm_call`` in the app.
- The agent runs start to finish in ONE task, inside ``agent_scope``, and hands its
  text deltas over a queue. Frameworks such as pydantic-ai keep context variables
  open across their stream (``async with agent.run_stream(...)``), so awaiting the
  first delta in the endpoint and then iterating the rest in ``StreamingResponse``
  (another task) breaks them; a queue between one agent task and the response does not.
- The endpoint waits for the first item before committing to a status, so a provider
  that refuses the call is relayed with a real one (429 keeps its Retry-After, anything
  else is a 502). Any other failure of the agent is an ``error`` event in the stream.
- When the client hangs up, the response cancels the agent task, so the LLM call in
  flight ends as cancelled (outcome ``timeout``, ``CancelledError``) right away.
"""

from __future__ import annotations

import asyncio
import json
import os
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping

import anyio
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, Response, StreamingResponse
from starlette.routing import Route

import cvdiag

# The examples' settings (environment); the SDKs read their own (OPENAI_BASE_URL,
# OPENAI_API_KEY, ANTHROPIC_BASE_URL, ANTHROPIC_API_KEY).
MODEL = os.environ.get("EXAMPLE_MODEL", "gpt-4o-mini")
#: The SDKs' own default, spelled out: a provider error is retried twice.
MAX_RETRIES = int(os.environ.get("EXAMPLE_MAX_RETRIES", "2"))
#: Heartbeats of an open LLM call (the e2e tests make it small so a slow call shows some).
HEARTBEAT_S = float(os.environ.get("EXAMPLE_HEARTBEAT_S", "10"))
#: ``EXAMPLE_SPANS=1``: the app also calls ``cvdiag.instrument()`` and turns its framework's
#: own spans on (the one documented line each), so that they are read as evidence.
SPANS = os.environ.get("EXAMPLE_SPANS", "").strip() == "1"
#: A framework's agent: the user's message in, the answer's text deltas out.
Answer = Callable[[str], AsyncIterator[str]]
_END = object()


def sse(data: dict[str, object], event: str | None = None) -> str:
    head = f"event: {event}\n" if event else ""
    return f"{head}data: {json.dumps(data)}\n\n"


def provider_refusal(exc: BaseException) -> Response | None:
    """The provider's HTTP error behind ``exc`` (an SDK's own, or a framework's wrapper
    of it) as the client's error, or None when the provider did not refuse the call."""
    chain: list[BaseException] = []
    while exc is not None and exc not in chain:
        chain.append(exc)
        exc = exc.__cause__ or exc.__context__
    status = next((s for e in chain if isinstance(s := getattr(e, "status_code", None), int) and s >= 400), None)
    if status is None:
        return None
    responses = (r for e in chain if (r := getattr(e, "response", None)) is not None and hasattr(r, "headers"))
    retry_after = next((v for r in responses if (v := r.headers.get("retry-after"))), None)
    headers = {"retry-after": retry_after} if status == 429 and retry_after else {}
    body = {"error": f"the model provider answered {status}"}
    return JSONResponse(body, status_code=429 if status == 429 else 502, headers=headers)


async def _run(answer: Answer, message: str, agent_name: str, model: str, queue: asyncio.Queue) -> None:
    """The agent, start to finish in this one task; its deltas and its end go to ``queue``."""
    try:
        async with cvdiag.agent_scope(agent_name, model_id=model):
            async for delta in answer(message):
                if delta:
                    queue.put_nowait(sse({"delta": delta}))
        queue.put_nowait(sse({"done": True}, event="done"))
    except Exception as exc:
        queue.put_nowait(exc)
    finally:
        queue.put_nowait(_END)


async def _relay(first: object, queue: asyncio.Queue, agent: asyncio.Task) -> AsyncIterator[str]:
    item = first
    try:
        while item is not _END:
            if isinstance(item, Exception):
                yield sse({"error": type(item).__name__}, event="error")
                return
            yield item
            item = await queue.get()
    finally:
        # The client hung up (Starlette cancels this generator through an anyio cancel
        # scope, so shield the wait) or the answer is over: stop the agent now.
        agent.cancel()
        with anyio.CancelScope(shield=True):
            await asyncio.gather(agent, return_exceptions=True)


def agent_app(
    slug: str, agent_name: str, model: str, answer: Answer, more: Mapping[str, Answer] | None = None
) -> Starlette:
    """A Starlette app with ``GET|POST /chat`` streaming ``answer``, ``GET|POST /chat/NAME``
    streaming each of ``more`` (other agents of the same app), and ``GET /health``."""

    def endpoint(answer: Answer) -> Callable[[Request], Awaitable[Response]]:
        async def chat(request: Request) -> Response:
            if request.method == "POST":
                message = str((await request.json()).get("message", ""))
            else:
                message = request.query_params.get("q", "")
            queue: asyncio.Queue = asyncio.Queue()
            agent = asyncio.create_task(_run(answer, message, agent_name, model, queue))
            first = await queue.get()
            if isinstance(first, Exception) and (refusal := provider_refusal(first)) is not None:
                await agent
                return refusal
            return StreamingResponse(_relay(first, queue, agent), media_type="text/event-stream")

        return chat

    async def health(request: Request) -> Response:
        return PlainTextResponse("ok")

    chats = [Route(f"/chat/{name}", endpoint(other), methods=["GET", "POST"]) for name, other in (more or {}).items()]
    return Starlette(
        routes=[Route("/chat", endpoint(answer), methods=["GET", "POST"]), *chats, Route("/health", health)],
        middleware=[Middleware(cvdiag.CvdiagMiddleware, slug=slug, exclude_paths=("/health",))],
    )
