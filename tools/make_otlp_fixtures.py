"""Write the OTLP fixtures of tests/data/otlp/ with the real instrumentations.

    .venv/bin/python tools/make_otlp_fixtures.py [OUT_DIR]

Each framework runs its failures (a tool that raises, the framework's own limit, an
output that fails its schema, a slow tool) against a local stand-in of the OpenAI API
(an ``httpx.MockTransport`` answering chat completions from a script), with the real
OpenTelemetry SDK and the real instrumentation: pydantic-ai's own, OpenInference's for
LangGraph/LangChain and the OpenAI Agents SDK, OpenLLMetry's for the openai client, and
the ``mcp`` SDK's. The spans are written as the Collector's file exporter writes them (one
OTLP/JSON ``ExportTraceServiceRequest`` per line), as one pretty document, and as the
SDK's ``ConsoleSpanExporter`` prints them. Every span of a scenario carries ``test.id``
(set at its start, as an app that tags its spans does), except in the OpenLLMetry file,
whose tests are named by their trace ids. The versions that made them go to README.md.
"""

from __future__ import annotations

import asyncio
import contextvars
import gzip
import importlib.metadata
import json
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Any

import httpx
import orjson
from opentelemetry import trace
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from otelkit import otlp_document

OUT = Path(sys.argv[1]) if len(sys.argv) > 1 else Path(__file__).resolve().parents[1] / "tests" / "data" / "otlp"
VERSIONS = (
    "opentelemetry-sdk",
    "pydantic-ai-slim",
    "langgraph",
    "langchain-core",
    "langchain-openai",
    "openai",
    "openai-agents",
    "openinference-instrumentation-langchain",
    "openinference-instrumentation-openai-agents",
    "opentelemetry-instrumentation-openai",
    "mcp",
)

_test_id: contextvars.ContextVar[str | None] = contextvars.ContextVar("test_id", default=None)


def lookup_order(order_id: str) -> str:
    """Look up an order's status."""
    if (_test_id.get() or "").endswith("tool-error"):
        raise ConnectionError(f"order service refused {order_id}")
    return "shipped"


class TestIdProcessor(SpanProcessor):
    """Tags each span with the test it runs under, as an app's own processor would."""

    def on_start(self, span: Any, parent_context: Any = None) -> None:
        test_id = _test_id.get()
        if test_id is not None:
            span.set_attribute("test.id", test_id)


EXPORTER = InMemorySpanExporter()
PROVIDER = TracerProvider(resource=Resource.create({"service.name": "agent-backend"}))
PROVIDER.add_span_processor(TestIdProcessor())
PROVIDER.add_span_processor(SimpleSpanProcessor(EXPORTER))
trace.set_tracer_provider(PROVIDER)


@contextmanager
def scenario(test_id: str | None) -> Iterator[None]:
    token = _test_id.set(test_id)
    try:
        yield
    finally:
        _test_id.reset(token)


def take() -> list[Any]:
    spans = list(EXPORTER.get_finished_spans())
    EXPORTER.clear()
    return spans


# -- the stand-in of the OpenAI API ------------------------------------------------------------


def _completion(message: dict[str, Any], finish: str) -> dict[str, Any]:
    return {
        "id": "chatcmpl-standin",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": "gpt-4o-mini-2024-07-18",
        "choices": [{"index": 0, "message": {"role": "assistant", **message}, "finish_reason": finish}],
        "usage": {"prompt_tokens": 42, "completion_tokens": 7, "total_tokens": 49},
    }


def tool_call(name: str, arguments: dict[str, Any], call_id: str = "call_1") -> dict[str, Any]:
    call = {"id": call_id, "type": "function", "function": {"name": name, "arguments": json.dumps(arguments)}}
    return _completion({"content": None, "tool_calls": [call]}, "tool_calls")


def text(content: str) -> dict[str, Any]:
    return _completion({"content": content}, "stop")


def standin(answer: Callable[[dict[str, Any], int], tuple[int, dict[str, Any]]]) -> httpx.AsyncClient:
    """An AsyncClient whose every chat completion is ``answer(request_body, n)``."""
    count = 0

    def handle(request: httpx.Request) -> httpx.Response:
        nonlocal count
        count += 1
        status, body = answer(json.loads(request.content or b"{}"), count)
        return httpx.Response(status, json=body)

    return httpx.AsyncClient(transport=httpx.MockTransport(handle))


def calls_then_answers(name: str, arguments: dict[str, Any]) -> Callable[[dict[str, Any], int], Any]:
    """The model asks for the tool, then answers once it has seen any tool result."""

    def answer(body: dict[str, Any], n: int) -> tuple[int, dict[str, Any]]:
        if any(m.get("role") == "tool" for m in body.get("messages", [])):
            return 200, text("Here is what I found.")
        return 200, tool_call(name, arguments, f"call_{n}")

    return answer


def loops(name: str, arguments: dict[str, Any]) -> Callable[[dict[str, Any], int], Any]:
    """The model asks for the same tool call again and again."""
    return lambda body, n: (200, tool_call(name, arguments, f"call_{n}"))


