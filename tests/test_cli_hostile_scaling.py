"""Hostile logs stay linear and cheap (issue 35), given to the real ``cvdiag``: cut
``CVDIAG {`` heads by the hundred thousand (a gzip of a few KB), one test of tens of
thousands of events. Every cost is a ratio of two runs in the same test, never a time:
a log of cut heads against a log of the same size without a marker; ``diagnose ONE-ID``
against ``diagnose --all``. The full sizes are ``tools/bench_hostile.py``'s, by hand.
"""

from __future__ import annotations

import gzip
import json
import time
from pathlib import Path

import pytest
from cvdiag_cli import run

TID = "0190a9c0-1a2b-7c3d-8e4f-5a6b7c8d9e01"
HEADS = 100_000
_BEAT = (
    'CVDIAG {{"schema_version":1,"test_id":"{tid}","trace_id":"{tid}","span_id":"{i:016x}",'
    '"parent_span_id":null,"layer":"backend","boundary":"backend.llm.call.heartbeat","slug":"agno","demo":"chat",'
    '"ts":"2026-11-21T10:00:{s:02d}.{ms:03d}Z","mono_ns":{i},"duration_ms":null,"outcome":"info",'
    '"edge_headers":{{}},"metadata":{{"elapsed_ms_since_start":{i}}},"_metadata_dropped":false,"_truncated":false}}\n'
)


def _best_of(args: list[str], rounds: int = 3) -> float:
    """Seconds of the fastest of ``rounds`` runs of ``cvdiag ARGS`` (start-up included)."""
    best = float("inf")
    for _ in range(rounds):
        start = time.perf_counter()
        run(*args)
        best = min(best, time.perf_counter() - start)
    return best


@pytest.fixture(scope="module")
def logs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Cut heads (plain and gzipped) and a log of the same size that holds no marker."""
    d = tmp_path_factory.mktemp("hostile")
    heads = b"CVDIAG {\n" * HEADS
    (d / "heads.log").write_bytes(heads)
    (d / "heads.log.gz").write_bytes(gzip.compress(heads, 6))
    (d / "plain.log").write_bytes(b"app said {\n" * (len(heads) // 11))
    return {p.name: p for p in d.iterdir()}


@pytest.mark.parametrize("args", [["tests"], ["grep"], ["validate"], ["validate", "--json"]], ids=" ".join)
@pytest.mark.parametrize("name", ["heads.log", "heads.log.gz"])
def test_cut_heads_cost_about_what_a_log_without_markers_costs(logs, args, name):
    """Each cut head was parsed twice, through an exception, and listed by a system call
    of its own: 30 to 120 times the cost of reading the log."""
    ratio = _best_of([*args, logs[name]]) / _best_of([*args, logs["plain.log"]])
    assert ratio < 4, (args, name, ratio)


def test_cut_heads_are_each_counted_and_listed(logs):
    out = run("validate", "--json", logs["heads.log.gz"]).out
    report = json.loads(out)
    assert report["malformed"] == HEADS and len(report["problems"]) == HEADS
    assert [p["line"] for p in report["problems"][:3]] == [1, 2, 3] and report["problems"][-1]["line"] == HEADS
    assert {p["reason"] for p in report["problems"]} == {"cut or not JSON"}
    note = run("tests", logs["heads.log"]).err
    assert f"skipped {HEADS} malformed CVDIAG lines (first at " in note, note


@pytest.fixture(scope="module")
def beats(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One test of 30,000 heartbeats: more than a timeline keeps (its first and last 10,000)."""
    path = tmp_path_factory.mktemp("beats") / "beats.log"
    lines = (_BEAT.format(tid=TID, i=i, s=(i // 1000) % 60, ms=i % 1000) for i in range(30_000))
    path.write_text("".join(lines))
    return path


def test_diagnosing_one_test_is_diagnosing_it_among_all(beats):
    """``diagnose ONE-ID`` judged a timeline cut to 20,000 events; now every event, as --all."""
    (one,) = json.loads(run("diagnose", TID, beats, "--json").out)
    (every,) = json.loads(run("diagnose", "--all", beats, "--json").out)
    assert one["evidence"]["events"] == 30_000 and one == every
    (by_prefix,) = json.loads(run("diagnose", TID[:8], beats, "--json").out)
    assert by_prefix == every


def test_diagnosing_one_test_costs_what_diagnosing_all_costs(beats):
    ratio = _best_of(["diagnose", TID, beats]) / _best_of(["diagnose", "--all", beats])
    assert ratio < 1.3, ratio
