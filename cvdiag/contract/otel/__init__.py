"""Evidence read from OpenTelemetry spans (spec section 9): one mapping, both sides.

``read_span`` turns a finished span, from the SDK in process or from an OTLP file, into
the envelope of the boundary it ends; ``span_test_id`` says which test it belongs to;
``scrub_metadata`` scrubs and caps its strings where no emitter does (the read side);
``FailureEchoes`` keeps one line for a failure that every span around it marks again.
The convention tables (``_conventions``, ``_exceptions``) name the spec or source of
every entry. The names load on first use: the tables' readers (the diagnosis) need not
load the scrubber.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from cvdiag.contract.otel._echoes import FailureEchoes
    from cvdiag.contract.otel._read import may_be_evidence, read_span, scrub_metadata, span_test_id
    from cvdiag.contract.otel._view import SpanEvidence, SpanView

__all__ = [
    "FailureEchoes",
    "SpanEvidence",
    "SpanView",
    "may_be_evidence",
    "read_span",
    "scrub_metadata",
    "span_test_id",
]


def __getattr__(name: str) -> Any:
    if name in ("SpanEvidence", "SpanView"):
        from cvdiag.contract.otel import _view

        return getattr(_view, name)
    if name == "FailureEchoes":
        from cvdiag.contract.otel._echoes import FailureEchoes

        return FailureEchoes
    if name in ("may_be_evidence", "read_span", "scrub_metadata", "span_test_id"):
        from cvdiag.contract.otel import _read

        return getattr(_read, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
