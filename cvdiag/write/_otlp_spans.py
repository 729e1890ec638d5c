"""cvdiag's envelopes as spans (``CVDIAG_OTLP_SPANS=1``): one per request, agent run,
LLM attempt and tool call, with GenAI semantic-convention names and attributes.

Built on the drain thread from the lines as they are written, never on the request path.
cvdiag picks its spans' ids, so a child is sent as soon as its line is written: the
first line of a test's request mints the request span's id, an agent's enter pushes
the agent's, an LLM attempt or tool call goes under the innermost open agent (else the
request), and the request's terminal line sends the request span, started
``duration_ms`` before it. The trace is the one the request came in with (the span
current at the middleware, or its ``traceparent``), else the test's own trace
(``trace_id_of_test``), which is the trace the pytest plugin gives each test.

Concurrent requests of one test share one request span (the lines do not say which
request a line belongs to). A request whose terminal never comes (a stalled call; the
process killed) never sends its request span: its children point at a parent the trace
store never gets, as OpenTelemetry's own unfinished spans do.

Another GenAI instrumentation (OpenLLMetry, OpenInference, the OpenTelemetry
contrib instrumentations) already makes a span per LLM call. When one is active in the
process, cvdiag's attempt spans leave out ``gen_ai.operation.name`` and the other
``gen_ai.*`` keys (kept as ``cvdiag.gen_ai.*``) and are named ``cvdiag llm attempt``,
so a GenAI view, which keys on ``gen_ai.operation.name``, shows the call once; the
HTTP keys (status, resend count, ``error.type``) stay. ``CVDIAG_OTLP_SPANS_GENAI``
(``auto``, ``1``, ``0``) overrides the detection.
"""

from __future__ import annotations

import os
import sys
from collections import OrderedDict
from dataclasses import dataclass, field
from random import getrandbits
from typing import Any

from cvdiag.contract.timestamps import ts_seconds
from cvdiag.contract.trace_context import trace_id_of_test
from cvdiag.write import _otlp_link
from cvdiag.write._otlp_wire import KIND_CLIENT, KIND_INTERNAL, KIND_SERVER, Span

#: Tests with an open request remembered at most; the oldest is forgotten past it.
OPEN_KEPT = 4096
#: Agents open at once in one request (deeper nesting goes under the innermost kept).
AGENTS_KEPT = 32
_TERMINALS = frozenset({"backend.response.complete", "backend.sse.aborted", "backend.error.caught"})
#: The GenAI operation of each ``api`` cvdiag names (GenAI semantic conventions' gen_ai.operation.name).
_OPERATIONS = {
    "chat.completions": "chat",
    "responses": "chat",
    "messages": "chat",
    "completions": "text_completion",
    "embeddings": "embeddings",
    "generate_content": "generate_content",
}
#: Module prefixes of instrumentations that make GenAI spans of their own.
_GENAI_INSTRUMENTATIONS = (
    "opentelemetry.instrumentation.openai",
    "opentelemetry.instrumentation.anthropic",
    "opentelemetry.instrumentation.bedrock",
    "opentelemetry.instrumentation.google_generativeai",
    "opentelemetry.instrumentation.vertexai",
    "opentelemetry.instrumentation.langchain",
    "opentelemetry.instrumentation.litellm",
    "openinference.instrumentation",
)


def _span_id() -> bytes:
    return (getrandbits(64) or 1).to_bytes(8, "big")


def _end_ns(env: dict[str, Any]) -> int:
    try:
        return round(ts_seconds(env["ts"]) * 1000) * 1_000_000
    except (KeyError, TypeError, ValueError):
        return 0


def _ms(value: Any) -> int:
    return value if type(value) is int and value > 0 else 0


@dataclass(slots=True)
class _Open:
    """One test's open request: its trace, its span id, where it started, its agents."""

    trace_id: bytes
    span_id: bytes
    parent: bytes
    name: str = "HTTP"
    start_ns: int = 0
    agents: list[tuple[bytes, dict[str, Any]]] = field(default_factory=list)


