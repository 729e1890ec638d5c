"""The byte cap of a line follows the tier of the slug that writes it (spec section 7),
not the global tier: a slug outside ``debug_allow_list`` writes at verbose caps."""

from __future__ import annotations

import orjson
from emitkit import capture

import cvdiag
from cvdiag.contract.schema import ENVELOPE_CAP_BYTES, Tier
from cvdiag.write.context import bind, new_context, unbind


def _ingress_line(slug: str) -> tuple[int, bool]:
    """Bytes and ``_truncated`` of a verbose-tier line (request.ingress) with long fields."""
    with capture("debug", debug_allow_list="svc-a") as cap:
        token = bind(new_context(slug=slug))
        try:
            cvdiag.emit(
                "backend.request.ingress",
                {"method": "GET " * 500, "path": "/p " * 650, "content_length": None, "inbound_test_id_adopted": False},
            )
        finally:
            unbind(token)
        cvdiag.flush()
    (env,) = [e for e in cap.all() if e["boundary"] == "backend.request.ingress"]
    return len(orjson.dumps(env)), env["_truncated"]


def test_a_slug_outside_the_debug_allow_list_is_capped_at_verbose_size():
    size, truncated = _ingress_line("svc-b")
    assert truncated is True
    assert size <= ENVELOPE_CAP_BYTES[Tier.VERBOSE]


def test_an_allow_listed_slug_keeps_the_debug_cap():
    size, truncated = _ingress_line("svc-a")
    assert truncated is False
    assert ENVELOPE_CAP_BYTES[Tier.VERBOSE] < size <= ENVELOPE_CAP_BYTES[Tier.DEBUG]
