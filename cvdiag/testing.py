"""Helpers for the tests of an application that uses cvdiag (and for cvdiag's own)."""

from __future__ import annotations

import time
from datetime import UTC, datetime
from typing import Any

from cvdiag.contract.ids import new_span_id
from cvdiag.contract.schema import DEFAULT_DEMO, EDGE_HEADERS, ENVELOPE_FIELDS, SCHEMA_VERSION

#: Every field in wire order, holding what an emitter writes when nobody set it; the
#: fields that differ per envelope (ids, times, headers, metadata) are set by the call.
_TEMPLATE: dict[str, Any] = dict.fromkeys(ENVELOPE_FIELDS) | {
    "schema_version": SCHEMA_VERSION,
    "slug": "unknown",
    "demo": DEFAULT_DEMO,
    "outcome": "info",
    "_metadata_dropped": False,
    "_truncated": False,
}


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
    if not fields.keys() <= _TEMPLATE.keys():
        unknown = ", ".join(sorted(fields.keys() - _TEMPLATE.keys()))
        raise TypeError(f"envelope() got fields outside the schema: {unknown}")
    # Unpacking over the template keeps its (wire) order whatever order the fields come in.
    env = {
        **_TEMPLATE,
        "test_id": test_id,
        "trace_id": test_id,
        "layer": boundary.split(".", 1)[0],
        "boundary": boundary,
        "ts": ts if ts is not None else datetime.now(UTC).isoformat(timespec="milliseconds")[:-6] + "Z",
        "metadata": {},
        **fields,
    }
    if "span_id" not in fields:
        env["span_id"] = new_span_id()
    if "mono_ns" not in fields:
        env["mono_ns"] = time.monotonic_ns()
    seen = fields.get("edge_headers")
    env["edge_headers"] = dict.fromkeys(EDGE_HEADERS) | seen if seen else dict.fromkeys(EDGE_HEADERS)
    return env
