"""The compiled reader of a report's events (``_cfold.Folder.event``) against the general
parser and ``report_data._encode``: for every line it takes, the very bytes the Python
path writes, the names numbered alike; every line it leaves (``None``) goes to that path.

The lines are those the compiled fold is checked with (``test_compiled_fold``): envelopes
odd on purpose in every shape, wrapped lines, and real lines with bytes changed.
"""

from __future__ import annotations

import copy
import re
from typing import Any

import orjson
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from logkit import docker_line
from test_compiled_fold import (
    _EDIT,
    _LINE,
    _MONO_PAST_INT64,
    _SAMPLE,
    _WRAPPED,
    _dumps,
    _edited,
    _line,
    _sample_lines,
)

from cvdiag.contract.schema import JAVA_PREFIX, PREFIX
from cvdiag.face import report_data
from cvdiag.read import fold
from cvdiag.read.jsonout import dumps
from cvdiag.read.parsing import ENVELOPE, parse_span
from cvdiag.read.sources import resolve_sources
from cvdiag.testing import envelope

pytestmark = pytest.mark.skipif(fold._CFOLD is None, reason="the compiled fold is not built")


def _both(line: bytes, t0_ms: int, slug: str, strings: report_data.Strings) -> tuple[Any, Any, list[str]]:
    """(the compiled event or None, the Python path's event or None, the names the
    compiled reader's copy of ``strings`` ends with) of one line; ``strings`` numbers
    the Python path's names."""
    buf = b"noise\n" + line + b"\nmore noise"  # a line inside a buffer, as a report reads it
    ls, le = 6, 6 + len(line)
    own = copy.deepcopy(strings)
    compiled = report_data._plain_events().event(buf, ls, le, t0_ms, slug.encode(), own)
    kind, env, _ = parse_span(buf, ls, le)
    python = None
    if kind == ENVELOPE:
        try:
            python = report_data._encode(env, t0_ms, slug, strings)
        except (ValueError, TypeError, OverflowError):  # an envelope the page cannot draw: _TestEvents counts it
            python = None
    return compiled, python, own.table


def _assert_alike(lines: list[bytes], t0_ms: int = 1_795_770_000_000, slug: str = "s1") -> int:
    """Each line read both ways, the same bytes and names; how many the compiled reader took."""
    strings = report_data.Strings()
    taken = 0
    for line in lines:
        compiled, python, names = _both(line, t0_ms, slug, strings)
        if compiled is not None:
            assert (compiled, names) == (python, strings.table), line
            taken += 1
    return taken


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    lines=st.lists(_LINE, min_size=1, max_size=20),
    t0_ms=st.integers(-(10**13), 10**13),
    slug=st.sampled_from(["s1", "s2", "", "ünï"]),
)
@example(lines=[(_MONO_PAST_INT64, 0)], t0_ms=0, slug="s1")
def test_any_line_is_encoded_as_the_general_parser_reads_it(
    lines: list[tuple[dict[str, Any], int]], t0_ms: int, slug: str
) -> None:
    _assert_alike([_line(spec, how) for spec, how in lines], t0_ms, slug)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(picks=st.lists(st.integers(0, 10**6), min_size=1, max_size=10), edits=st.lists(_EDIT, max_size=6))
def test_real_lines_with_any_bytes_changed_are_encoded_alike(
    picks: list[int], edits: list[tuple[int, int, int]]
) -> None:
    lines = [_edited(_SAMPLE[p % len(_SAMPLE)], edits[n % 2 :: 2]).replace(b"\n", b" ") for n, p in enumerate(picks)]
    _assert_alike(lines)


def _variants() -> list[bytes]:
    """The emitter's line with each field the event's ``rest`` may leave out set otherwise."""
    metadata = {"http_status": 200, "latency_ms": 1.5, "text": "é \u2028 </script>"}
    env = envelope(
        "backend.llm.call.response", test_id="t-1", slug="s1", ts="2026-11-21T10:00:01.234Z", duration_ms=12,
        metadata=metadata,
    )  # fmt: skip
    raw = _dumps(env)
    return [
        PREFIX.encode() + raw,
        PREFIX.encode() + raw.replace(b'"trace_id":"t-1"', b'"trace_id":"t-10"'),  # the test id and more
        PREFIX.encode() + raw.replace(b'"parent_span_id":null', b'"parent_span_id":"00000000000000aa"'),
        PREFIX.encode() + raw.replace(b'"slug":"s1"', b'"slug":"s12"'),
        PREFIX.encode() + raw.replace(b'"duration_ms":12', b'"duration_ms":-0'),
        PREFIX.encode() + raw.replace(b'"duration_ms":12', b'"duration_ms":null'),
        PREFIX.encode() + re.sub(rb'"mono_ns":\d+', b'"mono_ns":-0', raw),
        PREFIX.encode() + re.sub(rb'"mono_ns":\d+', b'"mono_ns":-123456789012345678', raw),
        PREFIX.encode() + raw.replace(b'"latency_ms":1.5', b'"latency_ms":1.50,"latency_ms":2'),  # the last kept
        b"2026-11-21 10:00:01,234 INFO app: " + PREFIX.encode() + raw,
        b"\x1b[32mINFO\x1b[0m " + PREFIX.encode() + raw,  # colour codes: the general parser's
        b"CVD\x1b[0mIAG component=backend test_id=t-1 " + PREFIX.encode() + raw,  # a breadcrumb once they go
        JAVA_PREFIX.encode() + raw,
        JAVA_PREFIX.encode() + raw.replace(b'"text":"', b'"text":"CVDIAG {'),  # an earlier reading to try: not taken
        raw,  # a bare envelope
        raw.replace(b'"text":"', b'"text":"CVDIAG component=x '),  # a marker in it: not taken
        docker_line(PREFIX + raw.decode(), 0.0).encode(),  # text past ASCII: the general parser's
        docker_line(PREFIX + raw.decode().replace("é", "e").replace("\u2028", " "), 0.0).encode(),
    ]


