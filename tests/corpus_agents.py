"""The corpus's agent scenarios: endpoints whose agent talks to a real local provider
stand-in (``llm_server.LLMServer``, uvicorn) with the openai SDK, through cvdiag's HTTP
capture. The stand-in's answers ask for a tool, stop on the token limit, are filtered,
or refuse the request (401, 404, 400 context length); the agent hands back a tool
error, runs a tool too long, raises a framework's turn limit, or gets structured output
without its required keys. ``corpus_server.build_app`` mounts them under ``/chat/``.
"""

from __future__ import annotations

import asyncio
import json
import threading
from typing import Any

import openai
from llm_server import DATA, LLMServer, Reply
from starlette.responses import JSONResponse, StreamingResponse

import cvdiag

CHAT = "/v1/chat/completions"
TOOLS = (DATA / "openai_chat_tools_stream.sse").read_bytes()
TEXT = (DATA / "openai_chat_stream.sse").read_bytes()
#: LangGraph's ToolNode hands a raised tool's error back to the model in these words.
LANGGRAPH_ERROR = "Error: ValueError('no such city: Atlantis')\n Please fix your mistakes."
#: The answer's schema requires both keys; the model gives one.
WEATHER_SCHEMA = {
    "type": "json_schema",
    "json_schema": {
        "name": "weather",
        "schema": {
            "type": "object",
            "properties": {"city": {"type": "string"}, "celsius": {"type": "number"}},
            "required": ["city", "celsius"],
        },
    },
}
QUESTION = [{"role": "user", "content": "Weather in Paris?"}]


def _finished(reason: str) -> bytes:
    return TEXT.replace(b'"finish_reason":"stop"', f'"finish_reason":"{reason}"'.encode())


def _json_answer(content: str) -> bytes:
    body = {
        "id": "chatcmpl-J1",
        "object": "chat.completion",
        "created": 1732000000,
        "model": "gpt-4o-mini",
        "choices": [
            {"index": 0, "message": {"role": "assistant", "content": content}, "finish_reason": "stop"},
        ],
        "usage": {"prompt_tokens": 30, "completion_tokens": 8, "total_tokens": 38},
    }
    return json.dumps(body).encode()


def _refusal(status: int, message: str, kind: str, code: str | None) -> Reply:
    body = {"error": {"message": message, "type": kind, "param": None, "code": code}}
    return Reply.json(json.dumps(body).encode(), status=status)


INVALID_KEY = "invalid_api_key"
MODEL_MISSING = "The model `gpt-9o` does not exist or you do not have access to it."
TOO_LONG = (
    "This model's maximum context length is 128000 tokens. However, your messages resulted in 130412 tokens. "
    "Please reduce the length of the messages."
)

#: Per scenario: the stand-in's replies, in order (the last one repeats).
PLANS: dict[str, tuple[Reply, ...]] = {
    "agent-tool-error": (Reply.sse(TOOLS), Reply.sse(TEXT)),
    "agent-tool-slow": (Reply.sse(TOOLS), Reply.sse(TEXT)),
    "agent-tool-running-hangup": (Reply.sse(TOOLS), Reply.sse(TEXT)),
    "agent-loop-limit": (Reply.sse(TOOLS),),
    "agent-truncated": (Reply.sse(_finished("length")),),
    "agent-filtered": (Reply.sse(_finished("content_filter")),),
    "agent-output-invalid": (Reply.json(_json_answer('{"city": "Paris"}')),),
    "agent-auth": (_refusal(401, "Incorrect API key provided: sk-test-1.", "invalid_request_error", INVALID_KEY),),
    "agent-config": (_refusal(404, MODEL_MISSING, "invalid_request_error", "model_not_found"),),
    "agent-context-overflow": (_refusal(400, TOO_LONG, "invalid_request_error", "context_length_exceeded"),),
}


class GraphRecursionError(RecursionError):
    """LangGraph's (langgraph/errors.py), by name and words: importing langgraph would
    slow every corpus server's start for one message."""


