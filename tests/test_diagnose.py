"""Diagnosis: every failed test gets a root-cause class, a one-sentence reason and evidence.

The labelled corpus (tests/corpus/*.jsonl) pins accuracy; the live tests regenerate a
few scenarios through the real emitter, so an emitter change that breaks diagnosis fails here.
"""

from __future__ import annotations

import ast
import graphlib
import json
import math
import pickle
import random
import tracemalloc
from pathlib import Path

import corpus_server
import pytest
from hypothesis import example, given
from hypothesis import strategies as st
from repotools import load_tool

import cvdiag.diagnosis
from cvdiag.contract.timestamps import order_key, parse_ts
from cvdiag.diagnosis import CLASSES, Diagnosis, Evidence, Thresholds, classify, diagnose, judge
from cvdiag.diagnosis._picks import earliest, latest
from cvdiag.diagnosis.rules import RULES
from cvdiag.testing import envelope

ROOT = Path(__file__).resolve().parent.parent
CORPUS = ROOT / "tests" / "corpus"


evaluation = load_tool("eval_diagnose")


def _records(*names: str) -> list[dict]:
    paths = [CORPUS / n for n in names] if names else sorted(CORPUS.glob("*.jsonl"))
    return evaluation.load(paths)


def _envelope(boundary: str, t: float, metadata: dict | None = None, **fields) -> dict:
    """An envelope at ``t`` seconds after 10:00:00 (unless ``fields`` name ts and mono_ns)."""
    at = {"ts": f"2026-11-21T10:00:{t:06.3f}Z", "mono_ns": int(t * 1e9)}
    return envelope(boundary, metadata=metadata or {}, **(at | fields))


# -- accuracy on the corpus ------------------------------------------------------------------


def test_corpus_precision_and_recall_are_at_least_095_for_every_class():
    scored = evaluation.score(_records())
    table = evaluation.metrics(scored)
    misses = [
        f"{s.name}: {s.label} -> {s.diagnosis.cls} ({s.diagnosis.reason})" for s in scored if s.label != s.diagnosis.cls
    ]
    assert evaluation.failing(table) == [], "\n".join(misses)


def test_corpus_has_hand_built_and_emitter_scenarios_for_the_issue():
    hand = _records("hand.jsonl")
    backend = _records("backend.jsonl")
    assert {r["label"] for r in hand + backend} == set(CLASSES)
    assert {r["source"] for r in backend} == {"emitter"}
    names = {r["name"].split(" (")[0] for r in backend}
    for scenario in (
        "happy-sse",
        "disconnect-before-first-byte",
        "disconnect-after-first-byte",
        "raise-before-response",
        "raise-mid-stream",
        "llm-raises",
        "llm-hanging-killed",
        "llm-slow-heartbeats",
        "provider-empty-answer",
        "agent-error-json",
        "killed-mid-stream",
        # issue 15: agents on a real provider stand-in, through the HTTP capture
        "agent-tool-error",
        "agent-tool-slow",
        "agent-tool-running-hangup",
        "agent-loop-limit",
        "agent-truncated",
        "agent-filtered",
        "agent-output-invalid",
        "agent-auth",
        "agent-config",
        "agent-context-overflow",
    ):
        assert scenario in names


def test_eval_tool_exits_zero_on_the_corpus_and_prints_the_matrix(capsys):
    assert evaluation.main([]) == 0
    out = capsys.readouterr().out
    assert "precision" in out and "recall" in out
    assert "llm-stalled" in out


def test_eval_tool_fails_when_a_class_is_missing(tmp_path, capsys):
    only_ok = [r for r in _records("hand.jsonl") if r["label"] == "ok"]
    path = tmp_path / "ok.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in only_ok))
    assert evaluation.main([str(path)]) == 1


# -- the package: its classes, its face, its modules ---------------------------------------------

#: The precedence of the classes as the docs list it (docs/diagnosis.md): the first rule that matches wins.
PRECEDENCE = (
    "probe-runner-crash",
    "edge-interference",
    "context-overflow",
    "llm-auth",
    "llm-config",
    "llm-error",
    "content-filtered",
    "output-truncated",
    "provider-empty",
    "aimock-fixture-mismatch",
    "llm-stalled",
    "llm-slow",
    "tool-error",
    "agent-loop",
    "output-invalid",
    "tool-slow",
    "server-error",
    "stream-error",
    "client-disconnect",
    "agent-error",
    "incomplete",
    "no-backend",
    "strict-harness",
    "frontend-hydration",
    "ok",
)


