"""A finished span as both sides see it, and the evidence one span gives (spec section 9).

The in-process reader fills a ``SpanView`` from the OpenTelemetry SDK's span, the file
reader from an OTLP JSON record: the mapping in ``_read`` never knows which.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

_EMPTY: Mapping[str, Any] = MappingProxyType({})


@dataclass(frozen=True, slots=True)
class SpanView:
    """A finished span: what any source can say about it, nothing more."""

    name: str
    trace_id: str  # 32 lowercase hex
    span_id: str  # 16 lowercase hex
    parent_span_id: str | None
    start_ns: int  # Unix epoch ns
    end_ns: int
    status_error: bool  # OTLP status code ERROR
    status_message: str | None
    attributes: Mapping[str, Any]  # str/bool/int/float or tuples of them
    events: tuple[tuple[str, int, Mapping[str, Any]], ...] = ()  # (name, time_ns, attributes)
    kind: int = 0  # OTLP SpanKind: 0 unspecified, 1 internal, 2 server, 3 client, 4 producer, 5 consumer
    scope: str = ""  # instrumentation scope name
    resource: Mapping[str, Any] = field(default_factory=lambda: _EMPTY)


@dataclass(frozen=True, slots=True)
class SpanEvidence:
    """The envelope one span ends: its boundary, outcome, duration and allow-listed metadata.

    Strings in ``metadata`` are cut to the scrubber's scan limit but NOT yet scrubbed: the
    emit side scrubs them on its normal path, the read side with ``scrub_metadata``.
    """

    boundary: str
    outcome: str  # ok / err / timeout / info
    duration_ms: int | None
    metadata: Mapping[str, Any]
    convention: str  # genai / openinference / openllmetry / http / a framework's name
