"""The compiled fold (``cvdiag/read/_cfold.c``) against the Python fold: the same rows, the
same evidence slot for slot, the same verdicts, the same counts of malformed lines.

Every log here is folded twice in one process, once with the compiled fold and once with
``fold._CFOLD`` taken away; the Python fold is the reference. The labelled corpus is
written in the line shapes of spec section 1, and hypothesis writes envelopes that are
odd on purpose (times in other shapes, mono_ns past int64, edge headers, unknown layers,
accounting lines, duplicated keys, cut lines).
"""

from __future__ import annotations

import itertools
import json
import os
import sys
from array import array
from datetime import datetime
from pathlib import Path
from typing import Any

import orjson
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from logkit import docker_line, every_shape, happy

from cvdiag.contract import timestamps
from cvdiag.contract.schema import JAVA_PREFIX, PREFIX
from cvdiag.diagnosis import Evidence, Thresholds, classify
from cvdiag.read import _diagnosing, count, fold, sources, split
from cvdiag.read.parsing import Tally
from cvdiag.read.sources import resolve_sources
from cvdiag.testing import envelope

ROOT = Path(__file__).resolve().parent.parent
# Where the end-to-end tests must run (CI), the compiled fold must have been built too.
pytestmark = pytest.mark.skipif(
    fold._CFOLD is None and not os.environ.get("CVDIAG_REQUIRE_E2E"),
    reason="the compiled fold is not built (no C compiler at install)",
)


