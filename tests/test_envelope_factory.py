"""``cvdiag.testing.envelope()``: the one factory that tests and tools build wire envelopes with."""

from __future__ import annotations

import json
import re

import pytest
from emitkit import capture

import cvdiag
from cvdiag.contract.schema import EDGE_HEADERS, ENVELOPE_FIELDS, SPAN_ID_RE
from cvdiag.read.validate import problems
from cvdiag.testing import envelope

TS_RE = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$")


def test_an_envelope_given_only_what_varies_is_the_line_the_emitter_writes() -> None:
    with capture() as cap, cvdiag.request_context(test_id="d4-agno-1234"):
        cvdiag.emit("backend.agent.enter", {"agent_name": "planner", "model_id": None})
    [emitted] = cap.events()
    built = envelope(
        "backend.agent.enter",
        test_id="d4-agno-1234",
        ts=emitted["ts"],
        span_id=emitted["span_id"],
        mono_ns=emitted["mono_ns"],
        metadata={"agent_name": "planner", "model_id": None},
    )
    assert json.dumps(built) == json.dumps(emitted)  # the same keys, in the same order


def test_the_defaults_make_a_valid_envelope_of_now() -> None:
    env = envelope("backend.sse.first_byte", outcome="ok", metadata={"delta_ms_from_ingress": 12})
    assert problems(env) == []
    assert list(env) == list(ENVELOPE_FIELDS)
    assert (env["test_id"], env["trace_id"], env["layer"], env["slug"]) == ("t-1", "t-1", "backend", "unknown")
    assert SPAN_ID_RE.match(env["span_id"]) and TS_RE.match(env["ts"])
    assert envelope("probe.start")["span_id"] != envelope("probe.start")["span_id"]


def test_fields_in_any_order_come_out_in_wire_order_with_all_nine_edge_headers() -> None:
    env = envelope(
        "probe.network.response",
        _truncated=True,
        metadata={"status": 403},
        edge_headers={"server": "cloudflare", "cf-ray": "8f1a-FRA"},
        outcome="err",
        duration_ms=80,
    )
    assert list(env) == list(ENVELOPE_FIELDS)
    assert env["edge_headers"] == dict.fromkeys(EDGE_HEADERS) | {"cf-ray": "8f1a-FRA", "server": "cloudflare"}
    assert list(env["edge_headers"]) == list(EDGE_HEADERS)
    assert (env["layer"], env["outcome"], env["duration_ms"], env["_truncated"]) == ("probe", "err", 80, True)


def test_a_field_outside_the_schema_is_refused_by_name() -> None:
    with pytest.raises(TypeError, match="outside the schema: http_status"):
        envelope("backend.response.complete", http_status=200)
