"""``cvdiag compare A B``: a passing and a failing run of one test, aligned by boundary."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from cvdiag_cli import run
from logkit import compact, envelope, happy, write

from cvdiag.read.compare import compare

PASS = "0190a9c0-1a2b-7c3d-8e4f-00000000aaaa"
FAIL = "0190a9c0-1a2b-7c3d-8e4f-00000000bbbb"


def _llm_response(test_id: str, at: float, *, outcome: str = "ok", latency_ms: int = 480, status: int | None = None):
    return envelope(
        test_id,
        "backend.llm.call.response",
        at,
        outcome=outcome,
        duration_ms=latency_ms,
        metadata={"provider": "openai", "model": "gpt-4o-mini", "latency_ms": latency_ms, "http_status": status},
    )


def provider_500(test_id: str = FAIL, start: float = 10.0) -> list[dict[str, Any]]:
    """The LLM call fails with a 500, the request errors out: no first byte, no stream."""
    return [
        envelope(test_id, "backend.request.ingress", start, metadata={"method": "POST", "path": "/chat"}),
        envelope(test_id, "backend.agent.enter", start + 0.01, metadata={"agent_name": "planner"}),
        envelope(test_id, "backend.llm.call.start", start + 0.02, metadata={"provider": "openai"}),
        _llm_response(test_id, start + 0.3, outcome="err", latency_ms=280, status=500),
        envelope(
            test_id,
            "backend.agent.exit",
            start + 0.31,
            outcome="err",
            duration_ms=300,
            metadata={"terminal_outcome": "error"},
        ),
        envelope(
            test_id,
            "backend.response.complete",
            start + 0.32,
            outcome="err",
            duration_ms=320,
            metadata={"http_status": 500, "total_duration_ms": 320},
        ),
    ]


def slow_llm(test_id: str = FAIL, start: float = 10.0) -> list[dict[str, Any]]:
    """The same story as a happy run, but the LLM answers after 29.1 s of heartbeats."""
    events = happy(test_id, start)
    late = 29.1 - 0.48
    for env in events[3:]:  # everything from the LLM response on happens later
        env["ts"] = envelope(test_id, env["boundary"], start + _offset(env, start) + late)["ts"]
    events[3]["duration_ms"] = 29_100
    events[3]["metadata"]["latency_ms"] = 29_100
    beats = [
        envelope(
            test_id, "backend.llm.call.heartbeat", start + 0.02 + k * 5, metadata={"elapsed_ms_since_start": k * 5000}
        )
        for k in range(1, 6)
    ]
    return events[:3] + beats + events[3:]


def _offset(env: dict[str, Any], start: float) -> float:
    from logkit import T0

    from cvdiag.contract.timestamps import parse_ts

    return parse_ts(env["ts"]) - T0.timestamp() - start


def retried(test_id: str = FAIL, start: float = 10.0) -> list[dict[str, Any]]:
    """The first LLM attempt gets a 500, the retry succeeds, the test passes late."""
    events = happy(test_id, start)
    first_try = [
        envelope(test_id, "backend.llm.call.start", start + 0.012, metadata={"provider": "openai", "attempt": 0}),
        _llm_response(test_id, start + 0.015, outcome="err", latency_ms=3, status=500),
    ]
    return events[:2] + first_try + events[2:]


@pytest.fixture
def log(tmp_path: Path):
    def make(b_events: list[dict[str, Any]]) -> Path:
        lines = [f"CVDIAG {compact(e)}" for e in [*happy(PASS, 0.0), *b_events]]
        return write(tmp_path / "app.log", lines)

    return make


def test_an_llm_error_is_the_first_divergence() -> None:
    result = compare(happy(PASS), provider_500())
    assert result.divergence == "B: backend.llm.call.response err (500) where A had ok"
    step = result.steps[result.divergence_index]
    assert (step.a.outcome, step.b.outcome) == ("ok", "err")
    assert "B has no backend.sse.first_byte" in [d for s in result.steps for d in s.differences]


def test_a_missing_boundary_is_named_when_it_comes_first() -> None:
    cut_short = happy(FAIL)[:3]  # the LLM call started and nothing more was logged
    result = compare(happy(PASS), cut_short)
    assert result.divergence == "B has no backend.llm.call.response"
    assert [s.boundary for s in result.steps if s.b is None] == [
        "backend.llm.call.response",
        "backend.sse.first_byte",
        "backend.agent.exit",
        "backend.response.complete",
    ]


def test_a_slow_llm_call_is_the_divergence_not_its_heartbeats() -> None:
    result = compare(happy(PASS), slow_llm())
    assert result.divergence == "LLM call took 29.1 s in B vs 480 ms in A"
    beats = [s for s in result.steps if s.boundary == "backend.llm.call.heartbeat"]
    assert len(beats) == 5 and all(s.a is None and s.minor for s in beats)


def test_llm_attempts_pair_up_in_order() -> None:
    result = compare(happy(PASS), retried())
    pairs = [(s.a is not None, s.b is not None, s.boundary) for s in result.steps if "llm.call" in s.boundary]
    assert pairs == [
        (True, True, "backend.llm.call.start"),
        (True, True, "backend.llm.call.response"),
        (False, True, "backend.llm.call.start"),
        (False, True, "backend.llm.call.response"),
    ]
    assert result.divergence == "B: backend.llm.call.response err (500) where A had ok"
    extra = [d for step in result.steps for d in step.differences if "extra" in d]
    assert extra == [
        "B has an extra backend.llm.call.start (attempt 2)",
        "B has an extra backend.llm.call.response (attempt 2)",
    ]


def test_two_runs_of_the_same_story_do_not_diverge() -> None:
    result = compare(happy(PASS), happy(FAIL, start=50.0))
    assert result.divergence is None
    assert all(s.a and s.b and not s.differences for s in result.steps)


def test_cli_compare_takes_unique_prefixes_and_calls_out_the_divergence(log) -> None:
    path = log(provider_500())
    r = run("compare", PASS[:33], FAIL[:33], path, env={"COLUMNS": "200"})  # no note cut short
    assert r.code == 0, r.err
    lines = r.out.splitlines()
    assert lines[0].startswith(f"A {PASS}  ok")
    assert lines[1].startswith(f"B {FAIL}  llm-error")
    assert lines[2] == "first divergence: B: backend.llm.call.response err (500) where A had ok"
    marked = [line for line in lines if line.startswith(">")]
    assert len(marked) == 1 and "backend.llm.call.response" in marked[0] and "err (500)" in marked[0]
    first_byte = next(line for line in lines if "backend.sse.first_byte" in line)
    assert first_byte.startswith("*") and "B has no backend.sse.first_byte" in first_byte


def test_cli_compare_json(log) -> None:
    path = log(slow_llm())
    r = run("compare", "--json", PASS, FAIL, path)
    assert r.code == 0, r.err
    doc = json.loads(r.out)
    assert doc["a"]["test_id"] == PASS and doc["b"]["test_id"] == FAIL
    assert doc["a"]["diagnosis"]["class"] == "ok"
    assert doc["first_divergence"]["reason"] == "LLM call took 29.1 s in B vs 480 ms in A"
    step = doc["steps"][doc["first_divergence"]["index"]]
    assert step["boundary"] == "backend.llm.call.response"
    assert (step["a"]["duration_ms"], step["b"]["duration_ms"]) == (480, 29_100)
    assert doc["b"]["events"] == 12 and doc["a"]["events"] == 7


def test_cli_compare_refuses_an_ambiguous_or_unknown_id(log) -> None:
    path = log(provider_500())
    r = run("compare", PASS[:13], FAIL, path)
    assert (r.code, r.out) == (1, "")
    assert r.err.startswith(f"cvdiag: '{PASS[:13]}' matches 2 test ids: ")
    r = run("compare", PASS, "ffffffff", path)
    assert (r.code, r.out) == (1, "")
    assert r.err.startswith("cvdiag: no test id 'ffffffff' in the inputs")


@pytest.mark.parametrize("width", [80, 120])
def test_cli_compare_fits_the_terminal(log, width: int) -> None:
    path = log(retried())
    r = run("compare", PASS, FAIL, path, env={"COLUMNS": str(width)})
    assert r.code == 0, r.err
    assert max(len(line) for line in r.out.splitlines()) <= width
    assert any(line.startswith(">") and "backend.llm.call.response" in line for line in r.out.splitlines())


def test_long_streams_interleaved_differently_compare_in_linear_time(tmp_path: Path) -> None:
    """20,000 events per side, SSE events alternating with heartbeats in A and with aimock
    chunks in B: the alignment used to be quadratic here (about a minute); the command must
    answer well inside the timeout, with every tick accounted for."""

    def stream(test_id: str, other: str) -> list[dict[str, Any]]:
        boundaries = ("backend.sse.event", other) * 10_000
        return [envelope(test_id, b, i / 1000, metadata={}) for i, b in enumerate(boundaries)]

    a, b = "long-a-0001", "long-b-0001"
    log = write(
        tmp_path / "app.log",
        [f"CVDIAG {compact(e)}" for e in (*stream(a, "backend.llm.call.heartbeat"), *stream(b, "aimock.sse.chunk"))],
    )
    result = run("compare", a, b, log, "--json", timeout=30)
    assert result.code == 0, result.err
    steps = json.loads(result.out)["steps"]
    both = [s for s in steps if s["boundary"] == "backend.sse.event"]
    assert len(both) == 10_000  # every SSE event paired with its namesake
    assert len(steps) == 30_000  # plus 10,000 heartbeats only A has and 10,000 chunks only B has