def _state(value: Any, depth: int = 0) -> Any:
    """A comparable picture of an evidence slot: slotted objects as their slots, recursively."""
    if depth > 6:
        return repr(value)
    if isinstance(value, dict):
        return {k: _state(v, depth + 1) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return type(value)(_state(v, depth + 1) for v in value)
    slots = [s for c in type(value).__mro__ for s in getattr(c, "__slots__", ())]
    if slots and not isinstance(value, str | bytes | int | float):
        if hasattr(value, "names") and type(value).__name__ == "Shape":
            return ("Shape", value.names)
        return (type(value).__name__, {s: _state(getattr(value, s, None), depth + 1) for s in slots})
    return value


def _fold_both(
    log: bytes, monkeypatch: pytest.MonkeyPatch, *, keep_lines: int = 0, budget: int | None = None
) -> tuple[fold.Fold, fold.Fold]:
    compiled = fold.Fold(Evidence, budget=budget, keep_lines=keep_lines)
    assert compiled._c is not None
    compiled.read([(log, "t.log", 0, len(log), 1, 0)], count=True)
    with monkeypatch.context() as m:
        m.setattr(fold, "_CFOLD", None)
        python = fold.Fold(Evidence, budget=budget, keep_lines=keep_lines)
        assert python._c is None
        python.read([(log, "t.log", 0, len(log), 1, 0)], count=True)
    return compiled, python


def _assert_same(compiled: fold.Fold, python: fold.Fold) -> None:
    assert {t: a.row(t) for t, a in compiled.aggs.items()} == {t: a.row(t) for t, a in python.aggs.items()}
    assert list(compiled.aggs) == list(python.aggs)  # first seen first: the order rows are made in
    assert (compiled.tally.count, compiled.tally.first) == (python.tally.count, python.tally.first)
    assert (compiled.tally.coerced, compiled.tally.first_coerced) == (python.tally.coerced, python.tally.first_coerced)
    assert (compiled.tally.untracked, compiled.deferred) == (python.tally.untracked, python.deferred)
    assert compiled.evidence.keys() == python.evidence.keys()
    end = python.latest
    for tid, want in python.evidence.items():
        got = compiled.evidence[tid]
        for slot in Evidence.__slots__:
            assert _state(getattr(got, slot)) == _state(getattr(want, slot)), (tid, slot)
        assert classify(got, Thresholds(), log_end=end).to_json() == classify(want, Thresholds(), log_end=end).to_json()
    if python.kept is not None:
        assert compiled.kept is not None
        assert {t: (list(k.lines()), k.more, k.llm_ms) for t, k in compiled.kept.items()} == {
            t: (list(k.lines()), k.more, k.llm_ms) for t, k in python.kept.items()
        }


def _dumps(env: dict[str, Any]) -> bytes:
    """The emitter's compact layout; json, as orjson refuses integers past 64 bits."""
    return json.dumps(env, separators=(",", ":"), ensure_ascii=False).encode()


def _shaped(env: dict[str, Any], shape: int) -> bytes:
    raw = _dumps(env)
    match shape % 6:
        case 0 | 1:
            return PREFIX.encode() + raw
        case 2:
            return b"2026-11-21 10:00:00,123 INFO app: " + PREFIX.encode() + raw
        case 3:
            return JAVA_PREFIX.encode() + raw
        case 4:
            return raw
        case _:
            return docker_line(PREFIX + raw.decode(), 0.0).encode()


def _corpus() -> list[dict[str, Any]]:
    """The labelled scenarios of the diagnosis (``tools/eval_diagnose.py``)."""
    paths = sorted((ROOT / "tests" / "corpus").glob("*.jsonl"))
    return [json.loads(x) for p in paths for x in p.open() if x.strip()]


def test_the_labelled_corpus_folds_alike(monkeypatch: pytest.MonkeyPatch) -> None:
    lines = [b"noise before anything"]
    records = [
        json.loads(x) for p in sorted((ROOT / "tests" / "corpus").glob("*.jsonl")) for x in p.open() if x.strip()
    ]
    assert len(records) >= 250
    # Interleaved, as a CI log has them, in every shape.
    queues = [list(r["events"]) for r in records]
    n = 0
    while any(queues):
        for q in queues:
            if q:
                lines.append(_shaped(q.pop(0), n))
                n += 1
                if n % 7 == 0:
                    lines.append(b"INFO uvicorn.access 127.0.0.1 - GET /chat 200")
    log = b"\n".join(lines) + b"\n"
    compiled, python = _fold_both(log, monkeypatch, keep_lines=20)
    assert len(python.evidence) == len({r["events"][0]["test_id"] for r in records if r["events"]})
    # The Docker lines: the general parser reads them all in the Python fold; the compiled
    # fold reads those whose head says all itself, and hands it those with a body to read.
    assert 0 < compiled.parsed < python.parsed
    _assert_same(compiled, python)


def test_a_budget_that_defers_tests_folds_alike(monkeypatch: pytest.MonkeyPatch) -> None:
    log = b"".join(
        PREFIX.encode()
        + orjson.dumps(envelope("backend.sse.event", test_id=f"t{k % 9}", ts=f"2026-11-21T10:00:0{k % 10}.{k:03d}Z"))
        + b"\n"
        for k in range(60)
    )
    compiled, python = _fold_both(log, monkeypatch, keep_lines=5, budget=4)
    assert len(python.deferred) == 5
    _assert_same(compiled, python)


_BOUNDARIES = (
    "backend.request.ingress",
    "backend.sse.event",
    "backend.sse.first_byte",
    "backend.response.complete",
    "backend.sse.aborted",
    "backend.error.caught",
    "backend.llm.call.start",
    "backend.llm.call.response",
    "backend.agent.exit",
    "backend.tool.call.response",
    "probe.dom.firsttoken",
    "probe.exit",
    "aimock.request",
    "cvdiag.metadata_dropped",
    "custom.thing",
)
_TIMES = st.one_of(
    st.builds(
        lambda s, ms: f"2026-11-21T10:{s // 60:02d}:{s % 60:02d}.{ms:03d}Z",
        st.integers(0, 3599),
        st.integers(0, 999),
    ),
    st.sampled_from(
        [
            "2026-11-21T10:00:00.5Z",
            "2026-11-21T10:00:00.123456+00:00",
            "2026-11-21T10:00:00+02:00",
            "2026-11-21T10:00:00.123",
            "2026-13-01T00:00:00.000Z",
            "2026-02-29T00:00:00.000Z",
            "1969-12-31T23:59:59.999Z",
            "0001-01-01T00:00:00.000Z",
            "9999-12-31T23:59:59.999Z",
            "2026-11-21T10:00:00.12aZ",
            "not a time",
            "",
        ]
    ),
)
_MONO = st.one_of(st.integers(-(2**70), 2**70), st.integers(0, 10**12))
_ENVELOPE = st.fixed_dictionaries(
    {
        "test_id": st.sampled_from(["a", "b", "c", "ünï", "d e"]),
        "boundary": st.sampled_from(_BOUNDARIES),
        "layer": st.sampled_from(["backend", "probe", "aimock", "other", "edge"]),
        "slug": st.sampled_from(["s1", "s2", "s3", "s4", "s5", ""]),
        "ts": _TIMES,
        "mono_ns": _MONO,
        "outcome": st.sampled_from(["ok", "err", "timeout", "info"]),
        "duration_ms": st.one_of(st.none(), st.integers(0, 10**6)),
        "metadata": st.one_of(
            st.just({}),
            st.fixed_dictionaries(
                {
                    "http_status": st.sampled_from([200, 500, 502]),
                    "sse_event_count": st.integers(0, 5),
                    "termination_kind": st.sampled_from(["rst", "fin_clean", "timeout"]),
                    "latency_ms": st.floats(0, 1e4, allow_nan=False),
                    "error_type": st.sampled_from(["rate_limit", "server_error"]),
                }
            ),
        ),
        "edge": st.sampled_from([None, {"cf-ray": "abc-LHR"}, {"via": "1.1 edge"}, {"retry-after": "3"}]),
    }
)
_LINE = st.tuples(_ENVELOPE, st.integers(0, 11))


def _line(spec: dict[str, Any], how: int) -> bytes:
    md = spec["metadata"]
    env = envelope(
        spec["boundary"],
        test_id=spec["test_id"],
        layer=spec["layer"],
        slug=spec["slug"],
        ts=spec["ts"],
        mono_ns=spec["mono_ns"],
        outcome=spec["outcome"],
        duration_ms=spec["duration_ms"],
        metadata=md,
    )
    if spec["edge"]:
        env["edge_headers"] = {**env["edge_headers"], **spec["edge"]}
    if how < 6:
        return _shaped(env, how)
    raw = PREFIX.encode() + _dumps(env)
    match how:
        case 6:  # cut
            return raw[: len(raw) // 2]
        case 7:  # a trailing colour code
            return raw + b"\x1b[0m"
        case 8:  # a second outcome: JSON keeps the last, the head the first
            return raw[:-1] + b',"outcome":"err"}'
        case 9:  # metadata that is no object
            return raw.replace(b'"metadata":{', b'"metadata":[{', 1).replace(b'},"_metadata', b'}],"_metadata', 1)
        case 10:  # whitespace before the metadata
            return raw.replace(b'"metadata":', b'"metadata": ', 1)
        case _:
            return b"noise mentioning " + spec["test_id"].encode() + b" and CVDIAG in passing"


_MONO_PAST_INT64 = {
    "test_id": "a", "boundary": "backend.sse.event", "layer": "backend", "slug": "s1",
    "ts": "2026-11-21T10:00:00.000Z", "mono_ns": 2**70, "outcome": "ok",
    "duration_ms": None, "metadata": {}, "edge": None,
}  # fmt: skip


@settings(
    max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture]
)
@given(lines=st.lists(_LINE, min_size=1, max_size=40), keep=st.sampled_from([0, 3]))
@example(lines=[(_MONO_PAST_INT64, 0)], keep=3)
@example(  # a body read from its metadata alone: only where JSON reads every integer as one
    lines=[(_MONO_PAST_INT64, 0), ({**_MONO_PAST_INT64, "boundary": "backend.llm.call.start", "mono_ns": 1}, 0),
           ({**_MONO_PAST_INT64, "boundary": "backend.llm.call.start", "metadata": {"provider": "p"}}, 0)],
    keep=0,
)  # fmt: skip
def test_any_log_folds_alike(
    lines: list[tuple[dict[str, Any], int]], keep: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    log = b"\n".join(_line(spec, how) for spec, how in lines) + b"\n"
    compiled, python = _fold_both(log, monkeypatch, keep_lines=keep)
    _assert_same(compiled, python)


# -- wrapped lines: colour codes and Docker json-file read in C where certain --------------
_ESC = "\x1b"
_PLAIN_EVENT = envelope("backend.sse.event", test_id="w-1", ts="2026-11-21T10:00:01.000Z")
_BODY_EVENT = envelope(
    "backend.response.complete", test_id="w-1", ts="2026-11-21T10:00:02.000Z", metadata={"http_status": 200}
)
_LLM_EVENT = envelope(
    "backend.llm.call.response",
    test_id="w-1",
    ts="2026-11-21T10:00:03.000Z",
    outcome="ok",
    duration_ms=1250,
    metadata={"provider": "openai", "model": "gpt-4o-mini", "latency_ms": 1250, "output_chars": 42},
)
_EDGE_EVENT = {**_BODY_EVENT, "edge_headers": {**_BODY_EVENT["edge_headers"], "cf-ray": "8f1c2d3e4f5a6b7c-AMS"}}


def _docker(text: str, *, ascii_only: bool = False, stream: str = "stdout") -> bytes:
    """A Docker json-file record as Docker writes it (or with every non-ASCII code escaped)."""
    record = {"log": text + "\n", "stream": stream, "time": "2026-11-21T10:00:00.123456789Z"}
    return json.dumps(record, separators=(",", ":"), ensure_ascii=ascii_only).encode()


def _cv(env: dict[str, Any], prefix: str = PREFIX) -> str:
    return prefix + _dumps(env).decode()


#: (line, read in C): the C reads a wrapped line only where the general parser certainly
#: reads the same envelope; every other one goes to it, and both folds must agree.
_WRAPPED = [
    (f"{_ESC}[32mINFO{_ESC}[0m {_ESC}[2m{_cv(_PLAIN_EVENT)}{_ESC}[0m".encode(), True),
    (f"app: {_cv(_PLAIN_EVENT)}{_ESC}[0m{_ESC}[K   ".encode(), True),
    (f"app: {_cv(_PLAIN_EVENT, JAVA_PREFIX)}{_ESC}[0m".encode(), True),
    (f"{_cv(_PLAIN_EVENT)}{' ' * 60}".encode(), True),  # white space past the tail's room
    (_docker(_cv(_PLAIN_EVENT)), True),
    (_docker(f"{_ESC}[2m{_cv(_PLAIN_EVENT)}{_ESC}[0m"), True),  # colour codes in the record's text
    (_docker(_cv(_PLAIN_EVENT), stream="stderr"), True),
    (_docker("web-1  | " + _cv(_PLAIN_EVENT)), True),
    (_docker(_cv(_PLAIN_EVENT), ascii_only=True), True),
    # metadata to read: from the line, or from the record's text
    (f"{_ESC}[2m{_cv(_BODY_EVENT)}{_ESC}[0m".encode(), True),
    (_docker(_cv(_BODY_EVENT)), True),
    (_docker(f"{_ESC}[2m{_cv(_LLM_EVENT)}{_ESC}[0m"), True),  # a report adds its duration up
    # a body beyond the metadata, or something the general parser alone decides
    (f"{_ESC}[2m{_cv(_EDGE_EVENT)}{_ESC}[0m".encode(), False),
    (_docker(_cv(_EDGE_EVENT)), False),
    (f"{_ESC}[2m{_cv({**_PLAIN_EVENT, 'ts': '2026-11-21T10:00:01Z'})}{_ESC}[0m".encode(), False),
    (f"{_ESC}[2m{_cv({**_PLAIN_EVENT, 'mono_ns': 10**19})}{_ESC}[0m".encode(), False),
    (f"{_ESC}[2m{_cv({**_PLAIN_EVENT, 'metadata': {'x': 'ESC[0m'}}).replace('ESC', _ESC)}{_ESC}[0m".encode(), False),
    (_dumps(_PLAIN_EVENT) + f"{_ESC}[0m".encode(), False),  # bare JSON: no marker
    (f"{_ESC}[{_cv(_PLAIN_EVENT)}{_ESC}[0m".encode(), False),  # ESC [ C: a code that eats the marker
    (f"{_ESC}{_cv(_PLAIN_EVENT)}{_ESC}[0m".encode(), False),  # ESC C: likewise
    (f"CVD{_ESC}[0mIAG x {_cv(_PLAIN_EVENT)}{_ESC}[0m".encode(), False),  # a marker once the codes go
    (f'CVDIAG {{"x":1}} {_cv(_PLAIN_EVENT)}{_ESC}[0m'.encode(), False),  # an earlier marker
    (f"2026-11-21T10:00:00.1Z stdout F {_cv(_PLAIN_EVENT)}{_ESC}[0m".encode(), False),  # a CRI record
    (f"{{ {_cv(_PLAIN_EVENT)}{_ESC}[0m".encode(), False),  # Docker's brace
    (f"\ufeff{_cv(_PLAIN_EVENT)}{_ESC}[0m".encode(), False),  # a byte-order mark
    (f"{_cv(_PLAIN_EVENT)}{_ESC}[0}}".encode(), False),  # a code ending in a brace
    (f"{_cv(_PLAIN_EVENT)}{_ESC}[0m x".encode(), False),  # text after the codes
    (_docker(_cv(_PLAIN_EVENT)).replace(b'\\n","stream"', b'","stream"'), False),  # a partial record: no newline
    (_docker("é " + _cv(_PLAIN_EVENT)), False),  # non-ASCII text
    (_docker("\u00e9 " + _cv(_PLAIN_EVENT), ascii_only=True), False),  # an escape past 0x7f
    (_docker(_cv(_PLAIN_EVENT)).replace(b'"stream"', b'"strea\\u006d"'), False),  # another layout
    (_docker(_cv(_PLAIN_EVENT)).replace(b'","time":', b'","tim":'), False),
    (_docker(_dumps(_PLAIN_EVENT).decode()), False),  # bare JSON in the record
    (_docker("CVDIAG-svc | " + _cv(_PLAIN_EVENT)), False),  # a marker before the marker
    (_docker("1 " + _cv(_PLAIN_EVENT)), False),  # a digit first: maybe a CRI record
    (_docker(_cv(_PLAIN_EVENT))[:-1], False),  # cut
]


def test_wrapped_lines_are_read_in_c_only_where_certain(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each wrapped line alone: the same fold both ways, and the general parser asked only
    for the lines the C may not read itself (so the C reads what the benchmark log has)."""
    for line, in_c in _WRAPPED:
        log = b"noise\n" + line + b"\n"
        compiled, python = _fold_both(log, monkeypatch, keep_lines=3)
        _assert_same(compiled, python)
        assert compiled.parsed == (0 if in_c else python.parsed), line
        assert python.aggs or not in_c, line  # what C reads is an envelope


def test_a_wrapped_llm_answer_of_a_test_past_the_budget_keeps_its_duration(monkeypatch: pytest.MonkeyPatch) -> None:
    """A test past the evidence budget has no metadata handler to call: a report still adds
    its wrapped LLM answer's duration up, read from the whole body, the same both ways."""
    first = _cv({**_PLAIN_EVENT, "test_id": "w-0", "trace_id": "w-0"}).encode()
    for line in (f"{_ESC}[2m{_cv(_LLM_EVENT)}{_ESC}[0m".encode(), _docker(_cv(_LLM_EVENT))):
        compiled, python = _fold_both(first + b"\n" + line + b"\n", monkeypatch, keep_lines=3, budget=1)
        _assert_same(compiled, python)
        assert compiled.deferred == {b"w-1"} and compiled.parsed == python.parsed == 1
        assert compiled.kept is not None and compiled.kept[b"w-1"].llm_ms == 1250.0


class _AccountingBodies(Evidence):
    """Evidence that says an accounting line has a body to read (cvdiag's own says none)."""

    __slots__ = ()

    @staticmethod
    def needs_body(boundary: str) -> bool:
        return boundary.startswith("cvdiag.") or Evidence.needs_body(boundary)


def test_a_wrapped_body_the_metadata_path_may_not_read_goes_to_the_general_parser(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Only the metadata of a wrapped line is read from the record's text: a body it may
    not read that way (here an accounting line some evidence wants whole) is parsed by
    the general parser, never read at offsets of a text the pass's buffer does not hold."""
    dropped = envelope("cvdiag.metadata_dropped", test_id="w-1", ts="2026-11-21T10:00:04.000Z", metadata={"n": 1})
    log = _docker(_cv(dropped)) + b"\n" + _docker(_cv(_BODY_EVENT)) + b"\n"
    folds = []
    for c in (fold._CFOLD, None):
        with monkeypatch.context() as m:
            m.setattr(fold, "_CFOLD", c)
            folds.append(fold.Fold(_AccountingBodies))
            assert (folds[-1]._c is not None) == (c is not None)
            folds[-1].read([(log, "t.log", 0, len(log), 1, 0)], count=True)
    compiled, python = folds
    assert compiled.parsed == 1 and python.parsed == 2  # the accounting line alone
    assert (compiled.tally.count, compiled.tally.first) == (python.tally.count, python.tally.first) == (0, None)
    assert {t: a.row(t) for t, a in compiled.aggs.items()} == {t: a.row(t) for t, a in python.aggs.items()}


_WRAP_PIECES = st.sampled_from(
    ["", " ", "\t", "INFO ", "web-1  | ", "{", "7", "\ufeff", "CVDIAG", "CVD", "IAG ", "\r",
     f"{_ESC}[0m", f"{_ESC}[1;32m", f"{_ESC}[", f"{_ESC}", f"{_ESC}M", f"{_ESC}[0", f"{_ESC}[0}}", "}", "x"]
)  # fmt: skip


@settings(
    max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture]
)
@given(
    lines=st.lists(
        st.tuples(
            _LINE,
            st.lists(_WRAP_PIECES, max_size=4).map("".join),
            st.lists(_WRAP_PIECES, max_size=4).map("".join),
            st.sampled_from(["colour", "docker", "docker-ascii", "docker-colour"]),
        ),
        min_size=1,
        max_size=20,
    )
)
def test_any_wrapped_log_folds_and_counts_alike(
    lines: list[tuple[tuple[dict[str, Any], int], str, str, str]],
    monkeypatch: pytest.MonkeyPatch,
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    """Envelopes of any kind behind any mix of colour codes, markers, braces, digits and
    white space, bare or in a Docker record: both folds and both counts agree."""
    out = []
    for (spec, how), before, after, wrap in lines:
        text = before + _line(spec, how % 6).decode() + after
        if wrap == "colour":
            out.append(text.encode())
        else:
            text = f"{_ESC}[2m{text}{_ESC}[0m" if wrap == "docker-colour" else text
            out.append(_docker(text, ascii_only=wrap == "docker-ascii"))
    _fold_and_count_alike(b"\n".join(out) + b"\n", monkeypatch, tmp_path_factory.mktemp("wrapped"), keep_lines=3)


def test_a_head_with_bytes_past_ascii_is_read_as_the_python_fold_reads_it(monkeypatch: pytest.MonkeyPatch) -> None:
    """A plain line is folded from its head only when the head is ASCII (so valid UTF-8):
    one with a broken UTF-8 byte in a string is JSON orjson refuses, one with a real
    character is JSON it reads; either way both folds agree."""
    line = PREFIX.encode() + _dumps(_PLAIN_EVENT)
    for bad in (b"\xff", b"\xc3", "ü".encode()):
        for field in (b'"slug":"', b'"demo":"', b'"span_id":"', b'"test_id":"w-'):
            log = line.replace(field, field + bad, 1) + b"\n" + line + b"\n"
            compiled, python = _fold_both(log, monkeypatch)
            _assert_same(compiled, python)


def test_a_long_head_string_is_read_whole_wherever_its_odd_byte_is(monkeypatch: pytest.MonkeyPatch) -> None:
    """The compiled fold reads a head's strings sixteen bytes at a time: a byte past ASCII,
    a control character or an escape at any place of a long string, in a block or in
    the bytes after the last whole block, is seen as the byte-at-a-time loop sees it."""
    tid = "w-" + "0123456789abcdef" * 2 + "xyz"  # two whole blocks and a tail
    line = PREFIX.encode() + _dumps({**_PLAIN_EVENT, "test_id": tid})
    start = line.index(tid.encode())
    for odd in (b"\xff", "ü".encode(), b"\x01", b"\x1f", b"\\u0041", b"\\"):
        for at in range(len(tid) + 1):
            log = line[: start + at] + odd + line[start + at :] + b"\n" + line + b"\n"
            compiled, python = _fold_both(log, monkeypatch)
            _assert_same(compiled, python)


def test_a_marked_line_is_found_at_any_distance_from_the_last_envelope(monkeypatch: pytest.MonkeyPatch) -> None:
    """The compiled search tries the first bytes after a place by hand and hands the rest
    to memmem: a marker (of a malformed line, a wrapped one, a canonical head) anywhere
    around that hand-over, or cut by it, is found as the Python fold finds it."""
    plain = PREFIX.encode() + _dumps(_PLAIN_EVENT) + b"\n"
    body = PREFIX.encode() + _dumps(_BODY_EVENT) + b"\n"
    for marked in (b"CVDIAG {not json", b"x schema_version y", plain.rstrip(b"\n"), b"\x1b[2m" + plain.rstrip(b"\n")):
        for pad in range(200, 300, 3):
            gap = b"y" * pad + b" " + marked + b"\n"
            compiled, python = _fold_both(plain + gap + body + b"z" * pad + b"\n" + body, monkeypatch)
            _assert_same(compiled, python)


def test_the_compiled_fold_is_what_the_cli_runs(tmp_path: Path) -> None:
    """A fold made for ``Evidence`` takes the compiled path; a class without ``take_head`` does not."""

    class Recorder:
        def __init__(self, test_id: str) -> None:
            self.envelopes: list[dict[str, Any]] = []

        def add(self, env: dict[str, Any]) -> None:
            self.envelopes.append(env)

    assert fold.compiled()
    assert fold.Fold(Evidence)._c is not None and fold.Fold()._c is not None
    assert fold.Fold(Recorder)._c is None


def test_without_the_compiled_fold_a_big_input_says_so(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from cvdiag.face import _commands, cli

    log = tmp_path / "server.log"
    log.write_bytes(PREFIX.encode() + orjson.dumps(envelope("backend.response.complete", test_id="t-1")) + b"\n")
    monkeypatch.setattr(_commands, "_SLOW_NOTE_BYTES", 1)  # as if the log were big
    assert cli.main(["tests", str(log)]) == 0
    assert "compiled fold" not in capsys.readouterr().err
    monkeypatch.setattr(fold, "_CFOLD", None)
    assert cli.main(["tests", str(log)]) == 0
    out = capsys.readouterr()
    assert "t-1" in out.out
    assert "reading at Python speed (about 5x slower): the compiled fold is not built" in out.err
    monkeypatch.setenv("CVDIAG_COMPILED", "0")  # asked for: nothing to say
    assert cli.main(["tests", str(log)]) == 0
    assert "compiled fold" not in capsys.readouterr().err


def _stats_both(path: Path, monkeypatch: pytest.MonkeyPatch, max_rows: int = 10_000) -> tuple[Any, Any]:
    """(compiled, Python) of ``stats`` over ``path``: rows, latencies, folded, the tally's notes.

    The compiled count is also split between two processes, each counting a stretch of
    small blocks (so a stretch starts mid-file, past rows, malformed lines and the cap):
    it must give the one process's answer exactly."""

    def run(jobs: int = 1) -> Any:
        tally = Tally()
        found = count.collect(resolve_sources([str(path)]), tally, max_rows=max_rows, jobs=jobs)
        rows = found.boundary_rows()
        return rows, found.latency_rows(), found.folded, tally.note(), [list(r) for r in rows]

    compiled = run()
    with monkeypatch.context() as m:
        m.setattr(split, "PARALLEL_MIN_BYTES", 0)
        m.setattr(sources, "_FILE_BLOCK", 256)
        assert run(jobs=2) == compiled
    with monkeypatch.context() as m:
        m.setattr(fold, "_CFOLD", None)
        python = run()
    return compiled, python


def _fold_and_count_alike(data: bytes, monkeypatch: pytest.MonkeyPatch, folder: Path, *, keep_lines: int) -> None:
    """``data`` folded and counted (``stats``, from a file in ``folder``) both ways, alike."""
    compiled, python = _fold_both(data, monkeypatch, keep_lines=keep_lines)
    _assert_same(compiled, python)
    path = folder / "both.log"
    path.write_bytes(data)
    counted, read = _stats_both(path, monkeypatch)
    assert counted == read


def test_stats_counts_alike(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The labelled corpus in every shape, and the every-shape log of the CLI tests."""
    records = [
        json.loads(x) for p in sorted((ROOT / "tests" / "corpus").glob("*.jsonl")) for x in p.open() if x.strip()
    ]
    log = tmp_path / "corpus.log"
    log.write_bytes(b"\n".join(_shaped(e, n) for n, e in enumerate(e for r in records for e in r["events"])) + b"\n")
    compiled, python = _stats_both(log, monkeypatch)
    assert compiled == python
    assert sum(r["count"] for r in python[0]) > 1_500 and python[1]  # rows and latencies to compare
    for path in sorted((ROOT / "tests" / "data" / "logs").glob("*.log*")):
        compiled, python = _stats_both(path, monkeypatch)
        assert compiled == python, path.name
    compiled, python = _stats_both(log, monkeypatch, max_rows=7)  # rows past the cap, in file order
    assert python[2] > 0 and compiled == python


def test_stats_in_two_processes_merge_past_the_cap_as_one_process_counts(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The first stretch fills the rows and folds the rest under (others); the second meets
    a pair of each kind (a row, one the first folded, one new) and folds none itself: the
    merge (not the count again in one process) gives the one process's rows, latencies
    and folded count."""
    early = [("a", "backend.response.complete"), ("b", "backend.sse.event"), ("c", "backend.sse.event")]
    folded = [("d", "backend.response.complete"), ("e", "backend.sse.event")]
    late = [("a", "backend.response.complete"), ("d", "backend.response.complete"), ("f", "backend.sse.event")]

    def line(slug: str, boundary: str, n: int) -> bytes:
        env = envelope(boundary, test_id=f"t-{n}", slug=slug, metadata={"total_duration_ms": 10 + n})
        return PREFIX.encode() + _dumps(env) + b"\n"

    first = b"".join(line(s, b, n) for n, (s, b) in enumerate(early + folded))
    second = b"".join(line(s, b, n) for n, (s, b) in enumerate(late * 2))
    path = tmp_path / "two.log"
    path.write_bytes(first + b"x" * (len(second) - len(first) - 1) + b"\n" + second)  # second: the later half
    monkeypatch.setattr(count, "_read", lambda *a: pytest.fail("counted again in one process"))
    monkeypatch.setattr(split, "PARALLEL_MIN_BYTES", 0)
    monkeypatch.setattr(sources, "_FILE_BLOCK", 256)
    merged = count.collect(resolve_sources([str(path)]), Tally(), max_rows=3, jobs=2)
    monkeypatch.undo()
    one = count.collect(resolve_sources([str(path)]), Tally(), max_rows=3)
    assert [r["slug"] for r in one.boundary_rows()] == ["(others)", "a", "b", "c"]
    assert one.folded == 2 + 4 and [r["count"] for r in one.latency_rows()] == [3]
    assert (merged.boundary_rows(), merged.latency_rows(), merged.folded) == (
        one.boundary_rows(),
        one.latency_rows(),
        one.folded,
    )


@settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture]
)
@given(lines=st.lists(_LINE, min_size=1, max_size=40), max_rows=st.sampled_from([3, 10_000]))
@example(lines=[(_MONO_PAST_INT64, 0)], max_rows=3)  # JSON reads it as a float: hits_in calls the line malformed
def test_stats_of_any_log_count_alike(
    lines: list[tuple[dict[str, Any], int]], max_rows: int, tmp_path_factory: pytest.TempPathFactory
) -> None:
    log = tmp_path_factory.mktemp("stats") / "any.log"
    log.write_bytes(b"\n".join(_line(spec, how) for spec, how in lines) + b"\n")
    with pytest.MonkeyPatch.context() as monkeypatch:
        compiled, python = _stats_both(log, monkeypatch, max_rows)
    assert compiled == python


_JSON = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**70), 2**70) | st.floats(allow_nan=False) | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=6), inner, max_size=4),
    max_leaves=12,
)


