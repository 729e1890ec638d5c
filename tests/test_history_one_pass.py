"""``history add`` takes its facts from the pass that diagnoses: the logs are read once,
and a result's LLM attempts and tool failures are the ones the diagnosis' sentence states
(issue 37, item 5)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import orjson
import pytest
from logkit import compact, envelope, happy, tool_failure

from cvdiag.history import record
from cvdiag.read import fold
from cvdiag.read.sources import resolve_sources

ROOT = Path(__file__).resolve().parent.parent

_FORECAST = {"tool_name": "forecast", "call_id": "call_fc1", "server": None}


def _wire_forecast(test_id: str, at: float, *, outcome: str, error_kind: str | None) -> list[dict[str, Any]]:
    """The model's ``forecast`` call as the wire saw it: asked at ``at``, its result
    handed back 260 ms later (or given up when its request ended: ``timeout``)."""
    call = _FORECAST | {"source": "wire"}
    return [
        envelope(test_id, "backend.tool.call.start", at, metadata=call | {"args_chars": 18, "args_hash": "3f2a9c10"}),
        envelope(test_id, "backend.tool.call.response", at + 0.26, outcome=outcome, duration_ms=260,
                 metadata=call | {"result_chars": 0, "error_kind": error_kind}),
    ]  # fmt: skip


def _disagreeing_log(path: Path) -> Path:
    """Three tests whose facts a second reading of the log counted otherwise:

    - ``t-both``: the MCP call ``forecast`` failed, and the wire saw the same call fail
      (its result handed back to the model): one failed call, two failed lines;
    - ``t-given-up``: a wire call given up when its request ended (a timeout with no
      error of the tool's own): no tool failed;
    - ``t-retries``: an LLM call failed on its third attempt (``attempt`` 2), the only one logged.
    """
    retried = happy("t-retries", 20.0)
    retried[3]["outcome"] = "err"
    retried[3]["metadata"] = {**retried[3]["metadata"], "http_status": 500, "error_class": "InternalServerError",
                              "attempt": 2}  # fmt: skip
    given_up = happy("t-given-up", 10.0)
    envs = [
        *tool_failure("t-both", 0.0),
        *_wire_forecast("t-both", 0.32, outcome="err", error_kind="protocol"),
        *given_up[:4],
        *_wire_forecast("t-given-up", 10.51, outcome="timeout", error_kind=None),
        *given_up[4:],
        *retried,
    ]
    path.write_text("\n".join("CVDIAG " + compact(e) for e in envs) + "\n")
    return path


@pytest.mark.parametrize("compiled", [True, False], ids=["compiled", "python"])
def test_a_results_facts_are_the_ones_the_diagnosis_states(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, compiled: bool
) -> None:
    if not compiled:
        monkeypatch.setattr(fold, "_CFOLD", None)
    results, _ = record.tests_of(resolve_sources([str(_disagreeing_log(tmp_path / "ci.log"))]), "run-1")
    by_id = {r.test_id: r for r in results}

    both = by_id["t-both"]
    assert both.cls == "tool-error" and "1 of 2 tool calls failed" in (both.reason or "")
    assert both.tool_failures == 1  # a second reading counted its two failed lines: 2

    given_up = by_id["t-given-up"]
    assert given_up.cls == "ok" and given_up.tool_failures == 0  # was 1

    retries = by_id["t-retries"]
    assert retries.cls == "llm-error" and "3 attempts" in (retries.reason or "")
    assert retries.llm_attempts == 3  # was 1: one start, one response
    assert (retries.llm_ms, retries.tokens) == (480.0, 30)


def test_the_facts_agree_with_the_diagnosis_over_the_labelled_corpus(tmp_path: Path) -> None:
    """Every scenario of the labelled corpus: a result's tool failures are the evidence's
    failed tool calls, and its LLM attempts never fewer than the failed attempts the
    diagnosis counts, as ``cvdiag diagnose --all --json`` shows them."""
    corpus = sorted((ROOT / "tests" / "corpus").glob("*.jsonl"))
    records = [json.loads(x) for p in corpus for x in p.open() if x.strip()]
    log = tmp_path / "corpus.log"
    log.write_bytes(b"".join(b"CVDIAG " + orjson.dumps(e) + b"\n" for r in records for e in r["events"]))
    results, _ = record.tests_of(resolve_sources([str(log)]), "run-1")
    out = subprocess.run(
        [sys.executable, "-m", "cvdiag", "diagnose", "--all", "--json", str(log)],
        capture_output=True, text=True, check=False, cwd=ROOT,
    ).stdout  # fmt: skip
    verdicts = {d["test_id"]: d for d in json.loads(out)}
    assert len(results) >= 250 and len(verdicts) == len(results)
    for r in results:
        evidence = verdicts[r.test_id]["evidence"]
        assert r.tool_failures == evidence["tool_calls"]["failed"], r.test_id
        assert r.llm_attempts >= evidence["llm_failed_attempts"], r.test_id
        assert (r.cls, r.reason) == (verdicts[r.test_id]["class"], verdicts[r.test_id]["reason"])


def test_the_logs_are_opened_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """One pass: the log is opened once (it was twice, the second for LLM time, tokens
    and tool failures), with the compiled fold and without it."""
    log = str(_disagreeing_log(tmp_path / "ci.log"))
    opened: list[str] = []
    counting = [False]

    def hook(event: str, args: tuple[Any, ...]) -> None:
        if counting[0] and event == "open" and str(args[0]) == log:
            opened.append(event)

    sys.addaudithook(hook)  # audit hooks stay for the process: ``counting`` turns it off
    try:
        for compiled in (True, False):
            if not compiled:
                monkeypatch.setattr(fold, "_CFOLD", None)
            sources = resolve_sources([log])
            opened.clear()
            counting[0] = True
            record.tests_of(sources, "run-1")
            counting[0] = False
            assert len(opened) == 1, (compiled, opened)
    finally:
        counting[0] = False