def test_each_field_the_rest_may_leave_out_is_written_as_the_python_path_writes_it() -> None:
    lines = _variants()
    taken = [_assert_alike([line]) for line in lines]
    assert taken == [1] * 10 + [0, 0, 1, 0, 1, 0, 0, 1], taken


def test_the_lines_of_the_benchmark_log_are_nearly_all_taken() -> None:
    """The emitter's own lines, Java's prefix and Docker's records of them: all taken;
    what is left is colour codes (read by the general parser)."""
    marked = [line for line in _sample_lines(3_000_000) if b"CVDIAG" in line]
    taken = _assert_alike(marked)
    assert len(marked) > 1000 and taken > 0.95 * len(marked), (taken, len(marked))
    coloured = [line for line in marked if b"\x1b" in line]
    assert _assert_alike(coloured) == 0  # left to the general parser, as documented


def test_wrapped_lines_are_taken_only_in_the_shapes_it_knows() -> None:
    """Of the wrapped lines, the Docker records of the emitter's line (either stream,
    escaped or not, whatever its metadata); no colour codes, no compose prefix."""
    taken = [i for i, (line, _) in enumerate(_WRAPPED) if _assert_alike([line])]
    assert taken == [4, 6, 8, 10], taken


@pytest.mark.parametrize("stream", ["stdout", "stderr"])
def test_the_records_of_a_split_line_read_as_one_are_encoded_alike(stream: str) -> None:
    """A line a container runtime split, read whole (the place a report keeps spans its
    records): wherever the cut falls, in Docker's records or CRI's, the compiled reader
    leaves it or writes what the general parser reads from the records joined."""
    from test_cli_split_lines import cri_records, cuts, docker_records

    env = envelope("backend.llm.response", test_id="t-split", metadata={"text": "é€ " * 40, "n": 7})
    line = PREFIX.encode() + orjson.dumps(env)
    assert _assert_alike([line]) == 1  # whole, it is taken
    spans = [
        b"\n".join(records(line, cuts(line, cut), stream=stream))
        for records in (docker_records, cri_records)
        for cut in range(1, len(line), 7)
    ]
    assert _assert_alike(spans) == 0  # none is taken: the records' own framing breaks the JSON


