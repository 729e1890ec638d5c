"""LangGraph + langchain-openai behind cvdiag, with no LLM code of cvdiag's in the app.

A two-node graph (the model, and a tool node), its answer streamed token by token as
server-sent events (see ``agent_sse``). Every call the model node makes is recorded
at the HTTP client by ``cvdiag.instrument_httpx()``.

    CVDIAG_ENABLED=1 CVDIAG_TIER=verbose OPENAI_BASE_URL=http://127.0.0.1:4010/v1 OPENAI_API_KEY=mock \\
        uvicorn examples.langgraph_app:app --port 8000

Settings: the SDK's own environment variables, ``agent_sse``'s and ``tools``' (``EXAMPLE_*``) and
``EXAMPLE_RECURSION_LIMIT`` (25 steps).
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator

from langchain_core.messages import AIMessageChunk, HumanMessage
from langchain_core.tools import tool
from langchain_openai import ChatOpenAI
from langgraph.graph import START, MessagesState, StateGraph
from langgraph.prebuilt import ToolNode, tools_condition
from pydantic import BaseModel

import cvdiag
from examples.agent_sse import HEARTBEAT_S, MAX_RETRIES, MODEL, SPANS, agent_app
from examples.tools import TOOL_ERRORS_TO_MODEL, TOOLS

cvdiag.instrument_httpx(heartbeat_s=HEARTBEAT_S)  # the one line: every LLM call below is now on the record
if SPANS:
    from openinference.instrumentation.langchain import LangChainInstrumentor

    cvdiag.instrument()  # the spans below become evidence
    LangChainInstrumentor().instrument()  # OpenInference's documented switch: LangChain's spans on

#: The graph's step limit (model and tool steps together): LangGraph's own default is
#: 10,000 steps, so a model that asks for the same tool forever would go on for hours.
RECURSION_LIMIT = int(os.environ.get("EXAMPLE_RECURSION_LIMIT", "25"))
tools = [tool(function) for function in TOOLS]
llm = ChatOpenAI(
    model=MODEL,
    base_url=os.environ.get("OPENAI_BASE_URL"),
    max_retries=MAX_RETRIES,
    stream_usage=True,
).bind_tools(tools)


async def call_model(state: MessagesState) -> dict:
    return {"messages": [await llm.ainvoke(state["messages"])]}


builder = StateGraph(MessagesState)
builder.add_node("model", call_model)
# By default a tool that raises fails the run; handle_tool_errors=True hands its error to
# the model ("Error: ... Please fix your mistakes.") and the graph goes on.
builder.add_node("tools", ToolNode(tools, handle_tool_errors=True) if TOOL_ERRORS_TO_MODEL else ToolNode(tools))
builder.add_edge(START, "model")
builder.add_conditional_edges("model", tools_condition)
builder.add_edge("tools", "model")
graph = builder.compile()


async def answer(message: str) -> AsyncIterator[str]:
    inputs = {"messages": [HumanMessage(message)]}
    config = {"recursion_limit": RECURSION_LIMIT}
    async for chunk, meta in graph.astream(inputs, config, stream_mode="messages"):
        from_model = isinstance(chunk, AIMessageChunk) and meta.get("langgraph_node") == "model"
        if from_model and isinstance(chunk.content, str):
            yield chunk.content


class OrderReport(BaseModel):
    order_id: str
    status: str


reporter = ChatOpenAI(model=MODEL, base_url=os.environ.get("OPENAI_BASE_URL"), max_retries=MAX_RETRIES)
reporter = reporter.with_structured_output(OrderReport, method="json_mode")


async def report(message: str) -> AsyncIterator[str]:
    """``/chat/report``: an ``OrderReport`` from the model's JSON (validated by pydantic)."""
    result = await reporter.ainvoke([HumanMessage(message)])
    yield result.model_dump_json()


app = agent_app("langgraph", "langgraph-agent", MODEL, answer, more={"report": report})