def test_classes_are_the_rules_classes_each_once_in_precedence_order():
    assert [rule.cls for rule in RULES] == list(PRECEDENCE)
    assert CLASSES == PRECEDENCE
    assert len(set(CLASSES)) == len(CLASSES)


def test_the_package_face_is_the_eight_public_names():
    public = ["CLASSES", "Diagnosis", "Evidence", "Judgement", "Thresholds", "classify", "diagnose", "judge"]
    assert sorted(cvdiag.diagnosis.__all__) == public
    assert all(getattr(cvdiag.diagnosis, name, None) is not None for name in public)


def test_the_diagnosis_modules_import_one_another_without_a_cycle():
    package = ROOT / "cvdiag" / "diagnosis"
    graph = {}
    for path in package.glob("*.py"):
        found = set()
        for node in ast.walk(ast.parse(path.read_text())):  # TYPE_CHECKING imports too
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("cvdiag.diagnosis."):
                found.add(node.module.removeprefix("cvdiag.diagnosis."))
        graph[path.stem] = found
    assert graph["evidence"] and graph["rules"]  # the walk found the imports it checks
    assert "rules" not in graph["evidence"]  # the evidence knows nothing of the rules
    list(graphlib.TopologicalSorter(graph).static_order())  # raises CycleError on a cycle


# -- properties of the classifier --------------------------------------------------------------


def test_envelope_order_does_not_change_the_verdict():
    rng = random.Random(4)
    for record in _records():
        expected = evaluation.run(record)
        events = list(record["events"])
        rng.shuffle(events)
        got = evaluation.run({**record, "events": events})
        assert (got.cls, got.reason) == (expected.cls, expected.reason), record["name"]


@given(st.lists(st.tuples(st.sampled_from(("backend", "probe")), st.none() | st.integers(0, 5)), max_size=12))
def test_the_first_and_last_envelope_follow_the_rules_of_every_first_and_last_value(lines):
    """The head fold keeps the first, the last and the last backend envelope with its own
    inlined copy of the ``_picks`` rules (it runs per envelope): it must keep what the
    rules keep, whatever the order, ties and envelopes without a time."""
    evidence = Evidence("t")
    first = last = last_backend = None
    for n, (layer, second) in enumerate(lines):
        boundary = f"{layer}.line{n}"
        env = envelope(boundary, ts="2026-11-21T10:00:00.000Z")
        if second is None:  # a line without a time
            env["ts"] = env["mono_ns"] = None
        else:
            env["ts"], env["mono_ns"] = f"2026-11-21T10:00:{second:02d}.000Z", second * 10**9
        evidence.add(env)
        key = order_key(env["ts"], env["mono_ns"])
        first, last = earliest(first, key, boundary), latest(last, key, boundary)
        if layer == "backend":
            last_backend = latest(last_backend, key, boundary)
    assert evidence.first_boundary == (first.value if first else None)
    assert evidence.last_boundary == (last.value if last else None)
    assert evidence.last_backend_boundary == (last_backend.value if last_backend else None)


def test_a_judgement_makes_the_summary_only_when_asked_for_it_on_the_corpus():
    """``judge`` names the class ``classify`` names without making the summary (a rule makes
    it only where it reads a fact that is not one of ``Evidence.CHEAP_FACTS``); a verdict's
    evidence is the whole summary, its keys first and in order, then what the rules added;
    a verdict of a few facts has those, as the summary has them."""
    made = 0
    summary = Evidence.summary

    def counted(self, log_end=None):
        nonlocal made
        made += 1
        return summary(self, log_end)

    records = _records()
    for record in records:
        ev = Evidence("t")
        for env in record["events"]:
            ev.add(env)
        thresholds = Thresholds(**record.get("thresholds", {}))
        end = parse_ts(record["log_end"]) if record.get("log_end") else None
        verdict = classify(ev, thresholds, log_end=end)
        want = ev.summary(end)
        assert list(verdict.evidence)[: len(want)] == list(want), record["name"]
        assert {k: verdict.evidence[k] for k in want} == want, record["name"]
        Evidence.summary = counted
        try:
            judged = judge(ev, thresholds, log_end=end)
            assert judged.cls == verdict.cls, record["name"]
            cheap = judged.diagnosis(Evidence.CHEAP_FACTS)
        finally:
            Evidence.summary = summary
        assert cheap.evidence == {k: want[k] for k in Evidence.CHEAP_FACTS}, record["name"]
        assert judged.diagnosis(("no such fact", "events")).evidence == {"events": want["events"]}
        assert (cheap.cls, cheap.reason, cheap.confidence) == (verdict.cls, verdict.reason, verdict.confidence)
        assert judged.diagnosis() == verdict
    assert made < len(records) // 2  # most tests are judged without reading a fact