@settings(max_examples=500, deadline=None)
@given(
    value=st.dictionaries(st.text(max_size=6), _JSON, max_size=5), cut=st.integers(0, 64), junk=st.binary(max_size=3)
)
def test_what_the_compiled_check_takes_for_an_object_orjson_reads_as_one(value: dict, cut: int, junk: bytes) -> None:
    """The compiled fold proves a plain line's metadata with its own strict reading, and
    asks orjson only when that one is unsure: it must never take what orjson refuses."""
    text = json.dumps(value, ensure_ascii=cut % 2 == 0).encode()
    for candidate in (
        text,
        text[:cut] + junk + text[cut:],
        text[:cut],
        b" " + text + b"\t",
        text.replace(b":", b" : "),
    ):
        if fold._CFOLD.certainly_object(candidate):
            assert type(orjson.loads(candidate)) is dict, candidate


def test_the_emitters_metadata_needs_no_orjson() -> None:
    for md in (
        b"{}",
        b'{"event_index":12,"bytes":240,"event_type":"message"}',
        b'{"a":[1,2.5,{"b":null}],"c":"x\\"y"}',
    ):
        assert fold._CFOLD.certainly_object(md), md
    for md in (b"[]", b'{"a":1,}', b'{"a":01}', b'{"a":1e999}', b'{"a":"\\ud800"}', b'{"a":1} x'):
        assert not fold._CFOLD.certainly_object(md), md