def other_genai_instrumentation() -> bool:
    """Whether a GenAI instrumentation that makes its own LLM spans is active here."""
    forced = (os.environ.get("CVDIAG_OTLP_SPANS_GENAI") or "auto").strip().lower()
    if forced in ("1", "true", "on", "yes"):
        return False
    if forced in ("0", "false", "off", "no"):
        return True
    base = sys.modules.get("opentelemetry.instrumentation.instrumentor")
    if base is None:
        return False
    pending = list(base.BaseInstrumentor.__subclasses__())
    while pending:
        kind = pending.pop()
        pending.extend(kind.__subclasses__())
        if kind.__module__.startswith(_GENAI_INSTRUMENTATIONS):
            instance = kind._instance if "_instance" in vars(kind) else None
            if instance is not None and getattr(instance, "_is_instrumented_by_opentelemetry", False):
                return True
    return False


class Builder:
    """Turns written lines into finished spans (``add``), keeping each test's open request."""

    def __init__(self) -> None:
        self.open: OrderedDict[str, _Open] = OrderedDict()
        self.evicted = 0

    def _request(self, env: dict[str, Any]) -> _Open:
        test_id = str(env.get("test_id"))
        found = self.open.get(test_id)
        if found is None:
            link = _otlp_link.links.get(test_id)
            trace = bytes.fromhex(link[0] if link else trace_id_of_test(test_id))
            found = self.open[test_id] = _Open(trace, _span_id(), bytes.fromhex(link[1]) if link else b"")
            if len(self.open) > OPEN_KEPT:
                self.open.popitem(last=False)
                self.evicted += 1
        return found

    def add(self, envelopes: list[dict[str, Any]]) -> list[Span]:
        spans: list[Span] = []
        genai: bool | None = None
        for env in envelopes:
            boundary = env.get("boundary")
            if env.get("layer") != "backend" or not isinstance(boundary, str):
                continue
            md = env.get("metadata") if isinstance(env.get("metadata"), dict) else {}
            if boundary == "backend.request.ingress":
                req = self._request(env)
                req.name = f"{md.get('method') or 'HTTP'} {md.get('path') or ''}".strip()
                req.start_ns = _end_ns(env)
            elif boundary == "backend.agent.enter":
                req = self._request(env)
                if len(req.agents) < AGENTS_KEPT:
                    req.agents.append((_span_id(), md))
            elif boundary == "backend.agent.exit":
                req = self._request(env)
                if req.agents:
                    spans.append(self._agent(env, md, req))
            elif boundary == "backend.llm.call.response":
                if genai is None:
                    genai = not other_genai_instrumentation()
                spans.append(self._llm(env, md, self._request(env), genai))
            elif boundary == "backend.tool.call.response":
                spans.append(self._tool(env, md, self._request(env)))
            elif boundary in _TERMINALS:
                test_id = str(env.get("test_id"))
                req = self.open.pop(test_id, None)
                if req is None and boundary == "backend.error.caught":
                    continue  # the exception of a request whose terminal was written just before
                spans.append(self._terminal(env, md, req or self._request(env), boundary))
                self.open.pop(test_id, None)
        return spans

    def drain(self) -> list[Span]:
        """Nothing to send for requests still open (their spans are unfinished)."""
        return []

    @staticmethod
    def _common(env: dict[str, Any]) -> list[tuple[str, Any]]:
        return [("cvdiag.test_id", env.get("test_id")), ("cvdiag.slug", env.get("slug"))]

    @staticmethod
    def _parent(req: _Open) -> bytes:
        return req.agents[-1][0] if req.agents else req.span_id

    def _agent(self, env: dict[str, Any], md: dict[str, Any], req: _Open) -> Span:
        span_id, enter = req.agents.pop()
        end = _end_ns(env)
        name = enter.get("agent_name") or "agent"
        attrs = [
            ("gen_ai.operation.name", "invoke_agent"),
            ("gen_ai.agent.name", name),
            *self._common(env),
        ]
        if enter.get("model_id"):
            attrs.append(("gen_ai.request.model", enter.get("model_id")))
        error = env.get("outcome") in ("err", "timeout")
        if error:
            attrs.append(("error.type", md.get("error_class") or md.get("terminal_outcome") or "error"))
        return Span(
            req.trace_id,
            span_id,
            self._parent(req),
            f"invoke_agent {name}",
            KIND_INTERNAL,
            end - _ms(md.get("total_duration_ms") or env.get("duration_ms")) * 1_000_000,
            end,
            attrs,
            error,
            str(md.get("error_message") or ""),
        )

    def _llm(self, env: dict[str, Any], md: dict[str, Any], req: _Open, genai: bool) -> Span:
        end = _end_ns(env)
        operation = _OPERATIONS.get(str(md.get("api")), "chat")
        model = md.get("model")
        g = "gen_ai." if genai else "cvdiag.gen_ai."
        attrs: list[tuple[str, Any]] = [*self._common(env)]
        if genai:
            attrs.append(("gen_ai.operation.name", operation))
        for key, value in (
            (f"{g}provider.name", md.get("provider")),
            (f"{g}request.model", model),
            (f"{g}usage.input_tokens", md.get("prompt_tokens")),
            (f"{g}usage.output_tokens", md.get("completion_tokens", md.get("response_token_count"))),
            ("http.response.status_code", md.get("http_status")),
            ("cvdiag.retry_after_ms", md.get("retry_after_ms")),
            ("cvdiag.ttft_ms", md.get("ttft_ms")),
            ("cvdiag.request_id", md.get("request_id")),
        ):
            if value is not None:
                attrs.append((key, value))
        if md.get("finish_reason"):
            attrs.append((f"{g}response.finish_reasons", [str(md["finish_reason"])]))
        attempt = md.get("attempt")
        if type(attempt) is int and attempt > 0:
            attrs.append(("http.request.resend_count", attempt))
        error = env.get("outcome") in ("err", "timeout")
        if error:
            status = md.get("http_status")
            attrs.append(("error.type", md.get("error_type") or md.get("error_class") or str(status or "error")))
        name = f"{operation} {model}" if genai and model else ("cvdiag llm attempt" if not genai else operation)
        return Span(
            req.trace_id,
            _span_id(),
            self._parent(req),
            name,
            KIND_CLIENT,
            end - _ms(md.get("latency_ms") or env.get("duration_ms")) * 1_000_000,
            end,
            attrs,
            error,
            str(md.get("error_type") or md.get("error_class") or ""),
        )

    def _tool(self, env: dict[str, Any], md: dict[str, Any], req: _Open) -> Span:
        end = _end_ns(env)
        name = md.get("tool_name") or "tool"
        attrs: list[tuple[str, Any]] = [
            ("gen_ai.operation.name", "execute_tool"),
            ("gen_ai.tool.name", name),
            *self._common(env),
        ]
        for key, value in (
            ("gen_ai.tool.call.id", md.get("call_id")),
            ("cvdiag.tool.source", md.get("source")),
            ("cvdiag.tool.server", md.get("server")),
        ):
            if value is not None:
                attrs.append((key, value))
        error = env.get("outcome") in ("err", "timeout")
        if error:
            attrs.append(("error.type", md.get("error_kind") or "error"))
        return Span(
            req.trace_id,
            _span_id(),
            self._parent(req),
            f"execute_tool {name}",
            KIND_INTERNAL,
            end - _ms(env.get("duration_ms")) * 1_000_000,
            end,
            attrs,
            error,
            str(md.get("error_excerpt") or ""),
        )

    def _terminal(self, env: dict[str, Any], md: dict[str, Any], req: _Open, boundary: str) -> Span:
        end = _end_ns(env)
        start = req.start_ns or end - _ms(env.get("duration_ms")) * 1_000_000
        attrs: list[tuple[str, Any]] = [*self._common(env), ("cvdiag.terminal", boundary)]
        if md.get("http_status") is not None:
            attrs.append(("http.response.status_code", md.get("http_status")))
        error = env.get("outcome") in ("err", "timeout")
        why = md.get("termination_kind") or md.get("exception_type") or (str(md.get("http_status")) if error else None)
        if error and why:
            attrs.append(("error.type", why))
        return Span(
            req.trace_id,
            req.span_id,
            req.parent,
            req.name,
            KIND_SERVER,
            min(start, end),
            end,
            attrs,
            error,
            str(md.get("message_scrubbed") or why or "") if error else "",
        )
