"""Folding the backend's request and response lines (``backend.request.*``,
``backend.sse.*``, ``backend.response.complete``, ``backend.error.caught``): how each
request ended, its first byte, its events, its statuses and the exceptions it raised."""

from __future__ import annotations

from collections.abc import Mapping
from sys import intern
from typing import Any

from cvdiag.contract.schema import TERMINATION_KINDS
from cvdiag.diagnosis._convert import as_float, as_int, as_text
from cvdiag.diagnosis._facts import Counting, Facts, Handler
from cvdiag.diagnosis._fold_agent import name_cause
from cvdiag.diagnosis._picks import earlier, earliest, later
from cvdiag.diagnosis._shapes import MAX_STATUSES


def _first_byte(ev: Facts, md: Mapping, outcome: Any, key: Any, env: Mapping) -> None:
    delta = as_float(md.get("delta_ms_from_ingress"))
    if earlier(ev.first_byte, ev.first_byte_key, key):
        ev.first_byte_key, ev.first_byte = key, delta if delta is not None else -1.0


def _aborted(ev: Facts, md: Mapping, outcome: Any, key: Any, env: Mapping) -> None:
    kind = intern(as_text(md.get("termination_kind")) or "unknown")
    if ev.aborts is None or ev.abort_first is None:
        ev.aborts, ev.abort_first = {}, {}
    # A log inventing kinds keeps the spec's kinds and MAX_STATUSES others; the rest count
    # as unknown. Every kind counted has its first abort, which the rules read.
    if kind not in ev.aborts and kind not in TERMINATION_KINDS and len(ev.aborts) >= MAX_STATUSES:
        kind = "unknown"
    ev.aborts[kind] = ev.aborts.get(kind, 0) + 1
    ev.abort_first[kind] = earliest(
        ev.abort_first.get(kind), key, (as_int(md.get("bytes_before_abort")), as_float(env.get("duration_ms")))
    )


def _complete(ev: Facts, md: Mapping, outcome: Any, key: Any, env: Mapping) -> None:
    ev.completes += 1
    status = as_int(md.get("http_status"))
    if status is not None and status not in ev.backend_statuses and len(ev.backend_statuses) < MAX_STATUSES:
        ev.backend_statuses += (status,)
    events = as_int(md.get("sse_event_count"))
    total = as_float(md.get("total_duration_ms"))
    if total is None:
        total = as_float(env.get("duration_ms"))
    if status is not None and status >= 500:
        ev.completes_5xx += 1
        ev.complete_5xx = earliest(ev.complete_5xx, key, (status, total))
    elif outcome == "ok":
        if (events or 0) > 0:
            ev.complete_ok_with_events += 1
        elif events == 0:
            ev.complete_ok_empty += 1
            if as_int(md.get("content_length")) == 0:
                ev.complete_ok_bodiless += 1
    if later(ev.complete_last, ev.complete_last_key, key):
        ev.complete_last_key, ev.complete_last = key, (status, events, total)


def _error_caught(ev: Facts, md: Mapping, outcome: Any, key: Any, env: Mapping) -> None:
    ev.errors += 1
    ev.error_first = earliest(
        ev.error_first, key, (as_text(md.get("exception_type")) or "an exception", as_text(md.get("message_scrubbed")))
    )
    name_cause(ev, md.get("exception_type"), md.get("message_scrubbed"), key)


# Envelopes that only count: the count is all they say.
_ingress = Counting("ingress")
_sse_event = Counting("sse_events")

HANDLERS: dict[str, Handler] = {
    "backend.request.ingress": _ingress,
    "backend.sse.first_byte": _first_byte,
    "backend.sse.event": _sse_event,
    "backend.sse.aborted": _aborted,
    "backend.response.complete": _complete,
    "backend.error.caught": _error_caught,
}