def _sample_lines(size: int = 60_000) -> list[bytes]:
    """About ``size`` bytes of real lines of every shape the benchmark log has, the emitter's most of all."""
    import random
    import sys

    sys.path.insert(0, str(ROOT / "tools"))
    from make_big_log import generate  # type: ignore[import-not-found]

    class Sink:
        def __init__(self) -> None:
            self.text: list[str] = []

        def write(self, text: str) -> int:
            self.text.append(text)
            return len(text)

    sink = Sink()
    random.seed(7)
    generate(sink, size)
    return "".join(sink.text).encode().splitlines()


_SAMPLE = _sample_lines() if fold._CFOLD is not None else []


def _edited(data: bytes, edits: list[tuple[int, int, int]], *, cut_end: bytes = b"") -> bytes:
    """``data`` with each edit (where, how, byte) made in turn: a byte replaced, inserted or
    deleted, or everything from there cut (and ``cut_end`` put after the cut)."""
    out = bytearray(data)
    for at, how, byte in edits:
        if not out:
            break
        at %= len(out)
        if how == 0:
            out[at] = byte
        elif how == 1:
            out.insert(at, byte)
        elif how == 2:
            del out[at]
        else:
            del out[at:]
            out += cut_end
    return bytes(out)


_EDIT = st.tuples(st.integers(0, 10**6), st.integers(0, 3), st.sampled_from(b'"\\{}[],:\n\x00\xff\xc3 0-9eE'))


