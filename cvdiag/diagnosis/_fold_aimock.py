"""Folding the LLM stand-in's lines (``aimock.*``): did a fixture match, why not, and how
many bytes it sent, to tell a provider's empty answer from one cut off on the way."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from cvdiag.diagnosis._convert import as_int, as_text
from cvdiag.diagnosis._facts import Facts, Handler
from cvdiag.diagnosis._picks import earliest, latest


def _match_decision(ev: Facts, md: Mapping, outcome: Any, key: Any, env: Mapping) -> None:
    ev.aimock_decisions += 1
    if md.get("fixture_id") not in (None, ""):
        ev.aimock_matched += 1
    reasons = md.get("reject_reasons")
    if reasons:
        ev.aimock_reject = earliest(
            ev.aimock_reject, key, as_text(reasons if isinstance(reasons, str) else ", ".join(map(str, reasons)))
        )


def _complete(ev: Facts, md: Mapping, outcome: Any, key: Any, env: Mapping) -> None:
    status = as_int(md.get("http_status"))
    if status is not None and (status >= 500 or status == 429):
        ev.aimock_error = earliest(ev.aimock_error, key, status)
    total = as_int(md.get("total_bytes"))
    if total is not None:
        ev.aimock_sent = latest(ev.aimock_sent, key, total)


def _aborted(ev: Facts, md: Mapping, outcome: Any, key: Any, env: Mapping) -> None:
    sent = as_int(md.get("bytes_before_abort"))
    if sent is not None:
        ev.aimock_sent = latest(ev.aimock_sent, key, sent)


def _chunk(ev: Facts, md: Mapping, outcome: Any, key: Any, env: Mapping) -> None:
    ev.aimock_chunk_bytes += max(0, as_int(md.get("chunk_size_bytes")) or 0)


HANDLERS: dict[str, Handler] = {
    "aimock.match.decision": _match_decision,
    "aimock.response.complete": _complete,
    "aimock.response.aborted": _aborted,
    "aimock.sse.chunk": _chunk,
}
