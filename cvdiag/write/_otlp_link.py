"""Which OpenTelemetry trace a request belongs to, noted by the middleware for the export.

Only while OTLP export is on, once per request: the span current when the request
entered the middleware (an ASGI instrumentation's server span, say), else the
``traceparent`` the request came with. The drain thread gives the request's records
those ids (spec section 9) and hangs cvdiag's spans under that span. Keyed by test id:
the concurrent requests of one test are one test's trace anyway.
"""

from __future__ import annotations

import sys

from cvdiag.contract.trace_context import parse_traceparent

#: test id -> (trace id, span id), both lowercase hex; started over past ``KEPT``.
links: dict[str, tuple[str, str]] = {}
KEPT = 4096


def note_request(test_id: str, traceparent: bytes | None) -> None:
    """Remember the trace of the request now entering (never imports OpenTelemetry)."""
    found = None
    trace = sys.modules.get("opentelemetry.trace")
    if trace is not None:
        span_context = trace.get_current_span().get_span_context()
        if span_context.is_valid:
            found = (f"{span_context.trace_id:032x}", f"{span_context.span_id:016x}")
    if found is None and traceparent:
        found = parse_traceparent(traceparent)
    if found is not None:
        if len(links) >= KEPT:
            links.clear()
        links[test_id] = found