@settings(
    max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture]
)
@given(picks=st.lists(st.integers(0, 10**6), min_size=1, max_size=30), edits=st.lists(_EDIT, max_size=8))
def test_lines_with_any_bytes_changed_fold_and_count_alike(
    picks: list[int], edits: list[tuple[int, int, int]], tmp_path_factory: pytest.TempPathFactory
) -> None:
    """Bytes changed anywhere (quotes, escapes, braces, NUL, bad UTF-8, digits) in real
    lines: the compiled code never crashes, and says what the Python code says."""
    log = _edited(b"\n".join(_SAMPLE[p % len(_SAMPLE)] for p in picks) + b"\n", edits, cut_end=b"\n")
    with pytest.MonkeyPatch.context() as monkeypatch:
        _fold_and_count_alike(log, monkeypatch, tmp_path_factory.mktemp("fuzz"), keep_lines=4)


def test_a_pass_left_unfinished_is_collected(tmp_path: Path) -> None:
    """The compiled folder holds bound methods of its pass: the collector must see the cycle."""
    import gc
    import weakref

    log = tmp_path / "server.log"
    log.write_bytes(PREFIX.encode() + orjson.dumps(envelope("backend.response.complete", test_id="t-1")) + b"\n")
    unfinished = fold.Fold(Evidence)
    unfinished.buffer(log.read_bytes(), "server.log")  # an error before finish() leaves it so
    refs = [weakref.ref(unfinished), weakref.ref(count.collect(resolve_sources([str(log)]), Tally()))]
    del unfinished
    gc.collect()
    assert [r() for r in refs] == [None, None]