def test_classify_is_repeatable_on_the_same_evidence():
    record = next(r for r in _records("hand.jsonl") if r["name"] == "llm-stalled-heartbeats-stopped")
    evidence = Evidence("t")
    for env in record["events"]:
        evidence.add(env)
    end = parse_ts(record["log_end"])
    assert classify(evidence, log_end=end) == classify(evidence, log_end=end)


def test_malformed_envelopes_never_raise():
    odd = [
        None,
        5,
        "CVDIAG {",
        {},
        {"boundary": None},
        {"boundary": "backend.sse.aborted", "metadata": [1], "edge_headers": "x", "ts": 5, "mono_ns": "z"},
        {"boundary": "backend.llm.call.response", "outcome": "err", "metadata": {"latency_ms": float("nan")}},
        {"boundary": "backend.llm.call.heartbeat", "metadata": {"elapsed_ms_since_start": "10"}},
        {"boundary": "backend.response.complete", "metadata": {"http_status": True, "sse_event_count": None}},
        {"boundary": "probe.exit", "ts": "not a time", "metadata": {"failure_classifier": 12}},
        {"boundary": "aimock.match.decision", "metadata": {"reject_reasons": [None, 3]}},
        {"boundary": "backend.request.ingress", "edge_headers": {"cf-ray": 7, "via": ["squid"]}},
    ]
    diagnosis = diagnose(odd)
    assert diagnosis.cls in CLASSES
    json.dumps(diagnosis.to_json())


def test_evidence_memory_does_not_grow_with_the_number_of_events():
    evidence = Evidence("t-1")
    evidence.add(_envelope("backend.llm.call.start", 0.0, {"provider": "openai", "model": "gpt-4o-mini"}))
    for i in range(200):
        evidence.add(_envelope("backend.llm.call.heartbeat", 0.001 * i, {"elapsed_ms_since_start": i}))
    small = len(pickle.dumps(evidence))
    for i in range(20_000):
        evidence.add(_envelope("backend.sse.event", 1 + 0.001 * i, {"sequence_num": i}))
        evidence.add(_envelope(f"backend.custom.b{i}", 1.0, {}))
    assert len(pickle.dumps(evidence)) < small + 4096
    assert len(evidence.summary()["boundaries"]) <= 65


def test_a_client_hang_up_after_many_invented_abort_kinds_is_still_a_disconnect():
    """A log inventing termination kinds cannot crowd out the spec's own: the hang-up is
    kept and diagnosed (the evidence used to drop its first abort and the rule failed)."""
    events = [_envelope("backend.sse.aborted", 0.1 * i, {"termination_kind": f"invented-{i}"}) for i in range(40)] + [
        _envelope("backend.sse.aborted", 9.0, {"termination_kind": "rst", "bytes_before_abort": 0})
    ]
    diagnosis = diagnose(events)
    assert diagnosis.cls == "client-disconnect"
    assert "rst" in diagnosis.reason
    evidence = Evidence("t")
    for env in events:
        evidence.add(env)
    assert len(evidence.aborts) <= 16 + 6 + 1 and sum(evidence.aborts.values()) == 41
    assert evidence.aborts.keys() == evidence.abort_first.keys()


def _cost_per_test(records: list[dict]) -> float:
    """Bytes per Evidence folded from ``records`` (five times each, under distinct ids)."""
    ids = [f"{n}-{r['name']}" for n in range(5) for r in records]  # the CLI holds the ids anyway

    def fold() -> list[Evidence]:
        kept = []
        for test_id, record in zip(ids, records * 5, strict=True):
            evidence = Evidence(test_id)
            for env in record["events"]:
                evidence.add(env)
            kept.append(evidence)
        return kept

    fold()  # the caches shared between tests (boundary shapes, interned names) fill once

    def measured() -> float:
        tracemalloc.start()
        try:
            before = tracemalloc.get_traced_memory()[0]
            kept = fold()
            return (tracemalloc.get_traced_memory()[0] - before) / len(kept)
        finally:
            tracemalloc.stop()

    # The lower of two: a shared table that grows once in a measured fold (what the whole
    # suite ran before decides when) is not the cost of an Evidence (CI once saw +25 bytes).
    return min(measured(), measured())


