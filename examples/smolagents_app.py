"""smolagents behind cvdiag: the app's only cvdiag code is ``cvdiag.instrument()``; the
framework's spans come from OpenInference's smolagents instrumentor (its one documented
line), and cvdiag reads them as evidence (docs/opentelemetry.md, "Spans in the process").

A ``ToolCallingAgent`` on an OpenAI-compatible server (``OPENAI_BASE_URL``) with the tools
of ``examples/tools.py``: smolagents hands a tool's error back to the model, and stops at
``EXAMPLE_MAX_STEPS`` steps (5). The agent is synchronous: it runs in a worker thread,
which carries the request's context.

    CVDIAG_ENABLED=1 CVDIAG_TIER=verbose OPENAI_BASE_URL=http://127.0.0.1:4010/v1 OPENAI_API_KEY=mock \\
        uvicorn examples.smolagents_app:app --port 8000
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator

import anyio
from openinference.instrumentation.smolagents import SmolagentsInstrumentor
from smolagents import OpenAIServerModel, ToolCallingAgent, tool

import cvdiag
from examples import tools
from examples.agent_sse import MAX_RETRIES, MODEL, agent_app

cvdiag.instrument()  # the one line: LLM calls and the spans below are now on the record
SmolagentsInstrumentor().instrument()  # OpenInference's documented switch: smolagents' spans on

MAX_STEPS = int(os.environ.get("EXAMPLE_MAX_STEPS", "5"))


# smolagents reads a tool's arguments from its docstring's Args section.
@tool
def lookup_order(order_id: str) -> str:
    """Look up the status of an order by its id.

    Args:
        order_id: The order's id.
    """
    return tools.lookup_order(order_id)


@tool
def check_stock(sku: str) -> str:
    """Check how many items of a product are in stock.

    Args:
        sku: The product's stock keeping unit.
    """
    return tools.check_stock(sku)


@tool
def track_parcel(parcel_id: str) -> str:
    """Track a parcel by its id.

    Args:
        parcel_id: The parcel's id.
    """
    return tools.track_parcel(parcel_id)


model = OpenAIServerModel(
    MODEL,
    api_base=os.environ.get("OPENAI_BASE_URL"),
    api_key=os.environ.get("OPENAI_API_KEY"),
    client_kwargs={"max_retries": MAX_RETRIES},
)


def run(message: str) -> str:
    agent = ToolCallingAgent(tools=[lookup_order, check_stock, track_parcel], model=model, max_steps=MAX_STEPS)
    return str(agent.run(message))


async def answer(message: str) -> AsyncIterator[str]:
    yield await anyio.to_thread.run_sync(run, message)


app = agent_app("smolagents", "smolagents-agent", MODEL, answer)