def test_history_results_alike(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``history add``'s facts beyond the rows (LLM time, tokens, tool failures, the
    plugin's node id) read through the compiled count as through ``hits_in``."""
    from cvdiag.history.record import tests_of

    events = [e for r in _corpus() for e in r["events"]]
    nodes = [
        envelope("probe.start", test_id=e["test_id"], metadata={"url": f"tests/test_x.py::test_{n}"})
        for n, e in enumerate(events[::40])
    ]
    log = tmp_path / "ci.log"
    log.write_bytes(b"\n".join(_shaped(e, n) for n, e in enumerate(nodes + events)) + b"\n")
    compiled, _ = tests_of(resolve_sources([str(log)]), "run-1")
    monkeypatch.setattr(fold, "_CFOLD", None)
    python, _ = tests_of(resolve_sources([str(log)]), "run-1")
    assert compiled == python
    assert sum(r.tokens or 0 for r in python) > 0 and sum("::" in r.name for r in python) > 5
    assert sum(r.llm_ms is not None for r in python) > 20 and sum(r.tool_failures for r in python) > 0


class _Text(str):
    """A str subclass: passes ``_text`` but is no exact str, so the shortcut must defer."""


_ANY = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(2**70), 2**70),
    st.sampled_from([float("inf"), float("-inf"), float("nan"), 1.5, -0.0]),
    st.text(max_size=3),
    st.builds(_Text, st.text(max_size=3)),
    st.binary(max_size=2),
    st.just({}),
    st.dictionaries(st.sampled_from(["cf-ray", "via"]), st.one_of(st.none(), st.text(max_size=2), st.integers())),
    st.lists(st.integers(), max_size=2),
)
_LOOSE_NAMES = ("trace_id", "span_id", "parent_span_id", "slug", "demo", "duration_ms", "edge_headers",
                "_metadata_dropped", "_truncated")  # fmt: skip


@settings(max_examples=1000, deadline=None)
@given(fields=st.dictionaries(st.sampled_from(_LOOSE_NAMES), _ANY))
def test_coerce_with_and_without_the_compiled_shortcut_agree(fields: dict[str, Any]) -> None:
    import copy

    from cvdiag.read import parsing

    env = {**envelope("backend.sse.event"), **fields}
    for name in _LOOSE_NAMES:
        if name not in fields and name in env and len(fields) % 2:
            del env[name]  # absent fields stay absent
    want = copy.deepcopy(env)
    shortcut = parsing._untouched
    try:
        parsing._untouched = None
        want = parsing.coerce(want)
    finally:
        parsing._untouched = shortcut
    assert parsing.coerce(copy.deepcopy(env)) == want