def _has_agent_part(record: dict) -> bool:
    """Does the test's evidence keep tool calls or an agent-level cause?"""
    evidence = Evidence("t")
    for env in record["events"]:
        evidence.add(env)
    return evidence.agentic is not None


def test_an_evidence_costs_under_1_25_kb_on_the_corpus():
    """The CLI holds one Evidence per test of a log (tens of thousands): each stays small.
    Tests with tool calls or agent-level causes keep more, measured on their own below."""
    records = [r for r in _records() if not _has_agent_part(r)]
    assert len(records) > 140
    per_test = _cost_per_test(records)
    assert per_test < 1280, f"{per_test:.0f} bytes per Evidence"


def test_an_evidence_with_tool_calls_and_agent_causes_costs_under_2_kb():
    records = [r for r in _records() if _has_agent_part(r)]
    assert len(records) >= 35
    per_test = _cost_per_test(records)
    assert per_test < 2048, f"{per_test:.0f} bytes per Evidence"


def test_to_json_has_the_cli_keys_and_serializes():
    diagnosis = diagnose([_envelope("backend.sse.aborted", 1.0, {"termination_kind": "rst", "bytes_before_abort": 0})])
    out = diagnosis.to_json()
    assert list(out) == ["test_id", "class", "confidence", "reason", "evidence"]
    assert out["class"] == "client-disconnect"
    json.dumps(out)


def test_evidence_carries_the_derived_numbers():
    record = next(r for r in _records("backend.jsonl") if r["name"].startswith("happy-sse (inner middleware, debug"))
    facts = evaluation.run(record).evidence
    assert facts["events_per_layer"]["backend"] == facts["events"]
    assert facts["boundaries"]["backend.sse.event"] == 5
    assert facts["ttfb_ms"] is not None and facts["llm_latency_ms"] is not None
    assert facts["http_status"] == 200 and facts["sse_event_count"] == 5
    assert facts["completion_tokens"] == 5
    for key in ("last_heartbeat_elapsed_ms", "bytes_before_abort", "termination_kind", "exception_type"):
        assert key in facts


def test_stalled_llm_reason_quotes_the_log_end_and_last_heartbeat():
    events = [
        _envelope("backend.llm.call.start", 1.2, {"provider": "openai", "model": "gpt-4o-mini"}),
        _envelope("backend.llm.call.heartbeat", 11.2, {"elapsed_ms_since_start": 10000}),
        _envelope("backend.llm.call.heartbeat", 21.2, {"elapsed_ms_since_start": 20000}),
    ]
    got = diagnose(events, log_end=parse_ts("2026-11-21T10:00:42.400Z"))
    assert got.cls == "llm-stalled"
    assert got.reason == (
        "LLM call to openai/gpt-4o-mini started 41.2 s before the log ends; last heartbeat at 20.0 s; no response."
    )


def test_heartbeats_reaching_the_threshold_make_it_slow_not_stalled():
    events = [
        _envelope("backend.llm.call.start", 0.0, {"provider": "openai", "model": "o1"}),
        _envelope("backend.llm.call.heartbeat", 6.0, {"elapsed_ms_since_start": 6000}),
    ]
    assert diagnose(events).cls == "llm-stalled"
    assert diagnose(events, Thresholds(slow_s=5.0)).cls == "llm-slow"


def _stopped_with_an_open_llm_call() -> list[dict]:
    """A stream the server ended at shutdown (at exit: its LLM call and agent never closed)."""
    return [
        _envelope("backend.request.ingress", 0.0, {"method": "GET", "path": "/chat"}),
        _envelope("backend.agent.enter", 0.1, {"agent_name": "writer", "model_id": "gpt-4o-mini"}),
        _envelope("backend.llm.call.start", 0.2, {"provider": "openai", "model": "gpt-4o-mini"}),
        _envelope("backend.llm.call.heartbeat", 2.2, {"elapsed_ms_since_start": 2000}),
        _envelope("backend.llm.call.heartbeat", 4.2, {"elapsed_ms_since_start": 4000}),
        _envelope(
            "backend.sse.aborted",
            4.3,
            {"termination_kind": "shutdown", "bytes_before_abort": 470},
            outcome="err",
            duration_ms=4300,
        ),
    ]


