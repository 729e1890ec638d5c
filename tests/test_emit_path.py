"""The emit path is straight: processors in a plain loop, no emit inside an emit, and an
accounting line after the line it accounts for."""

from __future__ import annotations

from typing import Any

import pytest
import structlog

import cvdiag
from cvdiag.testing import capture, reset
from cvdiag.write import emitter


@pytest.fixture
def depth(monkeypatch: pytest.MonkeyPatch) -> dict[str, int]:
    """How deep ``_emit`` calls nest (1 when no emit happens inside an emit)."""
    seen = {"now": 0, "max": 0, "calls": 0}
    inner = emitter._emit

    def counted(*args: Any) -> Any:
        seen["now"] += 1
        seen["calls"] += 1
        seen["max"] = max(seen["max"], seen["now"])
        try:
            return inner(*args)
        finally:
            seen["now"] -= 1

    monkeypatch.setattr(emitter, "_emit", counted)
    return seen


def test_metadata_dropped_follows_the_line_it_accounts_for(depth):
    reset()  # no (boundary, key) reported yet
    with capture() as envelopes, cvdiag.request_context(test_id="t-order"):
        cvdiag.emit("backend.agent.enter", {"agent_name": "a", "not_declared": 1})
        cvdiag.emit("backend.agent.exit", {"terminal_outcome": "ok", "total_duration_ms": 1}, outcome="ok")
    assert [e["boundary"] for e in envelopes] == [
        "backend.agent.enter",
        "cvdiag.metadata_dropped",
        "backend.agent.exit",
    ]
    assert envelopes[1]["metadata"] == {"boundary": "backend.agent.enter", "keys": ["not_declared"]}
    assert depth["calls"] == 3 and depth["max"] == 1  # the report is queued after, not from inside


def test_a_users_processor_runs_in_the_chain_and_can_drop(monkeypatch):
    seen: list[str] = []

    def note(logger: Any, method_name: str, event_dict: dict[str, Any]) -> dict[str, Any]:
        seen.append(f"{method_name}:{event_dict['envelope']['boundary']}")
        if event_dict["envelope"]["metadata"].get("agent_name") == "drop-me":
            raise structlog.DropEvent
        event_dict["envelope"]["demo"] = "noted"
        return event_dict

    monkeypatch.setattr(emitter, "PROCESSORS", [note, *emitter.PROCESSORS])
    with capture() as envelopes, cvdiag.request_context():
        cvdiag.emit("backend.agent.enter", {"agent_name": "keep"})
        cvdiag.emit("backend.agent.enter", {"agent_name": "drop-me"})
    assert [(e["metadata"], e["demo"]) for e in envelopes] == [({"agent_name": "keep"}, "noted")]
    assert seen == ["envelope:backend.agent.enter", "envelope:backend.agent.enter"]


def test_a_dropped_line_still_reports_the_keys_it_lost(monkeypatch):
    """A user's step that drops a line after cvdiag removed an unknown key: the key is
    reported once all the same, never marked as told while nothing was written."""

    def drop_all(logger: Any, method_name: str, event_dict: dict[str, Any]) -> dict[str, Any]:
        if method_name == "envelope":
            raise structlog.DropEvent
        return event_dict

    monkeypatch.setattr(emitter, "PROCESSORS", [*emitter.PROCESSORS[:1], drop_all, *emitter.PROCESSORS[1:]])
    with capture() as envelopes, cvdiag.request_context():
        cvdiag.emit("backend.agent.enter", {"agent_name": "a", "made_up_key": 1})
    assert [(e["boundary"], e["metadata"]) for e in envelopes] == [
        ("cvdiag.metadata_dropped", {"boundary": "backend.agent.enter", "keys": ["made_up_key"]})
    ]
