"""The envelope's head in one table: how the emitter writes each field before
``edge_headers`` (its kind) and what a reader takes it for (its role).

Both compiled parts are held to it at start-up: the read side's fold is configured from
it (``read/fold.py`` hands each field's kind and role in, and the module says which roles
it keeps: one that keeps others is refused), and the emit side's writer says which fields
it writes in which order (``_cemit.FIELDS``: refused when they are not these). Adding a
head field is a row here, after the schema's ``ENVELOPE_FIELDS``, plus its tests.
"""

from __future__ import annotations

from typing import NamedTuple

from cvdiag.contract.schema import BACKEND_TERMINALS, ENVELOPE_FIELDS, SCHEMA_VERSION

# How the emitter writes a field: one literal text, a string, null or a string, an
# integer, null or an integer.
LITERAL, STR, NULL_OR_STR, INT, NULL_OR_INT = range(5)

#: What a reader takes a head field for, in the order the compiled fold keeps them (its
#: ``ROLES``). A field with a role is read by every pass; the others are only checked.
ROLES: tuple[str, ...] = ("test_id", "layer", "boundary", "slug", "ts", "mono_ns", "outcome", "duration")


class HeadField(NamedTuple):
    name: str
    kind: int
    role: str | None = None
    literal: str = ""


HEAD: tuple[HeadField, ...] = (
    HeadField("schema_version", LITERAL, literal=str(SCHEMA_VERSION)),
    HeadField("test_id", STR, "test_id"),
    HeadField("trace_id", STR),
    HeadField("span_id", STR),
    HeadField("parent_span_id", NULL_OR_STR),
    HeadField("layer", STR, "layer"),
    HeadField("boundary", STR, "boundary"),
    HeadField("slug", STR, "slug"),
    HeadField("demo", STR),
    HeadField("ts", STR, "ts"),
    HeadField("mono_ns", INT, "mono_ns"),
    HeadField("duration_ms", NULL_OR_INT, "duration"),
    HeadField("outcome", STR, "outcome"),
)

#: The backend boundaries that end a test's stream, in the order a row's ``terminal``
#: prefers them: (boundary, the row's terminal). Both folds take their flag bits from here
#: (``read/fold.py``; the compiled one is handed them).
TERMINAL: tuple[tuple[str, str], ...] = (
    ("backend.sse.aborted", "aborted"),
    ("backend.response.complete", "complete"),
    ("backend.error.caught", "error"),
)

#: The boundaries whose envelopes only count, their head saying all: boundary -> the
#: evidence's counter it adds to (a ``Facts`` slot, made when no slot holds it). The
#: compiled fold counts them itself, as many counters as names here (a size handed in);
#: a new row is a new counter on both paths.
COUNTED: dict[str, str] = {
    "backend.request.ingress": "ingress",
    "backend.sse.event": "sse_events",
    "probe.dom.firsttoken": "probe_first_tokens",
    "probe.dom.alternate_content": "probe_alternate",
}

#: The compiled fold's named results (``_cfold.RESULTS``), each field read by name: a
#: module whose results have other fields is refused (``read/_compiled.py``). A field added
#: here is one added in ``_cfold.c``'s ``*_FIELDS`` and read where the result is taken.
RESULTS: dict[str, tuple[str, ...]] = {
    "Agg": ("events", "first", "last", "failed", "flags", "layers", "slugs", "order"),
    "Kept": ("places", "more", "llm_ms"),
    "Head": (
        *("events", "names", "counts", "other"),
        *("aimock_events", "backend_events", "other_events", "probe_events", "failures"),
        *("first_key", "first_ts", "first_boundary", "last_key", "last_ts", "last_boundary"),
        *("last_backend_key", "last_backend_ts", "last_backend_boundary", "counters", "skipped"),
    ),
    "Taken": ("agg", "kept", "head"),
}

if tuple(f.name for f in HEAD) != ENVELOPE_FIELDS[: ENVELOPE_FIELDS.index("edge_headers")]:
    raise ImportError("contract.layout.HEAD is not the schema's envelope head (ENVELOPE_FIELDS) in wire order")
if sorted(f.role for f in HEAD if f.role) != sorted(ROLES):
    raise ImportError("every role of contract.layout.ROLES is one head field's, once")
if sorted(b for b, _ in TERMINAL) != sorted(BACKEND_TERMINALS):
    raise ImportError("contract.layout.TERMINAL is not the schema's BACKEND_TERMINALS")