def test_server_shutdown_with_heartbeats_to_the_end_is_incomplete_not_stalled():
    got = diagnose(_stopped_with_an_open_llm_call(), log_end=parse_ts("2026-11-21T10:00:04.300Z"))
    assert got.cls == "incomplete"
    assert got.reason == (
        "The server stopped (shutdown) with a request in flight, after 470 bytes and 4.3 s; "
        "its LLM call was cut off; last heartbeat at 4.0 s."
    )
    assert got.evidence["termination_kind"] == "shutdown"


def test_a_call_that_stalled_long_before_the_shutdown_stays_llm_stalled():
    # A harness times out at 300 s and tears the stack down: the stall is the cause.
    events = _stopped_with_an_open_llm_call()
    events[-1] = _envelope(
        "backend.sse.aborted",
        0.0,
        {"termination_kind": "shutdown", "bytes_before_abort": 0},
        outcome="err",
        ts="2026-11-21T10:05:01.000Z",
        mono_ns=301 * 10**9,
    )
    got = diagnose(events)
    assert got.cls == "llm-stalled", got.reason
    assert "last heartbeat at 4.0 s" in got.reason


def test_agent_cancelled_by_a_shutdown_is_incomplete_not_agent_error():
    events = _stopped_with_an_open_llm_call()
    events[3:5] = [
        _envelope("backend.llm.call.response", 4.25, {"error_class": "CancelledError"}, outcome="timeout"),
        _envelope("backend.agent.exit", 4.26, {"terminal_outcome": "cancelled"}, outcome="err"),
    ]
    got = diagnose(events)
    assert got.cls == "incomplete" and got.reason.startswith("The server stopped (shutdown)")
    assert "client" not in got.reason


def test_an_llm_failure_before_a_shutdown_stays_llm_error():
    events = _stopped_with_an_open_llm_call()
    events.append(_envelope("backend.llm.call.response", 1.0, {"error_class": "RateLimitError"}, outcome="err"))
    assert diagnose(events).cls == "llm-error"


def test_client_disconnect_says_before_or_after_first_byte():
    before = diagnose([_envelope("backend.sse.aborted", 1.0, {"termination_kind": "rst", "bytes_before_abort": 0})])
    after = diagnose([_envelope("backend.sse.aborted", 1.0, {"termination_kind": "rst", "bytes_before_abort": 90})])
    assert "before the first byte" in before.reason and before.evidence["disconnect"] == "before-first-byte"
    assert "after the first byte" in after.reason and after.evidence["disconnect"] == "after-first-byte"


def test_llm_failure_behind_a_500_is_llm_error_not_server_error():
    events = [
        _envelope(
            "backend.llm.call.response",
            1.0,
            {"provider": "openai", "model": "m", "error_class": "RateLimitError"},
            outcome="err",
        ),
        _envelope("backend.response.complete", 1.1, {"http_status": 500, "sse_event_count": 0}, outcome="err"),
        _envelope("backend.error.caught", 1.2, {"exception_type": "RateLimitError"}, outcome="err"),
    ]
    got = diagnose(events)
    assert got.cls == "llm-error" and "RateLimitError" in got.reason


def test_classes_needing_a_missing_layer_are_not_guessed():
    aimock_only = [
        _envelope("aimock.match.decision", 0.0, {"fixture_id": "f-1"}),
        _envelope("aimock.response.complete", 0.1, {"http_status": 200, "total_bytes": 900}),
    ]
    assert diagnose(aimock_only).cls == "ok"  # no probe layer: not "no-backend"
    backend_only_empty = [
        _envelope("backend.response.complete", 0.1, {"http_status": 200, "sse_event_count": 0, "content_length": 0}),
    ]
    assert diagnose(backend_only_empty).cls == "ok"  # no LLM events: not "provider-empty"


def test_app_relaying_its_providers_429_is_not_the_edge():
    edge = {"retry-after": "20", "cf-ray": "8f1a-FRA"}
    events = [
        _envelope("backend.response.complete", 1.0, {"http_status": 429, "sse_event_count": 0}, edge_headers=edge),
        _envelope("probe.network.response", 1.1, {"status": 429}, edge_headers=edge),
    ]
    assert diagnose(events).cls != "edge-interference"
    assert diagnose(events[1:]).cls == "edge-interference"


