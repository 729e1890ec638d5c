"""Diagnosis from evidence read from spans (issue 33, item 2): one tool call is one call
whoever saw it, and the tables the diagnosis keeps in step with the contract's."""

from __future__ import annotations

from typing import Any

from cvdiag.contract.otel._exceptions import LOCAL_CLIENT_CLASSES as CONTRACT_LOCAL
from cvdiag.diagnosis import diagnose
from cvdiag.diagnosis._causes import LOCAL_CLIENT_CLASSES
from cvdiag.read.toolcalls import tool_calls
from cvdiag.testing import envelope


def _at(boundary: str, t: float, metadata: dict[str, Any], outcome: str = "ok", ms: int | None = None) -> dict:
    ts = f"2026-11-21T10:00:{t:06.3f}Z"
    return envelope(boundary, test_id="t", ts=ts, mono_ns=int(t * 1e9), outcome=outcome, duration_ms=ms,
                    metadata=metadata)  # fmt: skip


def _wire(t: float, call_id: str, ms: int = 900) -> list[dict]:
    md = {"tool_name": "fetch_invoice", "call_id": call_id, "source": "wire", "server": None}
    return [
        _at("backend.tool.call.start", t, md | {"args_chars": 9, "args_hash": "0badcafe"}),
        _at("backend.tool.call.response", t + ms / 1000, md | {"result_chars": 30}, ms=ms),
    ]


def _span(t: float, call_id: str | None, ms: int = 300) -> dict:
    md = {"tool_name": "fetch_invoice", "call_id": call_id, "source": "otel", "kind": "function",
          "error_kind": "raised", "error_class": "InvoiceNotFound", "error_excerpt": "invoice 42 missing",
          "handed_back": True, "otel_convention": "genai"}  # fmt: skip
    return _at("backend.tool.call.response", t + ms / 1000, md, "err", ms)


def _request(*events: dict) -> list[dict]:
    done = {"http_status": 200, "content_length": 80, "total_duration_ms": 2000, "sse_event_count": 0}
    return [_at("backend.request.ingress", 0.0, {"method": "POST", "path": "/chat"}), *events,
            _at("backend.response.complete", 2.0, done, ms=2000)]  # fmt: skip


def test_a_tool_call_seen_on_the_wire_and_by_its_span_is_one_failed_call() -> None:
    events = _request(*_wire(0.5, "call_9"), _span(0.6, "call_9"))
    got = diagnose(events)
    assert got.cls == "tool-error"
    assert got.evidence["tool_calls"] == {"started": 1, "answered": 1, "failed": 1}
    assert "Tool fetch_invoice (traces) failed (raised), raising InvoiceNotFound" in got.reason
    assert "handed the error back to the model" in got.reason
    shown = tool_calls(events)
    assert len(shown) == 1 and shown[0].source == "otel" and shown[0].handed_back
    assert shown[0].failure() == "raised InvoiceNotFound: 'invoice 42 missing'"


def test_call_ids_decide_before_times_do() -> None:
    # The span's call is another call than the wire's, though it ran inside it.
    got = diagnose(_request(*_wire(0.5, "call_9"), _span(0.6, "call_10")))
    assert got.evidence["tool_calls"] == {"started": 1, "answered": 2, "failed": 1}
    # Without a call id on the span, the same tool inside the wire's call is the same call.
    got = diagnose(_request(*_wire(0.5, "call_9"), _span(0.6, None)))
    assert got.evidence["tool_calls"]["answered"] == 1


def test_a_tool_running_when_the_client_hung_up_is_the_slow_tool() -> None:
    ok_tool = {"tool_name": "crawl", "source": "otel", "kind": "function", "otel_convention": "genai"}
    aborted = {"termination_kind": "rst", "bytes_before_abort": 0}
    events = [
        _at("backend.request.ingress", 0.0, {"method": "POST", "path": "/chat"}),
        _at("backend.sse.aborted", 4.0, aborted, "err", 4000),
        _at("backend.tool.call.response", 9.0, ok_tool, "ok", 8500),
    ]
    got = diagnose(events)
    assert got.cls == "tool-slow" and "Tool crawl (traces) was still running (8.5 s in)" in got.reason
    # The same hang-up with no tool running is the client's.
    assert diagnose(events[:2]).cls == "client-disconnect"


def test_the_diagnosis_knows_the_contracts_local_client_faults() -> None:
    assert LOCAL_CLIENT_CLASSES == CONTRACT_LOCAL