class _Provider:
    """The stand-in provider, started on first use, one base URL per scenario."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._server: LLMServer | None = None

    def client(self, scenario: str) -> openai.AsyncOpenAI:
        with self._lock:
            if self._server is None:
                self._server = LLMServer().start()
                for name, replies in PLANS.items():
                    self._server.plan(f"/{name}{CHAT}", *replies)
            url = self._server.url
        return openai.AsyncOpenAI(base_url=f"{url}/{scenario}/v1", api_key="sk-test-1", max_retries=0)


provider = _Provider()


async def ask(client: openai.AsyncOpenAI, messages: list[dict], **kwargs: Any) -> tuple[str, list[dict]]:
    """One streamed answer: its text and the tool calls it asked for."""
    text, calls = [], {}
    stream = await client.chat.completions.create(model="gpt-4o-mini", messages=messages, stream=True, **kwargs)
    async for chunk in stream:
        delta = chunk.choices[0].delta if chunk.choices else None
        if delta is None:
            continue
        text.append(delta.content or "")
        for call in delta.tool_calls or []:
            held = calls.setdefault(call.index, {"id": call.id, "name": call.function.name, "args": ""})
            held["args"] += call.function.arguments or ""
    return "".join(text), list(calls.values())


def with_results(messages: list[dict], calls: list[dict], result: str) -> list[dict]:
    """The conversation with the answer that asked and each call's result, as a framework sends it."""
    asked = [
        {"id": c["id"], "type": "function", "function": {"name": c["name"], "arguments": c["args"]}} for c in calls
    ]
    return [
        *messages,
        {"role": "assistant", "tool_calls": asked},
        *({"role": "tool", "tool_call_id": c["id"], "content": result} for c in calls),
    ]


def _sse(text: str) -> StreamingResponse:
    async def body() -> Any:
        for word in text.split() or ["(nothing)"]:
            yield f"data: {word}\n\n"

    return StreamingResponse(body(), media_type="text/event-stream")


def endpoints() -> dict[str, Any]:
    """``/chat/<name>`` -> the endpoint of each agent scenario."""

    async def tool_round(scenario: str, result: str, tool_s: float = 0.0) -> str:
        client = provider.client(scenario)
        async with cvdiag.agent_scope("weather", model_id="gpt-4o-mini"):
            _, calls = await ask(client, QUESTION)
            await asyncio.sleep(tool_s)  # the tool, running
            text, _ = await ask(client, with_results(QUESTION, calls, result))
        return text

    async def tool_error(request: Any) -> Any:
        return _sse(await tool_round("agent-tool-error", LANGGRAPH_ERROR))

    async def tool_slow(request: Any) -> Any:
        from corpus_server import SLOW_S

        return _sse(await tool_round("agent-tool-slow", '{"celsius": 18}', SLOW_S * 1.3))

    async def tool_running_hangup(request: Any) -> Any:
        async def body() -> Any:
            client = provider.client("agent-tool-running-hangup")
            async with cvdiag.agent_scope("weather", model_id="gpt-4o-mini"):
                _, calls = await ask(client, QUESTION)
                yield "data: looking it up\n\n"
                await asyncio.sleep(30)  # the tool runs; the client hangs up meanwhile
                await ask(client, with_results(QUESTION, calls, '{"celsius": 18}'))
            yield "data: never\n\n"

        return StreamingResponse(body(), media_type="text/event-stream")

    async def loop_limit(request: Any) -> Any:
        client = provider.client("agent-loop-limit")
        async with cvdiag.agent_scope("weather", model_id="gpt-4o-mini"):
            messages = QUESTION
            for _ in range(3):
                _, calls = await ask(client, messages)
                messages = with_results(messages, calls, '{"celsius": 18}')
            _, calls = await ask(client, messages)  # asked again: the limit stops the run here
            raise GraphRecursionError(
                "Recursion limit of 4 reached without hitting a stop condition. You can increase the limit by "
                "setting the `recursion_limit` config key."
            )

    async def plain(scenario: str) -> Any:
        text, _ = await ask(provider.client(scenario), QUESTION)
        return _sse(text)

    async def truncated(request: Any) -> Any:
        async with cvdiag.agent_scope("writer", model_id="gpt-4o-mini"):
            return await plain("agent-truncated")

    async def filtered(request: Any) -> Any:
        async with cvdiag.agent_scope("writer", model_id="gpt-4o-mini"):
            return await plain("agent-filtered")

    async def refused(scenario: str) -> Any:
        async with cvdiag.agent_scope("writer", model_id="gpt-4o-mini"):
            return await plain(scenario)  # the SDK raises the provider's refusal: a 500

    async def output_invalid(request: Any) -> Any:
        client = provider.client("agent-output-invalid")
        async with cvdiag.agent_scope("extractor", model_id="gpt-4o-mini"):
            answer = await client.chat.completions.create(
                model="gpt-4o-mini", messages=QUESTION, response_format=WEATHER_SCHEMA
            )
        found = json.loads(answer.choices[0].message.content or "{}")
        return JSONResponse({"weather": found, "complete": "celsius" in found})

    def refusing(scenario: str) -> Any:
        async def endpoint(request: Any) -> Any:
            return await refused(scenario)

        return endpoint

    return {
        "agent-tool-error": tool_error,
        "agent-tool-slow": tool_slow,
        "agent-tool-running-hangup": tool_running_hangup,
        "agent-loop-limit": loop_limit,
        "agent-truncated": truncated,
        "agent-filtered": filtered,
        "agent-output-invalid": output_invalid,
        **{name: refusing(name) for name in ("agent-auth", "agent-config", "agent-context-overflow")},
    }