# -- pydantic-ai (its own instrumentation, GenAI names) ------------------------------------------


def pydantic_ai_runs() -> list[Any]:
    from pydantic import BaseModel
    from pydantic_ai import Agent
    from pydantic_ai.capabilities.instrumentation import Instrumentation
    from pydantic_ai.messages import ModelResponse, TextPart, ToolCallPart
    from pydantic_ai.models.function import FunctionModel
    from pydantic_ai.models.instrumented import InstrumentationSettings
    from pydantic_ai.usage import UsageLimits

    capabilities = [Instrumentation(settings=InstrumentationSettings(tracer_provider=PROVIDER))]

    class Forecast(BaseModel):
        degrees: int

    def model(messages: list[Any], info: Any) -> ModelResponse:
        run = _test_id.get() or ""
        if run.endswith("output-invalid"):
            call = ToolCallPart(info.output_tools[0].name, {"degrees": "warm"}, tool_call_id=f"o{len(messages)}")
            return ModelResponse(parts=[call])
        if run.endswith("loop") or len(messages) == 1:
            return ModelResponse(parts=[ToolCallPart("lookup", {"city": "Oslo"}, tool_call_id=f"call_{len(messages)}")])
        return ModelResponse(parts=[TextPart("It is sunny.")])

    def agent(output_type: Any = str) -> Any:
        a = Agent(FunctionModel(model), output_type=output_type, capabilities=capabilities, name="weather")

        @a.tool_plain
        async def lookup(city: str) -> str:
            run = _test_id.get() or ""
            if run.endswith("tool-error"):
                raise ConnectionError(f"weather service refused the lookup of {city}")
            if run.endswith("tool-slow"):
                await asyncio.sleep(1.2)
            return "sunny"

        return a

    async def run(test_id: str, output_type: Any = str, limits: Any = None) -> None:
        with scenario(test_id), suppress(Exception):
            await agent(output_type).run("What is the weather in Oslo?", usage_limits=limits)

    async def main() -> None:
        await run("pydantic-ai-ok")
        await run("pydantic-ai-tool-error")
        await run("pydantic-ai-tool-slow")
        await run("pydantic-ai-output-invalid", Forecast)
        await run("pydantic-ai-loop", limits=UsageLimits(request_limit=3))

    asyncio.run(main())
    return take()


# -- LangGraph through OpenInference -------------------------------------------------------------


def langgraph_runs() -> list[Any]:
    from langchain_core.tools import tool
    from langchain_openai import ChatOpenAI
    from langgraph.prebuilt import ToolNode, create_react_agent
    from openinference.instrumentation.langchain import LangChainInstrumentor
    from pydantic import BaseModel

    instrumentor = LangChainInstrumentor()
    instrumentor.instrument(tracer_provider=PROVIDER)

    order_tool = tool(lookup_order)

    class Verdict(BaseModel):
        shipped: bool

    def llm(answer: Any) -> Any:
        return ChatOpenAI(model="gpt-4o-mini", api_key="sk-standin", http_async_client=standin(answer), max_retries=0)

    async def main() -> None:
        with scenario("langgraph-tool-error"):
            # The tool's error handed back to the model as a ToolMessage, as LangGraph apps often do.
            tools = ToolNode([order_tool], handle_tool_errors=True)
            graph = create_react_agent(llm(calls_then_answers("lookup_order", {"order_id": "A1"})), tools)
            await graph.ainvoke({"messages": [("user", "Where is order A1?")]})
        with scenario("langgraph-loop"):
            graph = create_react_agent(llm(loops("lookup_order", {"order_id": "A1"})), [order_tool])
            with suppress(Exception):
                await graph.ainvoke({"messages": [("user", "Where is order A1?")]}, {"recursion_limit": 4})
        with scenario("langgraph-output-invalid"):
            structured = llm(lambda body, n: (200, text('{"shipped": "maybe"}'))).with_structured_output(
                Verdict, method="json_mode"
            )
            with suppress(Exception):
                await structured.ainvoke("Was order A1 shipped?")

    asyncio.run(main())
    instrumentor.uninstrument()
    return take()


# -- the OpenAI Agents SDK through OpenInference ---------------------------------------------------


def openai_agents_runs() -> list[Any]:
    import agents
    from agents import Agent, OpenAIChatCompletionsModel, Runner, function_tool
    from openai import AsyncOpenAI
    from openinference.instrumentation.openai_agents import OpenAIAgentsInstrumentor

    agents.set_trace_processors([])  # no upload to OpenAI: only OpenInference's processor
    instrumentor = OpenAIAgentsInstrumentor()
    instrumentor.instrument(tracer_provider=PROVIDER)

    order_tool = function_tool(lookup_order)

    def agent(answer: Any) -> Any:
        client = AsyncOpenAI(api_key="sk-standin", http_client=standin(answer), max_retries=0)
        model = OpenAIChatCompletionsModel(model="gpt-4o-mini", openai_client=client)
        return Agent(name="orders", instructions="Answer about orders.", model=model, tools=[order_tool])

    async def main() -> None:
        with scenario("openai-agents-tool-error"):
            await Runner.run(agent(calls_then_answers("lookup_order", {"order_id": "A1"})), "Where is A1?")
        with scenario("openai-agents-loop"), suppress(Exception):
            await Runner.run(agent(loops("lookup_order", {"order_id": "A1"})), "Where is A1?", max_turns=2)

    asyncio.run(main())
    instrumentor.uninstrument()
    return take()


