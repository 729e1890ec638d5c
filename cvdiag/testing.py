"""Helpers for the tests of an application that uses cvdiag (and for cvdiag's own)."""

from __future__ import annotations

import time
from datetime import UTC, datetime
from typing import Any

from cvdiag.contract.ids import new_span_id
from cvdiag.contract.schema import DEFAULT_DEMO, EDGE_HEADERS, ENVELOPE_FIELDS, SCHEMA_VERSION

#: What an emitter writes for an envelope field nobody set (``envelope()``'s defaults).
_FIELD_DEFAULTS: dict[str, Any] = {
    "schema_version": SCHEMA_VERSION,
    "parent_span_id": None,
    "slug": "unknown",
    "demo": DEFAULT_DEMO,
    "duration_ms": None,
    "outcome": "info",
    "_metadata_dropped": False,
    "_truncated": False,
}
_FIELDS = frozenset(ENVELOPE_FIELDS)


def envelope(boundary: str, *, test_id: str = "t-1", ts: str | None = None, **fields: Any) -> dict[str, Any]:
    """A complete schema-v1 envelope of ``boundary``, keys in wire order: a log line to
    feed the reader, the CLI or the report without running an emitter.

    ``fields`` set any other envelope field by name (``span_id=``, ``outcome=``,
    ``metadata=`` ...). What is not set is what the emitter writes for a bare event: the
    layer from the boundary's first part, ``trace_id`` equal to ``test_id``, a fresh span
    id, the time now (``ts`` and ``mono_ns``), the unknown slug and the default demo, no
    metadata. ``edge_headers`` names only the headers seen: the rest of the nine are null,
    as on the wire. A name outside the schema is a ``TypeError``, not a silent extra key.
    """
    unknown = fields.keys() - _FIELDS
    if unknown:
        raise TypeError(f"envelope() got fields outside the schema: {', '.join(sorted(unknown))}")
    values = _FIELD_DEFAULTS | fields
    values["test_id"] = test_id
    values["boundary"] = boundary
    values["ts"] = ts if ts is not None else datetime.now(UTC).isoformat(timespec="milliseconds")[:-6] + "Z"
    values.setdefault("trace_id", test_id)
    values.setdefault("layer", boundary.split(".", 1)[0])
    values.setdefault("metadata", {})
    if "span_id" not in values:
        values["span_id"] = new_span_id()
    if "mono_ns" not in values:
        values["mono_ns"] = time.monotonic_ns()
    values["edge_headers"] = dict.fromkeys(EDGE_HEADERS) | fields.get("edge_headers", {})
    return {name: values[name] for name in ENVELOPE_FIELDS}