def test_a_report_is_the_same_with_and_without_the_compiled_reader(
    tmp_path: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The whole document, built over real lines of every shape, both ways."""
    log = tmp_path / "app.log"
    log.write_bytes(b"\n".join(_sample_lines(1_000_000)) + b"\n")
    with_c = report_data.build(resolve_sources([str(log)]), all_tests=True)
    monkeypatch.setattr(report_data, "_plain_events", lambda: None)
    without = report_data.build(resolve_sources([str(log)]), all_tests=True)
    for doc in (with_c, without):
        doc["meta"].pop("generated")
        for d in doc["details"]:  # sent joined in one or one by one: the page writes them alike
            d["events"] = b",".join(d["events"])
    assert sum(len(orjson.loads(b"[" + d["events"] + b"]")) for d in with_c["details"]) > 1000
    assert with_c == without


#: ASCII as orjson writes it unescaped or with a two-byte escape (a \u escape is read and written).
_ASCII = st.text(st.sampled_from([chr(c) for c in range(0x20, 0x80)] + list("\b\f\n\r\t")), max_size=8)
_CANONICAL_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers(-(10**18) + 1, 10**18 - 1) | _ASCII,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(_ASCII, inner, max_size=4),
    max_leaves=12,
)
_ANY_VALUES = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**63), 2**63 - 1)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=6),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=4), inner, max_size=4),
    max_leaves=12,
)


@settings(max_examples=500, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(value=st.dictionaries(_ASCII, _CANONICAL_VALUES, max_size=6))
def test_the_emitters_metadata_is_copied_as_it_is(value: dict) -> None:
    """What orjson writes of ASCII text, integers and literals is taken as it is."""
    assert fold._CFOLD.canonical_object(orjson.dumps(value))


@settings(max_examples=1000, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    value=st.dictionaries(st.text(max_size=4), _ANY_VALUES, max_size=6),
    how=st.sampled_from(["orjson", "json", "spaced", "escaped", "twice"]),
)
@example(value={"a": 0}, how="twice")
def test_metadata_is_copied_only_where_orjson_writes_back_the_same_bytes(value: dict, how: str) -> None:
    import json

    raw = {
        "orjson": lambda: orjson.dumps(value),
        "json": lambda: json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode(),
        "spaced": lambda: json.dumps(value).encode(),
        "escaped": lambda: json.dumps(value, separators=(",", ":")).encode(),  # \\u escapes, \\/ never
        "twice": lambda: orjson.dumps(value)[:-1] + (b"," if value else b"") + orjson.dumps(value)[1:],  # keys twice
    }[how]()
    if fold._CFOLD.canonical_object(raw):
        assert orjson.dumps(orjson.loads(raw)) == raw


def test_metadata_orjson_would_rewrite_is_read_and_written() -> None:
    rewritten = (b'{"a":-0}', b'{"a":1.50}', b'{"a":1e2}', b'{"a":1,"a":2}', b'{"a":"\\/"}', b'{"a":"\\u0041"}')
    for raw in (
        *rewritten,
        b'{"a": 1}',
        b'{"a":"\xc3\xa9"}',
        b'{"a":1234567890123456789}',
        b'{"a":01}',
        b"[]",
        b'{"a":1}x',
    ):
        assert not fold._CFOLD.canonical_object(raw), raw
    assert fold._CFOLD.canonical_object(b'{"a":{"b":[1,-2,"x\\n",true,null,{}]},"c":[]}')


def test_a_call_made_while_one_runs_is_left_to_the_general_parser() -> None:
    """``Folder.event`` calls Python (orjson through ``dumps``), where another thread may
    call it on the same reader: that call must not touch the buffers the first is using,
    nor change how the first writes."""
    line = _variants()[0]  # metadata with a fraction: read and written through ``dumps``
    strings = report_data.Strings()
    reader = fold.line_reader()
    inner: list[Any] = []

    def reentering(value: Any) -> bytes:
        inner.append(reader.event(line, 0, len(line), 0, b"s1", strings))
        with pytest.raises(RuntimeError, match="while an event is written"):
            reader.set_event_format(report_data._RULES, dumps, 0)
        return dumps(value)

    reader.set_event_format(report_data._RULES, reentering, 0)
    outer = reader.event(line, 0, len(line), 0, b"s1", strings)
    assert inner == [None]
    assert outer == report_data._plain_events().event(line, 0, len(line), 0, b"s1", strings)


def test_a_table_is_told_once_an_event_numbers_a_name_past_the_seed() -> None:
    """Names up to the seed are numbered alike in every table; the compiled reader tells
    the table an event named one past them, against the seed it was told when it wrote
    the event, also for a name it had numbered before (remembered, not looked up again);
    so does the Python path."""
    seeded = _variants()[0]
    custom = seeded.replace(b'"boundary":"backend.llm.call.response"', b'"boundary":"backend.custom.step"')
    strings = report_data.Strings()
    reader = fold.line_reader()
    reader.set_event_format(report_data._RULES, dumps, len(report_data._SEED))
    assert reader.event(seeded, 0, len(seeded), 0, b"s1", strings) is not None
    assert strings.table == list(report_data._SEED) and not strings.events_past_seed
    reader.set_event_format(report_data._RULES, dumps, len(strings) + 1)  # the custom name, one short of the seed
    assert reader.event(custom, 0, len(custom), 0, b"s1", strings) is not None
    assert len(strings) == len(report_data._SEED) + 1 and not strings.events_past_seed
    reader.set_event_format(report_data._RULES, dumps, len(report_data._SEED))
    assert reader.event(custom, 0, len(custom), 0, b"s1", strings) is not None
    assert strings.events_past_seed
    python = report_data.Strings()
    for line, past in ((seeded, False), (custom, True)):
        _, env, _ = parse_span(line, 0, len(line))
        report_data._encode(env, 0, "s1", python)
        assert python.events_past_seed is past


def test_the_reader_writes_events_only_once_told_how() -> None:
    reader = fold.line_reader()
    line = _variants()[0]
    with pytest.raises(ValueError, match="set_event_format first"):
        reader.event(line, 0, len(line), 0, b"s1", report_data.Strings())
    for rules in (report_data._RULES[:-1], report_data._RULES.replace(b"i", b"k")):
        with pytest.raises(ValueError, match="one rule per head field"):
            reader.set_event_format(rules, dumps, 0)