def test_the_cli_recycles_the_blocks_it_reads_instead_of_faulting_in_fresh_pages(tmp_path: Path) -> None:
    """glibc maps each 4 MB block afresh unless told otherwise: three page faults for every
    page of the file (the read, the carried line, the cut). The CLI has the allocator keep
    big blocks, so reading 128 MB faults in few more pages than the process uses."""
    import resource
    import subprocess

    from cvdiag.read._compiled import CFOLD

    if CFOLD is None:
        pytest.skip("the compiled module is not built")
    lines, _ = every_shape()
    chunk = ("\n".join(lines) + "\n").encode()
    size = 128 << 20
    with open(tmp_path / "big.log", "wb") as fh:
        fh.write(chunk * (size // len(chunk) + 1))
    before = resource.getrusage(resource.RUSAGE_CHILDREN).ru_minflt
    done = subprocess.run(
        [sys.executable, "-m", "cvdiag", "stats", "-j1", str(tmp_path / "big.log")], capture_output=True
    )
    faults = resource.getrusage(resource.RUSAGE_CHILDREN).ru_minflt - before
    assert done.returncode == 0, done.stderr
    assert faults < 0.75 * size / 4096, faults  # 43,600 when every block was mapped afresh; about 11,300 now


def test_reading_a_file_keeps_memory_to_a_few_blocks(tmp_path: Path) -> None:
    """Each block the compiled read makes fits the hole the one before it left: reading
    160 MB of lines of any length grows the peak RSS by a few blocks, not by a heap of
    holes (47 MB here, 200 MB over a 1 GB log, when each block had its own size and was
    shrunk by realloc)."""
    import random
    import subprocess

    if not os.path.exists("/proc/self/status"):
        pytest.skip("the peak RSS is read from /proc")
    path = tmp_path / "big.log"
    longest = b"CVDIAG " + b"x" * 3000
    lengths = random.Random(7)
    with open(path, "wb") as fh:
        fh.writelines(longest[: lengths.randrange(50, 3000)] + b"\n" for _ in range(110_000))
    probe = (  # the process's own peak: ru_maxrss starts at its parent's (this pytest) on Linux
        "import re, sys\n"
        "from cvdiag.read.sources import resolve_sources, reuse_block_memory\n"
        "peak = lambda: int(re.search(r'VmHWM:\\s+(\\d+)', open('/proc/self/status').read())[1])\n"
        "reuse_block_memory()\n"
        "before = peak()\n"
        "n = sum(len(b) for b in resolve_sources([sys.argv[1]])[0].blocks())\n"
        "print(n, peak() - before)\n"
    )
    done = subprocess.run([sys.executable, "-c", probe, str(path)], capture_output=True, text=True, check=True)
    read, grown_kb = map(int, done.stdout.split())
    assert read == path.stat().st_size > 150 << 20
    assert grown_kb < 20 << 10, grown_kb  # about 6 MB


_PIECES = [  # plain lines, a long one, and Docker records: whole, and partial (its line goes on in the next)
    b"\n",
    b"ab",
    b"x" * 40,
    docker_line("CVDIAG end", 0.0).encode() + b"\n",
    b'{"log":"CVDIAG part","stream":"stdout","time":"2026-11-21T10:00:00.123456789Z"}\n',
]


@given(
    data=st.lists(st.sampled_from(_PIECES), max_size=40).map(b"".join),
    read_size=st.integers(1, 90),
    max_line=st.sampled_from([20, 100, 8 << 20]),
)
@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
def test_a_file_is_cut_into_the_same_blocks_read_in_c_or_in_python(
    data: bytes, read_size: int, max_line: int, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The compiled read (the chunk read into the block itself, cut after its last
    newline) gives the blocks the Python read and cut give: lines longer than the cap
    skipped to their end, split container lines never cut between their records."""
    from cvdiag.read import _compiled

    path = tmp_path / "cut.log"
    path.write_bytes(data)

    def blocks() -> list[bytes]:
        src = sources.Source(str(path), str(path))
        with open(path, "rb") as fh:
            return list(src._file_blocks(fh, len(data), read_size))

    with monkeypatch.context() as m:
        m.setattr(sources, "MAX_LINE", max_line)
        compiled = blocks()
        m.setattr(_compiled, "CFOLD", None)
        python = blocks()
    assert compiled == python
    assert b"".join(python) == data or max_line < 8 << 20  # nothing lost but the over-long lines


@pytest.mark.parametrize("compiled", [True, False], ids=["c", "python"])
def test_a_line_is_kept_up_to_the_cap_and_skipped_past_it(
    compiled: bool, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Read a byte at a time, a line of exactly ``MAX_LINE`` bytes is kept whole and one
    byte more makes it the placeholder, the lines around it untouched (both reads share
    the cut, so this pins the cap itself)."""
    from cvdiag.read import _compiled
    from cvdiag.read.parsing import PLACEHOLDER_LONG

    path = tmp_path / "cap.log"
    path.write_bytes(b"a\n" + b"x" * 20 + b"\n" + b"y" * 21 + b"\nb\n")
    monkeypatch.setattr(sources, "MAX_LINE", 20)
    if not compiled:
        monkeypatch.setattr(_compiled, "CFOLD", None)
    src = sources.Source(str(path), str(path))
    with open(path, "rb") as fh:
        text = b"".join(src._file_blocks(fh, path.stat().st_size, 1))
    assert text == b"a\n" + b"x" * 20 + b"\n" + PLACEHOLDER_LONG + b"\nb\n"


@given(st.binary(max_size=300) | st.lists(st.sampled_from([b"\n", b"ab", b"\r\n", b"\x00"]), max_size=50).map(b"".join))
@settings(max_examples=300, deadline=None)
def test_lines_are_counted_as_bytes_count_counts_them(data: bytes) -> None:
    """The line numbers of every block come from the compiled count of newlines."""
    from cvdiag.read.scan import newlines

    assert newlines(data) == data.count(b"\n")
    assert newlines(memoryview(data)[1:]) == data[1:].count(b"\n")


def _fold_windows_both(
    windows: list[tuple[bytes, int]], monkeypatch: pytest.MonkeyPatch, *, keep_lines: int
) -> tuple[fold.Fold, fold.Fold]:
    """``windows`` (a buffer and its block's number each) folded by both folds."""
    folds = []
    for compiled in (True, False):
        with monkeypatch.context() as m:
            if not compiled:
                m.setattr(fold, "_CFOLD", None)
            f = fold.Fold(Evidence, keep_lines=keep_lines)
            assert (f._c is not None) == compiled
            f.read([(buf, "t.log", 0, len(buf), 1, block) for buf, block in windows], count=True)
            folds.append(f)
    return folds[0], folds[1]


@settings(
    max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture]
)
@given(
    picks=st.lists(st.integers(0, 10**6), min_size=1, max_size=60),
    cuts=st.lists(st.integers(0, 60), max_size=6),
    blocks=st.lists(st.integers(0, 2**31 + 2) | st.sampled_from([0, 1, 2**31 - 1, 2**31]), min_size=7, max_size=7),
    keep=st.sampled_from([1, 4, 1_000]),
)
def test_places_in_blocks_numbered_any_way_are_kept_alike(
    picks: list[int], cuts: list[int], blocks: list[int], keep: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The compiled fold packs each place told from the one before (its block, its start
    after the last end). Over buffers numbered forwards, backwards, the same twice in a
    row (a start before the last end) or past an int32 (counted, not kept), the places
    read back as the Python fold keeps them, and the counts past ``keep`` agree."""
    lines = [_SAMPLE[p % len(_SAMPLE)] + b"\n" for p in picks]
    bounds = sorted({0, len(lines), *(c % (len(lines) + 1) for c in cuts)})
    windows = [(b"".join(lines[a:b]), blocks[k]) for k, (a, b) in enumerate(itertools.pairwise(bounds))]
    compiled, python = _fold_windows_both(windows, monkeypatch, keep_lines=keep)
    _assert_same(compiled, python)


def test_a_report_keeps_a_place_in_a_few_bytes(monkeypatch: pytest.MonkeyPatch) -> None:
    """A report keeps where every envelope of every test is until its pass ends: packed,
    the benchmark's lines take under 5 bytes a place (three int32s took 12)."""
    log = b"\n".join(_SAMPLE) + b"\n"
    half = log.index(b"\n", len(log) // 2) + 1
    compiled, python = _fold_windows_both([(log[:half], 0), (log[half:], 1)], monkeypatch, keep_lines=1_000)
    _assert_same(compiled, python)
    places = sum(len(k.lines()) // 3 for k in compiled.kept.values())
    packed = sum(len(k.places) for k in compiled.kept.values())
    assert places > 50 and packed / places < 5, (packed, places)
    some = next(k.places for k in compiled.kept.values() if k.places)
    with pytest.raises(ValueError, match="cut short"):  # never from a folder, but said plainly
        fold._CFOLD.unpack_places(some[:-1])


def test_the_tests_taken_from_a_compiled_pass_share_their_layers_and_end_it() -> None:
    """``take`` hands a test's memory back as it goes: tests that met the same layers share
    one frozenset of them, and once one test is taken the pass folds no more lines (its
    slots are being handed back), nor is a test taken twice."""
    envs = [env for i in range(3) for env in happy(f"t-{i}", start=i)]
    log = b"".join(PREFIX.encode() + orjson.dumps(env) + b"\n" for env in envs)
    f = fold.Fold(Evidence)
    f.buffer(log, "t.log")
    c = f._c
    f._c = None  # taken here, by hand
    aggs = [c.take(slot).agg for slot in range(3)]
    assert [agg.layers for agg in aggs] == [{e["layer"].encode() for e in happy()}] * 3
    assert aggs[0].layers is aggs[1].layers is aggs[2].layers and isinstance(aggs[0].layers, frozenset)
    with pytest.raises(IndexError, match="already taken"):
        c.take(0)
    with pytest.raises(RuntimeError, match="tests were taken"):
        c.buffer(log, 0, len(log), 0, print, print, print, print, [])


_NAME = st.binary(max_size=6) | st.sampled_from([b"backend", b"probe", b"aimock", b"harness", b"\xc3", b"\xa9"])


@settings(max_examples=500, deadline=None)
@given(slugs=st.lists(_NAME, max_size=4), layers=st.sets(_NAME, min_size=1, max_size=5), frozen=st.booleans())
def test_a_rows_slug_and_layers_read_as_each_name_decoded_alone(
    slugs: list[bytes], layers: set[bytes], frozen: bool
) -> None:
    """A row's slug is the test's slugs joined and then decoded (a comma ends any broken
    UTF-8 sequence), and its layers' order is worked out once per set of them: both as
    each name decoded alone, then joined and ordered, whether the Python fold's set or
    the compiled fold's shared frozenset holds them."""
    from cvdiag.contract.schema import LAYERS

    agg = fold.Agg(b"2026-11-21T10:00:00.000Z")
    agg.slugs, agg.layers = slugs, frozenset(layers) if frozen else set(layers)
    names = {x.decode("utf-8", "replace") for x in layers}
    row = agg.row(b"t-1")
    assert row["slug"] == ",".join(s.decode("utf-8", "replace") for s in slugs)
    assert row["layers"] == [x for x in LAYERS if x in names] + sorted(names - set(LAYERS))
    row["layers"].append("mine")  # each row its own list
    assert agg.row(b"t-1")["layers"] == [x for x in LAYERS if x in names] + sorted(names - set(LAYERS))


@settings(max_examples=300, deadline=None)
@given(
    when=st.datetimes(min_value=datetime(1, 1, 1), max_value=datetime(9999, 12, 31, 23, 59, 59)),
    text=st.text(alphabet="0123456789-T:.Z+_ 1٣", min_size=20, max_size=26),
)
@example(when=datetime(1970, 1, 1), text="2023-02-29T00:00:00.000Z")  # no such day
@example(when=datetime(2024, 2, 29, 23, 59, 59, 999000), text="0000-01-01T00:00:00.000Z")  # no year 0
@example(when=datetime(2026, 11, 28), text="2026-11-28T12:00:01.1_3Z")  # int() reads 1_3; no emitter wrote it
def test_an_emitter_timestamp_is_read_in_one_call_as_ts_seconds_reads_it(when: datetime, text: str) -> None:
    """``fold.seconds`` reads an emitter timestamp in one compiled call: the same float as
    ``ts_seconds`` for every real UTC time, and any other text is left to ``ts_seconds``."""
    ts = when.strftime("%Y-%m-%dT%H:%M:%S.") + f"{when.microsecond // 1000:03d}Z"
    ts = "0" * (24 - len(ts)) + ts  # a year before 1000, as the emitters write it
    assert fold._CFOLD.emitter_seconds(ts) == timestamps.ts_seconds(ts) == fold.seconds(ts)
    said = fold._CFOLD.emitter_seconds(text)
    try:
        expected = timestamps.ts_seconds(text)
    except ValueError:
        assert said is None
        return
    assert said is None or said == expected
    assert fold.seconds(text) == expected


@settings(max_examples=200, deadline=None)
@given(
    triples=st.lists(
        st.tuples(st.integers(0, 3) | st.integers(0, 2**31 - 1), st.integers(0, 2**31 - 1), st.integers(0, 2**31 - 1)),
        max_size=40,
    ),
    before=st.sets(st.integers(0, 3), max_size=3),
)
def test_the_places_of_a_test_shown_are_filed_by_block_as_the_python_loop_files_them(
    triples: list[tuple[int, int, int]], before: set[int]
) -> None:
    """A report files the lines of each test it shows under their block, one compiled call a
    test (``place_lines``): the same lists, in the same order, as the Python loop, into a
    dict that may hold other tests' blocks already."""
    lines = memoryview(array("i", [x for t in triples for x in t])).cast("B").cast("i")
    compiled: dict[int, list] = {b: [(0, 0, "other")] for b in before}
    python: dict[int, list] = {b: [(0, 0, "other")] for b in before}
    tag = object()
    assert fold._CFOLD.place_lines(lines, compiled, tag) == _diagnosing._each_place(lines, python, tag) == len(triples)
    assert compiled == python
