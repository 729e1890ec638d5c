"""What a finished span is evidence of, written once per call: the part of reading spans in
process that needs no OpenTelemetry (``_otel_spans`` has the SDK's side), shared with the
OpenAI Agents SDK's own traces (``AgentsTap``, one of its tracing processors, registered
with ``agents.add_trace_processor``).

A tool call the wire or the MCP capture saw is written once: a span whose call the MCP
capture wrote is skipped; one whose call the model asked for on the wire answers it (the
wire then writes no response of its own). An LLM span is written only when the wire saw
no LLM call inside it (``source: otel``).
"""

from __future__ import annotations

import time
from typing import Any

from cvdiag.contract.otel import FailureEchoes, SpanView, read_span
from cvdiag.write import _calls_seen, _mcp_capture, config
from cvdiag.write.context import context_now, new_context
from cvdiag.write.emitter import emit_as, note_internal_error

__all__ = ["AgentsTap", "emit_evidence", "register_agents_tap", "switch"]

_TOOL = "backend.tool.call.response"
_LLM = "backend.llm.call.response"


class _Switch:
    """Whether the tap is on (``uninstrument()`` turns it off: a processor cannot be taken
    back out of an SDK provider, so it stays and passes through)."""

    __slots__ = ("on",)

    def __init__(self) -> None:
        self.on = False


switch = _Switch()
_echoes = FailureEchoes()


def emit_evidence(view: Any, test_id: str, *, convention: str | None = None) -> None:
    """Read one finished span and write the envelope it gives, once per call (see module)."""
    evidence = read_span(view)
    if evidence is None or _echoes.is_echo(view, evidence):
        return
    metadata = dict(evidence.metadata)
    metadata["source"] = "otel"
    metadata["otel_convention"] = convention or evidence.convention
    boundary = evidence.boundary
    if boundary == _TOOL and not _tool_is_new(metadata, view, test_id):
        return
    if boundary == _LLM and _calls_seen.seen_within(test_id, "llm", None, view.start_ns, view.end_ns):
        return
    ctx = context_now()
    if ctx is None or ctx.test_id != test_id:
        ctx = new_context(test_id=test_id)
    emit_as(ctx, boundary, metadata, outcome=evidence.outcome, duration_ms=evidence.duration_ms)


def _tool_is_new(metadata: dict[str, Any], view: Any, test_id: str) -> bool:
    """False when the MCP capture wrote this call; when the wire saw the model ask for it,
    the span takes the wire's call id and answers it."""
    name = metadata.get("tool_name")
    if _calls_seen.seen_within(test_id, "tool", name, view.start_ns, view.end_ns):
        return False  # a framework's span around an MCP call the capture wrote
    if metadata.get("kind") == "mcp" and _mcp_capture.watching(test_id, name):
        return False  # the mcp SDK's own span, inside the session call the capture writes
    from cvdiag.write._tool_wire import asked_calls

    wire_id = asked_calls.claim(test_id, metadata.get("call_id"), name)
    if wire_id is not None:
        metadata["call_id"] = wire_id
    return True


# -- the OpenAI Agents SDK's own traces ------------------------------------------------------


class AgentsTap:
    """A tracing processor of the OpenAI Agents SDK (``agents.add_trace_processor``): its
    function (tool) and agent spans, inside a cvdiag request, become evidence."""

    def on_trace_start(self, trace: Any) -> None:
        pass

    def on_trace_end(self, trace: Any) -> None:
        pass

    def on_span_start(self, span: Any) -> None:
        pass

    def on_span_end(self, span: Any) -> None:
        if not switch.on or not config.current.settings.enabled:
            return
        ctx = context_now()
        if ctx is None:
            return
        try:
            view = _agents_view(span)
            if view is not None:
                emit_evidence(view, ctx.test_id, convention="openai-agents")
        except Exception:
            note_internal_error()

    def shutdown(self) -> None:
        pass

    def force_flush(self) -> None:
        pass


def _epoch_ns(iso: Any, fallback: int) -> int:
    from datetime import datetime

    try:
        return int(datetime.fromisoformat(str(iso)).timestamp() * 1_000_000_000)
    except (TypeError, ValueError):
        return fallback


def _agents_view(span: Any) -> Any:
    """An agents SDK span in the GenAI shape (``execute_tool``, ``invoke_agent``): its
    error's message (``Error running tool (non-fatal)`` when handed back to the model, its
    turn limit as the exception it raises), for the contract's ``read_span``."""
    data = span.span_data
    kind = getattr(data, "type", None)
    error = span.error or {}
    message = error.get("message") if isinstance(error, dict) else None
    detail = error.get("data") if isinstance(error, dict) else None
    detail = detail if isinstance(detail, dict) else {}
    attributes: dict[str, Any] = {}
    if kind == "function":
        attributes["gen_ai.operation.name"] = "execute_tool"
        attributes["gen_ai.tool.name"] = str(data.name)
        attributes["gen_ai.tool.type"] = "extension" if data.mcp_data else "function"
        if message and isinstance(detail.get("error"), str) and detail["error"]:
            message = f"{message}: {detail['error']}"
    elif kind == "agent":
        attributes["gen_ai.operation.name"] = "invoke_agent"
        attributes["gen_ai.agent.name"] = str(data.name)
        if message == "Max turns exceeded" and "max_turns" in detail:
            # what the SDK raises (MaxTurnsExceeded), which the contract's limits read
            attributes["error.type"] = "MaxTurnsExceeded"
            message = f"Max turns ({detail['max_turns']}) exceeded"
    else:
        return None
    now = time.time_ns()
    end = _epoch_ns(span.ended_at, now)
    view = SpanView(
        name=f"{attributes['gen_ai.operation.name']} {data.name}",
        trace_id=str(span.trace_id).removeprefix("trace_")[:32].rjust(32, "0"),
        span_id=str(span.span_id).removeprefix("span_")[:16].rjust(16, "0"),
        parent_span_id=None,
        start_ns=_epoch_ns(span.started_at, end),
        end_ns=end,
        status_error=bool(message),
        status_message=message,
        attributes=attributes,
        scope="openai-agents",
    )
    return view


class _Registered:
    __slots__ = ("agents",)

    def __init__(self) -> None:
        self.agents = False


_registered = _Registered()


def register_agents_tap() -> None:
    """Add ``AgentsTap`` to the OpenAI Agents SDK's processors, once (beside its own
    exporter and the app's processors, which stay)."""
    import agents

    if not _registered.agents:
        agents.add_trace_processor(AgentsTap())
        _registered.agents = True
