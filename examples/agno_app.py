"""Agno behind cvdiag: the app's only cvdiag code is ``cvdiag.instrument()``; the
framework's spans come from OpenInference's Agno instrumentor (its one documented line),
and cvdiag reads them as evidence (docs/opentelemetry.md, "Spans in the process").

An ``Agent`` on an OpenAI-compatible server (``OPENAI_BASE_URL``) with the tools of
``examples/tools.py``: Agno hands a tool's error back to the model and stops calling
tools after ``EXAMPLE_TOOL_CALL_LIMIT`` calls (5). ``/chat/report`` asks for an
``OrderReport`` (``output_schema``).

    CVDIAG_ENABLED=1 CVDIAG_TIER=verbose OPENAI_BASE_URL=http://127.0.0.1:4010/v1 OPENAI_API_KEY=mock \\
        uvicorn examples.agno_app:app --port 8000
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator

from agno.agent import Agent
from agno.models.openai import OpenAIChat
from openinference.instrumentation.agno import AgnoInstrumentor
from pydantic import BaseModel

import cvdiag
from examples.agent_sse import MAX_RETRIES, MODEL, agent_app
from examples.tools import TOOLS

cvdiag.instrument()  # the one line: LLM calls and the spans below are now on the record
AgnoInstrumentor().instrument()  # OpenInference's documented switch: Agno's spans on

TOOL_CALL_LIMIT = int(os.environ.get("EXAMPLE_TOOL_CALL_LIMIT", "5"))


class OrderReport(BaseModel):
    order_id: str
    status: str


def model() -> OpenAIChat:
    return OpenAIChat(id=MODEL, base_url=os.environ.get("OPENAI_BASE_URL"), max_retries=MAX_RETRIES)


agent = Agent(name="support", model=model(), tools=TOOLS, tool_call_limit=TOOL_CALL_LIMIT)
report_agent = Agent(name="reporter", model=model(), output_schema=OrderReport)


async def answer(message: str) -> AsyncIterator[str]:
    result = await agent.arun(message)
    yield str(result.content)


async def report(message: str) -> AsyncIterator[str]:
    result = await report_agent.arun(message)
    content = result.content
    yield content.model_dump_json() if isinstance(content, BaseModel) else str(content)


app = agent_app("agno", "agno-agent", MODEL, answer, more={"report": report})
