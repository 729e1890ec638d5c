"""Evidence read from OpenTelemetry spans (spec section 9): one mapping, both sides.

``read_span`` turns a finished span, from the SDK in process or from an OTLP file, into
the envelope of the boundary it ends; ``span_test_id`` says which test it belongs to;
``scrub_metadata`` scrubs and caps its strings where no emitter does (the read side).
The convention tables (``_conventions``, ``_exceptions``) name the spec or source of
every entry.
"""

from cvdiag.contract.otel._read import read_span, scrub_metadata, span_test_id
from cvdiag.contract.otel._view import SpanEvidence, SpanView

__all__ = ["SpanEvidence", "SpanView", "read_span", "scrub_metadata", "span_test_id"]