# -- the openai client through OpenLLMetry ----------------------------------------------------------


def openllmetry_runs() -> list[Any]:
    from openai import AsyncOpenAI
    from opentelemetry.instrumentation.openai import OpenAIInstrumentor

    instrumentor = OpenAIInstrumentor()
    instrumentor.instrument(tracer_provider=PROVIDER)

    async def ask(answer: Any, closed: bool = False) -> None:
        http = standin(answer)
        client = AsyncOpenAI(api_key="sk-standin", http_client=http, max_retries=0)
        if closed:
            await http.aclose()  # the app's own client, used after it was closed
        with suppress(Exception):
            await client.chat.completions.create(model="gpt-4o-mini", messages=[{"role": "user", "content": "Hi"}])

    error = {"error": {"message": "The server had an error", "type": "server_error", "code": None}}

    async def main() -> None:
        with scenario(None):
            tracer = PROVIDER.get_tracer("fixture")
            for name, answer, closed in (
                ("ok", lambda body, n: (200, text("Hello.")), False),
                ("provider-500", lambda body, n: (500, error), False),
                ("closed-client", lambda body, n: (200, text("Hello.")), True),
            ):
                with tracer.start_as_current_span(f"request {name}"):
                    await ask(answer, closed)

    asyncio.run(main())
    instrumentor.uninstrument()
    return take()


# -- the mcp SDK's own spans -----------------------------------------------------------------------


def mcp_runs() -> list[Any]:
    from mcp.client.client import Client
    from mcp.server.mcpserver import MCPServer
    from mcp.types import CallToolResult, TextContent

    server = MCPServer("orders")

    @server.tool()
    def lookup_order(order_id: str) -> str:
        """Look up the status of an order by its id."""
        raise ConnectionError(f"order service unavailable while looking up {order_id}")

    @server.tool()
    def refund_status(order_id: str):  # type: ignore[no-untyped-def]
        """Tell whether an order's refund went through."""
        return CallToolResult(content=[TextContent(type="text", text="refund system offline")], is_error=True)

    async def main() -> None:
        for test_id, name in (("mcp-tool-raised", "lookup_order"), ("mcp-tool-error-result", "refund_status")):
            with scenario(test_id):
                async with Client(server) as client:
                    await client.call_tool(name, {"order_id": "A1"})

    asyncio.run(main())
    return take()


# -- writing -------------------------------------------------------------------------------------


def jsonl(path: Path, batches: list[list[Any]], compress: bool = False) -> None:
    """One OTLP/JSON document per line, as the Collector's file exporter writes them."""
    data = b"".join(orjson.dumps(otlp_document(batch)) + b"\n" for batch in batches if batch)
    path.write_bytes(gzip.compress(data, mtime=0) if compress else data)


def batches(spans: list[Any], size: int = 8) -> list[list[Any]]:
    return [spans[i : i + size] for i in range(0, len(spans), size)]


def main() -> None:
    OUT.mkdir(parents=True, exist_ok=True)
    pydantic_ai = pydantic_ai_runs()
    jsonl(OUT / "pydantic_ai.jsonl", batches(pydantic_ai))
    # ConsoleSpanExporter's own output (span.to_json(), indent 4, a line between): two whole runs.
    console = [
        s for s in pydantic_ai if (s.attributes or {}).get("test.id") in ("pydantic-ai-ok", "pydantic-ai-tool-error")
    ]
    (OUT / "pydantic_ai_console.json").write_text("".join(span.to_json(indent=4) + "\n" for span in console))
    jsonl(OUT / "openinference_langgraph.jsonl", batches(langgraph_runs()))
    jsonl(OUT / "openinference_openai_agents.jsonl", batches(openai_agents_runs()))
    (OUT / "openllmetry_openai.json").write_bytes(
        orjson.dumps(otlp_document(openllmetry_runs()), option=orjson.OPT_INDENT_2) + b"\n"
    )
    jsonl(OUT / "mcp_sdk.jsonl.gz", batches(mcp_runs()), compress=True)
    versions = "\n".join(f"- {name} {importlib.metadata.version(name)}" for name in VERSIONS)
    readme = (OUT / "README.md").read_text() if (OUT / "README.md").exists() else ""
    head = readme.split("## Made with", 1)[0].rstrip()
    (OUT / "README.md").write_text(f"{head}\n\n## Made with\n\n{versions}\n")


if __name__ == "__main__":
    main()
