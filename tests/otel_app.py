"""A process with the real OpenTelemetry SDK, set up as an app would, for the tests of spans
in the process (tests/test_otel_spans.py): run as a script, it prints what the app's own
exporter got and what cvdiag wrote, as one JSON object.

``python otel_app.py ORDER CVDIAG [SAMPLER]``: ORDER is where the app sets its provider
(``before`` or ``after`` ``cvdiag.instrument()``, ``never``, or ``late``: after the first
spans; ``mcp``: none, and an MCP stdio session whose SDK traces its own calls; ``acme``:
none, and a framework no table names emitting OpenInference spans); CVDIAG
is ``on``, ``off`` (``instrument(otel=False)``) or ``absent`` (no
``instrument()`` at all); SAMPLER is ``on`` (the default) or ``off`` (``ALWAYS_OFF``).
"""

from __future__ import annotations

import json
import logging
import sys

import cvdiag
import cvdiag.testing
from cvdiag.write.context import request_context

ORDER, CVDIAG = sys.argv[1], sys.argv[2]
SAMPLER = sys.argv[3] if len(sys.argv) > 3 else "on"
warnings: list[str] = []
logging.getLogger("opentelemetry").addHandler(
    type("H", (logging.Handler,), {"emit": lambda s, r: warnings.append(r.getMessage())})()
)


def app_setup():
    from opentelemetry import trace
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
    from opentelemetry.sdk.trace.sampling import ALWAYS_OFF, ALWAYS_ON

    exporter = InMemorySpanExporter()
    provider = TracerProvider(sampler=ALWAYS_ON if SAMPLER == "on" else ALWAYS_OFF)
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    trace.set_tracer_provider(provider)
    return exporter


def a_tool_that_raises(tracer, trace) -> None:
    attributes = {
        "gen_ai.operation.name": "execute_tool",
        "gen_ai.tool.name": "lookup",
        "gen_ai.tool.call.id": "call_1",
    }
    with tracer.start_as_current_span("execute_tool lookup", attributes=attributes) as span:
        try:
            raise KeyError("no such order: 42")
        except KeyError as exc:
            span.record_exception(exc)
            span.set_status(trace.Status(trace.StatusCode.ERROR, str(exc)))
            span.set_attribute("error.type", "KeyError")


def mcp_session() -> None:
    """Two calls to the real stdio server of ``tests/mcp_server.py``, inside one request."""
    import asyncio
    import os
    from pathlib import Path

    from mcp import ClientSession
    from mcp.client.stdio import StdioServerParameters, stdio_client

    params = StdioServerParameters(command=sys.executable, args=[str(Path(__file__).parent / "mcp_server.py")])

    async def run() -> None:
        with open(os.devnull, "w") as quiet:
            async with stdio_client(params, errlog=quiet) as (read, write, *_), ClientSession(read, write) as session:
                await session.initialize()
                for name in ("forecast", "explode"):
                    await session.call_tool(name, {"city": "Paris"})

    cvdiag.instrument()
    with cvdiag.testing.capture() as envelopes:
        with request_context(test_id="t-otel-mcp"):
            asyncio.run(run())
        cvdiag.flush()
    tools = [e for e in envelopes if e["boundary"] == "backend.tool.call.response"]
    print(json.dumps([{"outcome": e["outcome"], **e["metadata"]} for e in tools]))


def invented_framework() -> None:
    """A framework no table names ("acme-agents"), emitting OpenInference spans of its own:
    a tool that raised, the agent run around it, and an LLM call no HTTP capture saw."""
    cvdiag.instrument()
    from opentelemetry import trace

    tracer = trace.get_tracer("acme.agents", "0.1")
    with cvdiag.testing.capture() as envelopes:
        with (
            request_context(test_id="t-acme"),
            tracer.start_as_current_span(
                "AcmeAgent.run", attributes={"openinference.span.kind": "AGENT", "agent.name": "acme-support"}
            ),
            tracer.start_as_current_span(
                "AcmeTool.invoke",
                attributes={"openinference.span.kind": "TOOL", "tool.name": "refund", "tool.id": "t_9"},
            ) as span,
        ):
            try:
                raise PermissionError("refunds over 500 EUR need approval")
            except PermissionError as exc:
                span.record_exception(exc)
                span.set_status(trace.Status(trace.StatusCode.ERROR, str(exc)))
        with (
            request_context(test_id="t-acme"),
            tracer.start_as_current_span(
                "AcmeModel.complete",  # a call through its own client: no HTTP capture saw it
                attributes={"openinference.span.kind": "LLM", "llm.model_name": "acme-1"},
            ),
        ):
            pass
        cvdiag.flush()
    print(json.dumps([{"boundary": e["boundary"], "outcome": e["outcome"], **e["metadata"]} for e in envelopes]))


def main() -> None:
    if ORDER == "mcp":
        mcp_session()
        return
    if ORDER == "acme":
        invented_framework()
        return
    exporter = app_setup() if ORDER == "before" else None
    states = cvdiag.instrument(otel=CVDIAG == "on") if CVDIAG != "absent" else {}
    from opentelemetry import trace

    tracer = trace.get_tracer("the.app")
    if ORDER == "after":
        exporter = app_setup()
    recording = {}
    with cvdiag.testing.capture() as envelopes:
        with request_context(test_id="t-otel-1"), tracer.start_as_current_span("handler") as outer:
            recording["inside"] = outer.is_recording()
            a_tool_that_raises(tracer, trace)
        with tracer.start_as_current_span("outside") as span:
            recording["outside"] = span.is_recording()
        if ORDER == "late":
            exporter = app_setup()
            with request_context(test_id="t-otel-2"):
                a_tool_that_raises(tracer, trace)
        cvdiag.flush()
    exported = exporter.get_finished_spans() if exporter is not None else ()
    print(
        json.dumps(
            {
                "otel": states.get("otel"),
                "provider": type(trace.get_tracer_provider()).__name__,
                "recording": recording,
                "envelopes": [
                    {"boundary": e["boundary"], "test_id": e["test_id"], "outcome": e["outcome"], **e["metadata"]}
                    for e in envelopes
                    if not e["boundary"].startswith("cvdiag.")
                ],
                "exported": [
                    {
                        "name": s.name,
                        "parent": s.parent is not None,
                        "attributes": dict(s.attributes),
                        "status": s.status.status_code.name,
                    }
                    for s in exported
                ],
                "warnings": warnings,
            }
        )
    )


if __name__ == "__main__":
    main()
