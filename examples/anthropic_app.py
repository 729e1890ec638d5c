"""The ``anthropic`` SDK behind cvdiag, with no LLM code of cvdiag's in the app.

A small tool-using loop over the Messages API, its text streamed as server-sent events
(see ``agent_sse``).

    CVDIAG_ENABLED=1 CVDIAG_TIER=verbose ANTHROPIC_BASE_URL=http://127.0.0.1:4010 ANTHROPIC_API_KEY=mock \\
        uvicorn examples.anthropic_app:app --port 8000

Settings: the SDK's own environment variables, ``agent_sse``'s and ``tools``' (``EXAMPLE_*``)
and ``EXAMPLE_ANTHROPIC_MODEL`` (``claude-haiku-4-5``).
"""

from __future__ import annotations

import asyncio
import json
import os
from collections.abc import AsyncIterator

import anthropic

import cvdiag
from examples.agent_sse import HEARTBEAT_S, MAX_RETRIES, agent_app
from examples.tools import TOOL_ERRORS_TO_MODEL, TOOLS

cvdiag.instrument_httpx(heartbeat_s=HEARTBEAT_S)  # the one line: every LLM call below is now on the record

MODEL = os.environ.get("EXAMPLE_ANTHROPIC_MODEL", "claude-haiku-4-5")
MAX_TURNS = 4
client = anthropic.AsyncAnthropic(max_retries=MAX_RETRIES)
FUNCTIONS = {function.__name__: function for function in TOOLS}
TOOL_SPECS = [
    {
        "name": name,
        "description": function.__doc__,
        "input_schema": {"type": "object", "properties": {arg: {"type": "string"}}, "required": [arg]},
    }
    for name, function in FUNCTIONS.items()
    for arg in function.__code__.co_varnames[: function.__code__.co_argcount]
]


async def run_tool(block: anthropic.types.ToolUseBlock) -> dict:
    """The ``tool_result`` block for one ``tool_use``: with ``EXAMPLE_TOOL_ERRORS=model`` a
    tool that raises is reported to the model (``is_error``, as Anthropic's docs show)."""
    try:
        content = json.dumps(await asyncio.to_thread(FUNCTIONS[block.name], **block.input))
    except Exception as exc:
        if not TOOL_ERRORS_TO_MODEL:
            raise
        return {
            "type": "tool_result",
            "tool_use_id": block.id,
            "content": f"{type(exc).__name__}: {exc}",
            "is_error": True,
        }
    return {"type": "tool_result", "tool_use_id": block.id, "content": content}


async def answer(message: str) -> AsyncIterator[str]:
    messages: list[dict] = [{"role": "user", "content": message}]
    for _ in range(MAX_TURNS):
        async with client.messages.stream(model=MODEL, max_tokens=1024, messages=messages, tools=TOOL_SPECS) as stream:
            async for text in stream.text_stream:
                yield text
            reply = await stream.get_final_message()
        if reply.stop_reason != "tool_use":
            return
        messages.append({"role": "assistant", "content": reply.content})
        results = [await run_tool(block) for block in reply.content if block.type == "tool_use"]
        messages.append({"role": "user", "content": results})


app = agent_app("anthropic", "anthropic-agent", MODEL, answer)