def test_diagnose_of_nothing_is_ok_with_low_confidence():
    got = diagnose([])
    assert isinstance(got, Diagnosis) and got.cls == "ok" and got.confidence < 0.5


# -- live: the real emitter, so an emitter change that breaks diagnosis is caught ---------------


@pytest.mark.parametrize(
    ("endpoint", "expected"),
    [
        ("happy", "ok"),
        ("raise-before", "server-error"),
        ("llm-raise", "llm-error"),
        ("empty", "provider-empty"),
        ("agent-error", "agent-error"),
    ],
)
def test_live_scenarios_through_the_real_middleware_get_their_class(endpoint, expected):
    from emitkit import capture
    from starlette.testclient import TestClient

    with capture("debug") as captured:
        client = TestClient(corpus_server.build_app("inner"), raise_server_exceptions=False)
        client.get(f"/chat/{endpoint}", headers={"x-test-id": f"live-{endpoint}"})
        events = [e for e in captured.events() if e["test_id"] == f"live-{endpoint}"]
    got = diagnose(events, Thresholds(slow_s=corpus_server.SLOW_S))
    assert got.cls == expected, got.reason


def test_live_client_hanging_up_under_uvicorn_is_client_disconnect(tmp_path):
    server = corpus_server.Server("outer", "verbose", tmp_path / "log.ndjson")
    try:
        corpus_server.hang_up_after_first_chunk(server, "live-hangup", "slow-stream")
    finally:
        server.stop()
    events = [e for e in corpus_server.read_log(tmp_path / "log.ndjson") if e["test_id"] == "live-hangup"]
    got = diagnose(events, Thresholds(slow_s=corpus_server.SLOW_S))
    assert got.cls == "client-disconnect", got.reason
    assert got.evidence["disconnect"] == "after-first-byte"


class _Text(str):
    """A str of another type: what a library caller's envelope may hold."""


_ANY_FIELD = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=200),
    st.text(max_size=200).map(_Text),
    st.lists(st.integers(), max_size=2),
    st.dictionaries(st.text(max_size=3), st.integers(), max_size=2),
)


@given(_ANY_FIELD)
@example(math.nan)
@example(-math.inf)
@example(True)
@example(_Text("gpt-4o-mini"))
def test_a_field_reader_takes_a_value_of_its_type_and_nothing_else(value: object) -> None:
    """Each tolerant reader, whatever a log holds: a boolean is no number, NaN and the
    infinities are no time, a number cut to an int only when finite, text cut and interned."""
    from cvdiag.diagnosis._convert import TEXT_LIMIT, as_float, as_int, as_name, as_text

    number = isinstance(value, int | float) and not isinstance(value, bool)
    finite = number and math.isfinite(value)  # type: ignore[arg-type]
    assert as_int(value) == (value if number and isinstance(value, int) else int(value) if finite else None)  # type: ignore[call-overload]
    got = as_float(value)
    assert got == (float(value) if finite else None) and (got is None or type(got) is float)  # type: ignore[arg-type]
    text = value[:TEXT_LIMIT] if isinstance(value, str) else None
    assert as_text(value) == text and as_name(value) == text
    if text is not None and len(text) > 1:  # one name kept once, whichever object brought it
        assert as_name(value) is as_name("".join(list(text)))


def test_the_runs_of_names_a_log_invents_are_remembered_up_to_the_bound(monkeypatch: pytest.MonkeyPatch) -> None:
    """A test's whole run of boundary names leads to one shared shape, looked up once; a
    log inventing names cannot grow what is remembered past the bound."""
    from cvdiag.diagnosis import _shapes

    monkeypatch.setattr(_shapes, "_MAX_SHAPES", _shapes._remembered + 10)
    start = _shapes.Shape(())
    runs = [(f"b{i}", "backend.response.complete") for i in range(50)]
    shapes = [start.then_all(run) for run in runs]
    assert [s.names for s in shapes] == runs
    assert start.then_all(runs[0]) is shapes[0]  # remembered: every test of that run shares it
    assert start.runs[runs[0]] is shapes[0]  # as one run: one lookup, not one a name
    assert (
        sum(len(s.next) + len(s.runs) for s in (start, *shapes)) + sum(len(s.next) for s in start.next.values()) <= 10
    )
