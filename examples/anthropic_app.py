"""The ``anthropic`` SDK behind cvdiag, with no LLM code of cvdiag's in the app.

A small tool-using loop over the Messages API, its text streamed as server-sent events
(see ``agent_sse``).

    CVDIAG_ENABLED=1 CVDIAG_TIER=verbose ANTHROPIC_BASE_URL=http://127.0.0.1:4010 ANTHROPIC_API_KEY=mock \\
        uvicorn examples.anthropic_app:app --port 8000

Settings: the SDK's own environment variables, ``agent_sse``'s (``EXAMPLE_*``) and
``EXAMPLE_ANTHROPIC_MODEL`` (``claude-haiku-4-5``).
"""

from __future__ import annotations

import json
import os
from collections.abc import AsyncIterator

import anthropic

import cvdiag
from examples.agent_sse import HEARTBEAT_S, MAX_RETRIES, agent_app
from examples.tools import lookup_order

cvdiag.instrument_httpx(heartbeat_s=HEARTBEAT_S)  # the one line: every LLM call below is now on the record

MODEL = os.environ.get("EXAMPLE_ANTHROPIC_MODEL", "claude-haiku-4-5")
MAX_TURNS = 4
client = anthropic.AsyncAnthropic(max_retries=MAX_RETRIES)
TOOLS = {"lookup_order": lookup_order}
TOOL_SPECS = [
    {
        "name": "lookup_order",
        "description": lookup_order.__doc__,
        "input_schema": {"type": "object", "properties": {"order_id": {"type": "string"}}, "required": ["order_id"]},
    }
]


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
        results = [
            {"type": "tool_result", "tool_use_id": block.id, "content": json.dumps(TOOLS[block.name](**block.input))}
            for block in reply.content
            if block.type == "tool_use"
        ]
        messages.append({"role": "user", "content": results})


app = agent_app("anthropic", "anthropic-agent", MODEL, answer)
