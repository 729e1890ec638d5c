"""Spans from the real OpenTelemetry SDK, for tests: a provider with an in-memory
exporter, and each finished span as the contract's ``SpanView``."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from types import MappingProxyType
from typing import Any

from cvdiag.contract.otel import SpanView, read_span

HEX32 = "0af7651916cd43dd8448eb211c80319c"


def view_of(span: Any) -> SpanView:
    """An SDK ``ReadableSpan`` as the contract's view (what an in-process reader builds)."""
    ctx = span.get_span_context()
    parent = span.parent
    status = span.status
    return SpanView(
        name=span.name,
        trace_id=f"{ctx.trace_id:032x}",
        span_id=f"{ctx.span_id:016x}",
        parent_span_id=f"{parent.span_id:016x}" if parent is not None else None,
        start_ns=span.start_time or 0,
        end_ns=span.end_time or 0,
        status_error=status.status_code.name == "ERROR",
        status_message=status.description,
        attributes=MappingProxyType(dict(span.attributes or {})),
        events=tuple((e.name, e.timestamp, MappingProxyType(dict(e.attributes or {}))) for e in span.events),
        kind=int(span.kind.value) + 1,  # the SDK's SpanKind counts from 0 (INTERNAL), OTLP from 1
        scope=span.instrumentation_scope.name if span.instrumentation_scope else "",
        resource=MappingProxyType(dict(span.resource.attributes)),
    )


def recorder() -> tuple[Any, Any]:
    """A tracer provider of its own and the in-memory exporter it writes to."""
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    return provider, exporter


def evidence(spans: Iterable[Any]) -> list[tuple[str, str, Mapping[str, Any]]]:
    """(boundary, outcome, metadata) of every span that is evidence, in end order."""
    out = []
    for span in spans:
        ev = read_span(view_of(span))
        if ev is not None:
            out.append((ev.boundary, ev.outcome, dict(ev.metadata)))
    return out


def view(
    name: str,
    attributes: Mapping[str, Any] | None = None,
    *,
    error: bool = False,
    message: str | None = None,
    exception: tuple[str, str] | None = None,
    stacktrace: str | None = None,
    kind: int = 1,
    ms: int = 120,
    resource: Mapping[str, Any] | None = None,
) -> SpanView:
    """A span made by hand, for the conventions no installed library writes."""
    events: tuple[tuple[str, int, Mapping[str, Any]], ...] = ()
    if exception is not None:
        attrs = {"exception.type": exception[0], "exception.message": exception[1]}
        if stacktrace is not None:
            attrs["exception.stacktrace"] = stacktrace
        events = (("exception", 1_700_000_000_100_000_000, attrs),)
    return SpanView(
        name=name,
        trace_id=HEX32,
        span_id="b7ad6b7169203331",
        parent_span_id=None,
        start_ns=1_700_000_000_000_000_000,
        end_ns=1_700_000_000_000_000_000 + ms * 1_000_000,
        status_error=error or exception is not None,
        status_message=message,
        attributes=MappingProxyType(dict(attributes or {})),
        events=events,
        kind=kind,
        resource=MappingProxyType(dict(resource or {})),
    )


# -- OTLP JSON, as the Collector's file exporter writes it -----------------------------------


def _otlp_value(v: Any) -> dict[str, Any]:
    if isinstance(v, bool):
        return {"boolValue": v}
    if isinstance(v, int):
        return {"intValue": str(v)}  # OTLP JSON: 64-bit integers as strings
    if isinstance(v, float):
        return {"doubleValue": v}
    if isinstance(v, (tuple, list)):
        return {"arrayValue": {"values": [_otlp_value(x) for x in v]}}
    return {"stringValue": str(v)}


def _otlp_attributes(attrs: Mapping[str, Any] | None) -> list[dict[str, Any]]:
    return [{"key": k, "value": _otlp_value(v)} for k, v in (attrs or {}).items()]


def otlp_document(spans: Iterable[Any]) -> dict[str, Any]:
    """SDK spans as one OTLP/JSON ``ExportTraceServiceRequest`` (opentelemetry-proto's JSON
    encoding: camelCase names, hex ids, 64-bit integers as strings, enums as numbers),
    grouped by resource and instrumentation scope as an exporter batches them."""
    groups: dict[Any, dict[Any, list[dict[str, Any]]]] = {}
    resources: dict[Any, Any] = {}
    for span in spans:
        ctx = span.get_span_context()
        parent = span.parent
        status = span.status
        code = {"UNSET": 0, "OK": 1, "ERROR": 2}[status.status_code.name]
        record: dict[str, Any] = {
            "traceId": f"{ctx.trace_id:032x}",
            "spanId": f"{ctx.span_id:016x}",
            "parentSpanId": f"{parent.span_id:016x}" if parent is not None else "",
            "name": span.name,
            "kind": int(span.kind.value) + 1,
            "startTimeUnixNano": str(span.start_time),
            "endTimeUnixNano": str(span.end_time),
            "attributes": _otlp_attributes(span.attributes),
            "events": [
                {"timeUnixNano": str(e.timestamp), "name": e.name, "attributes": _otlp_attributes(e.attributes)}
                for e in span.events
            ],
            "status": {"code": code, **({"message": status.description} if status.description else {})},
        }
        key = id(span.resource)
        resources[key] = span.resource
        scope = span.instrumentation_scope
        scope_key = (scope.name, scope.version) if scope else ("", None)
        groups.setdefault(key, {}).setdefault(scope_key, []).append(record)
    return {
        "resourceSpans": [
            {
                "resource": {"attributes": _otlp_attributes(resources[key].attributes)},
                "scopeSpans": [
                    {"scope": {"name": name, **({"version": version} if version else {})}, "spans": records}
                    for (name, version), records in scopes.items()
                ],
            }
            for key, scopes in groups.items()
        ]
    }
