"""The HTML report's data: one index row per test and the events of the tests shown in
detail, in a compact JSON-ready form that ``report`` embeds and the page draws lazily.

One pass over the inputs: ``correlate.scan_tests`` gives the rows and diagnoses (as
``tests`` and ``diagnose --all`` compute them) and, per test, its LLM time; the process
that diagnoses a test the page details reads that test's lines again (only those, where
the pass saw them) and encodes its events here (``_Reader``), and it makes every index
row of its tests (``_Reader.keep``), so two processes share that work too. Each event
is encoded as soon as it is read, so memory follows the size of the report, not of the
log. Read side only: no emit-side import, no HTML here.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Collection, Mapping, Sequence
from types import MappingProxyType
from typing import Any

from cvdiag.contract.schema import CATALOG, EDGE_HEADERS, LAYERS, OUTCOMES
from cvdiag.contract.timestamps import order_key, wire_ts
from cvdiag.read import correlate, fold
from cvdiag.read.fold import finite_ms, seconds
from cvdiag.read.jsonout import dumps
from cvdiag.read.parsing import COERCED, ENVELOPE, parse_span, restored
from cvdiag.read.sources import Source

#: A test's events beyond this many are counted, not embedded (a debug-tier stream can
#: hold hundreds of thousands of chunk events).
MAX_EVENTS_PER_TEST = 5000
#: Columns of an index row, in order (the page reads rows by position).
ROW_COLUMNS: tuple[str, ...] = (
    "id", "label", "slug", "class", "failed", "terminal", "duration_ms", "ttfb_ms", "llm_ms",
    "events", "layers", "start_ms", "reason", "confidence", "detail",
)  # fmt: skip
#: Fields of an event, in order: offset from the test's first event (ms), layer,
#: boundary and outcome (indexes into ``strings``), duration_ms, metadata, and the
#: envelope's other fields when they differ from what the page can rebuild.
EVENT_COLUMNS: tuple[str, ...] = ("t", "layer", "boundary", "outcome", "duration_ms", "metadata", "rest")
#: What an index row shows of a test's evidence (a test not shown in detail keeps only these).
_INDEX_FACTS = ("ttfb_ms", "open_llm_call_s")
_REBUILT = frozenset({"schema_version", "test_id", "layer", "boundary", "outcome", "duration_ms", "metadata", "ts"})


#: The names every report's table starts with, in this order: an event that names only
#: these is numbered alike in every process, so its test's events travel as one bytes
#: object and the driver sends them on unread (``_TestEvents.finish``, ``_renumbered``).
_SEED: tuple[str, ...] = tuple(dict.fromkeys((*LAYERS, *OUTCOMES, *CATALOG)))


class Strings(dict[str, int]):
    """A table of the names that repeat across rows and events (boundaries, slugs,
    classes), numbered in the order met, starting with ``_SEED``: ``strings[name]`` is a
    name's number (a name not met yet gets the next), ``strings(value)`` any value's as text.
    ``events_past_seed``: an event was numbered here with a name past the seed (the
    compiled reader and ``_encode`` say so); until then every event numbered here is
    numbered alike in every table, whatever other names rows brought."""

    __slots__ = ("events_past_seed",)

    def __init__(self) -> None:
        super().__init__((name, i) for i, name in enumerate(_SEED))
        self.events_past_seed = False

    def __missing__(self, name: str) -> int:
        number = self[name] = len(self)
        return number

    def __call__(self, text: Any) -> int:
        return self[text if isinstance(text, str) else "" if text is None else str(text)]

    @property
    def table(self) -> list[str]:
        """The names in the order of their numbers."""
        return list(self)


class _TestEvents:
    """The events of one test shown in detail, encoded (``_encode``) as they are read, in
    the process that diagnoses the test, and kept one bytes object each: a tuple of key
    and text costs three times as much, and a report holds thousands of tests' events.
    ``finish`` sorts them and leaves their JSON texts, joined in one while no event of the
    process named more than the seed's names (``joined``: one object to send, none to
    renumber, whatever other names the process's rows met); ``strings`` numbers the names
    in them. Lines come by runs (``_take_lines``): one in the emitter's plain layout is
    encoded in one compiled call, the rest parsed and encoded here (``general``); ``left``
    counts the lines still to come, and the last one finishes the test."""

    __slots__ = ("events", "joined", "left", "more", "slug", "slug_utf8", "strings", "t0_ms")

    def __init__(self, row: Mapping[str, Any], strings: Strings) -> None:
        self.t0_ms = round(seconds(row["first_ts"]) * 1000)
        self.slug = row["slug"].split(",")[0]
        self.slug_utf8 = self.slug.encode()  # as the compiled reader compares it, once per test
        self.events: list[bytes] = []
        self.more = row["_kept"].more  # past MAX_EVENTS_PER_TEST: counted by the scan
        self.strings = strings  # one object for every test of a process: pickled once
        self.joined = False  # events joined in one, numbered by the seed alone
        self.left = 0  # lines still to come (set by whoever hands them over)

    def general(self, buf: Any, ls: int, le: int) -> None:
        """The envelope on the line ``buf[ls:le]`` parsed and ``add``-ed (not in the plain
        layout, or no compiled reader)."""
        kind, value, _ = parse_span(buf, ls, le)
        if kind == ENVELOPE:
            self.add(value)
        else:  # read as an envelope before: the file changed since, and it is counted, not lost
            self.more += 1

    def add(self, env: Mapping[str, Any]) -> None:
        try:
            self.events.append(_encode(env, self.t0_ms, self.slug, self.strings))
        except (ValueError, TypeError, OverflowError):  # an envelope the reader let through but cannot be drawn
            self.more += 1

    def finish(self) -> None:
        """The events' JSON in time order, an envelope read twice (two sinks given) kept once."""
        self.events.sort()
        out: list[bytes] = []
        previous = b""
        for event in self.events:
            cut = event.index(_KEY_END, _KEY_BYTES + 1) + len(_KEY_END)
            key = event[:cut]
            if key != previous:
                out.append(event[cut:])
            previous = key
        self.joined = not self.strings.events_past_seed
        self.events = [b",".join(out)] if self.joined and out else out


def _take_lines(buf: Any, shift: int, lines: list[tuple[int, int, _TestEvents]]) -> None:
    """Each line of ``lines`` (start, end, its test's events), at ``buf[start - shift:end -
    shift]``, to its test, in order: encoded, ``left`` counted down, and the test finished
    after its last line. One compiled call for the run (``Folder.events_at``), this loop
    without the compiled reader."""
    plain = _plain_events()
    if plain is not None:
        plain.events_at(buf, shift, lines)
        return
    for ls, le, read in lines:
        read.general(buf, ls - shift, le - shift)
        read.left -= 1
        if not read.left:
            read.finish()


_NONE: Mapping[str, Any] = MappingProxyType({})  # no verdict, no facts: read, never written
_MAX_REASONS = 4096  # distinct reasons a process keeps once each (the rest are kept as they come)


class _Reader:
    """What ``correlate.Detail`` calls in the process that diagnoses: for each test it
    details, that test's ``_TestEvents``; then, for every row, what the page keeps of it
    (``keep``). Names are numbered in ``strings`` (a process of its own numbers them in
    its copy, which the rows and events it sends carry along); ``take`` hands the tests
    their lines (``_take_lines``). A reason many rows give alike ("No failure found (46
    events; HTTP 200).") is kept once (``reasons``), so it is sent and held once: up to
    ``_MAX_REASONS`` of them."""

    __slots__ = ("reasons", "strings")

    def __init__(self, strings: Strings) -> None:
        self.strings = strings
        self.reasons: dict[str, str] = {}

    def __call__(self, row: Mapping[str, Any]) -> _TestEvents:
        return _TestEvents(row, self.strings)

    take = staticmethod(_take_lines)

    def keep(self, r: Mapping[str, Any]) -> dict[str, Any]:
        """The row as the page keeps it: its index row (``ROW_COLUMNS``) made here, so the
        processes share that work and only it is sent, not the row and its verdict. Left to
        the driver (``_Index.add``): the label, a harness's "failed", the start (here the
        first ``ts`` in seconds) and the detail's place (here -1); the whole verdict is
        kept only for a test shown in detail."""
        strings = self.strings  # names by subscript: a dict lookup, a call only for a new one
        diag = r.get("_diagnosis")
        if diag is None or type(diag) is dict:  # the verdict as JSON: whole, or brief
            diag = diag or _NONE
            facts = diag.get("evidence") or _NONE
            reason, confidence = diag.get("reason", ""), diag.get("confidence")
            ttfb, open_s = facts.get("ttfb_ms"), facts.get("open_llm_call_s")
        else:  # the judgement of a test shown by its index row only, asked what the row shows
            reason, confidence = diag.finding.reason, diag.finding.confidence
            ttfb, open_s = diag.fact("ttfb_ms"), diag.fact("open_llm_call_s")
        reasons = self.reasons
        reason = reasons.setdefault(reason, reason) if len(reasons) < _MAX_REASONS else reasons.get(reason, reason)
        llm = r["_llm_ms"]
        if open_s is not None and (open_s := finite_ms(open_s)) is not None:
            # dated from the end of the whole log: within this test it ran at most its duration
            llm = (llm or 0.0) + min(open_s * 1000, r["duration_ms"])
        cells = [
            r["test_id"],
            None,
            strings[r["slug"]],
            strings[r.get("class") or ""],
            1 if r["status"] == "fail" else 0,
            strings[r["terminal"]],
            r["duration_ms"],
            ttfb,
            None if llm is None else round(llm),
            r["events"],
            [strings[x] for x in r["layers"]],
            seconds(r["first_ts"]),
            reason,
            confidence,
            -1,
        ]
        kept = {"test_id": r["test_id"], "first_ts": r["first_ts"], "_cells": cells, "_strings": strings}
        held = r.get("_read")
        if held is not None:
            kept["_read"], kept["_diagnosis"] = held, r.get("_diagnosis") or {}
        return kept


def _renumbered(held: _TestEvents, to: list[bytes] | None) -> list[bytes]:
    """``held``'s events with the names numbered as ``to`` says (None: as they are): an
    event is ``[offset,layer,boundary,outcome,...`` and a number holds no comma."""
    if to is None or held.joined:  # numbered in the page's table, or by the seed alone
        return held.events
    out = []
    for event in held.events:
        head, layer, boundary, outcome, tail = event.split(b",", 4)
        out.append(b",".join((head, to[int(layer)], to[int(boundary)], to[int(outcome)], tail)))
    return out


#: An event's sort key: its ``order_key`` (shifted to be positive) in this many bytes, big
#: end first, then its identity (``correlate.identity``), each part ended by ``_PART_END``
#: (a NUL inside a part is written NUL U+00FF), then ``_KEY_END``: bytes that sort as the
#: (order key, identity) tuple does and are equal exactly when it is.
_KEY_BYTES, _KEY_SHIFT = 16, 1 << 127
_PART_END, _KEY_END = "\x00\x01", b"\x00\x00"


def _sort_key(env: Mapping[str, Any], ts: str) -> bytes:
    key = order_key(ts, env.get("mono_ns"))
    if key is None:
        raise ValueError("no time to order by")
    span, boundary, _, mono = correlate.identity(env)
    parts = ("" if span is None else str(span), str(boundary), ts, mono)
    text = _PART_END.join(parts) + _PART_END
    if text.count("\x00") != len(parts):  # a NUL inside a part: each is escaped
        text = "".join(part.replace("\x00", "\x00\xff") + _PART_END for part in parts)
    flag = b"\x00" if span is None else b"\x01"  # a span_id may be null beside strings: those first
    return (key + _KEY_SHIFT).to_bytes(_KEY_BYTES, "big") + flag + text.encode("utf-8", "surrogatepass") + _KEY_END


#: Fields left out of an event when they hold what the page rebuilds them as (the test's
#: id and slug are added per envelope); compared by identity or as the same type.
_UNSAID: dict[str, Any] = {
    "parent_span_id": None,
    "_metadata_dropped": False,
    "_truncated": False,
    "edge_headers": dict.fromkeys(EDGE_HEADERS),
}
_NOTHING = object()


def _rule(field: str) -> bytes:
    """What a head field is to an event's ``rest`` (``Folder.event``), as ``_encode`` treats
    it on a line in the plain layout: rebuilt, kept, or kept unless it holds the unsaid value."""
    if field == "span_id":  # kept, and the identity's span in the sort key
        return b"i"
    if field in _REBUILT or field == "edge_headers":  # the plain layout's are all null: unsaid
        return b"r"
    special = {"trace_id": b"t", "slug": b"s"}.get(field)  # unsaid: the test's id, its first slug
    if special is not None:
        return special
    if field not in _UNSAID:
        return b"k"
    if _UNSAID[field] is None:
        return b"n"
    raise ImportError(f"report_data._UNSAID[{field!r}] is no value the compiled event reader knows")


_RULES = b"".join(map(_rule, fold.HEAD_FIELDS))


@functools.cache
def _plain_events() -> Any:
    """The compiled reader of lines in the plain layout (``Folder.event``), writing events
    as ``_encode`` does (``_RULES``, ``_row_metadata``); None without it."""
    if not fold.compiled():
        return None
    reader = fold.line_reader()
    reader.set_event_format(_RULES, _row_metadata, len(_SEED))
    return reader


def _row_metadata(metadata: Any) -> bytes:
    """``metadata`` as ``dumps`` writes it inside an event's row (``_encode``): one level
    down, so what is nested too deep is cut where the row's own would be."""
    return dumps([metadata])[1:-1]


def _encode(env: Mapping[str, Any], t0_ms: int, slug: str, strings: Strings) -> bytes:
    """One envelope as its sort key (``_sort_key``) then its compact JSON, from which the
    page rebuilds the whole envelope; ``strings`` told when it names more than the seed."""
    ts = env["ts"]
    ts_s = seconds(ts)
    ms = round(ts_s * 1000)
    offset: float = ms - t0_ms
    rest: dict[str, Any] = {}
    if wire_ts(ms * 1_000_000) != ts:  # not the emitters' canonical form: keep it as written
        offset = round(ts_s * 1000 - t0_ms, 3)
        rest["ts"] = ts
    written = restored(env)  # the page shows an envelope as logged, a field of the wrong type too
    for key in env.get(COERCED, ()):
        top = key.split(".", 1)[0]
        rest[top] = written[top]
    unsaid = {**_UNSAID, "trace_id": env["test_id"], "slug": slug}
    for key, value in written.items():
        if key in _REBUILT or key in rest:
            continue
        same = unsaid.get(key, _NOTHING)
        if same is value or (type(same) is type(value) and same == value):
            continue
        rest[key] = value
    if env.get("schema_version") != 1:
        rest["schema_version"] = env.get("schema_version")
    names = strings(env["layer"]), strings(env["boundary"]), strings(env["outcome"])
    if max(names) >= len(_SEED):
        strings.events_past_seed = True
    row = [offset, *names, env.get("duration_ms"), env.get("metadata", {}), rest or 0]
    return _sort_key(env, ts) + dumps(row)  # a new object of its size: orjson's keeps the buffer it grew


def build(
    sources: Sequence[Source],
    *,
    all_tests: bool = False,
    slow_s: float = 30.0,
    jobs: int = 1,
    labels: Mapping[str, str] | None = None,
    failed: Collection[str] = (),
    compared: Mapping[str, Any] | None = None,
    progress: Any = None,
) -> dict[str, Any]:
    """The report's data for ``sources``: every test in the index, detail (events and
    the diagnosis) for the failed or flagged ones, or for all with ``all_tests``.

    ``labels`` names tests (pytest node ids); ``failed`` are ids a harness saw fail
    whatever their envelopes say; ``compared`` is a ``compare`` result to show, whose
    two tests get their waterfalls too."""
    reader = _Reader(Strings())
    shown = correlate.Detail(
        MAX_EVENTS_PER_TEST,
        everything=all_tests,
        ids=frozenset((*failed, *(_compared_ids(compared) if compared else ()))),
        facts=_INDEX_FACTS,
        reader=reader,
        keep=reader.keep,
    )
    scan = correlate.scan_tests(
        list(sources), classify=True, slow_s=slow_s, jobs=jobs, keep_json=True, progress=progress, detail=shown
    )
    found, scan.rows = scan.rows, []
    # the names as the process of the first row numbered them: its rows and events stay as they are
    strings = found[0]["_strings"] if found else reader.strings
    index = _Index(strings, labels or {}, frozenset(failed), found[0]["first_ts"] if found else None)
    found.reverse()
    while found:  # each row let go once it is indexed: never the scan's rows and the index at once
        index.add(found.pop())
    return {
        "meta": {
            "generated": wire_ts(time.time_ns()),
            "sources": [s.name for s in sources],
            "start": index.start,
            "detail": "all" if all_tests else "failed",
            "slow_s": slow_s,
            "malformed": scan.tally.count,
            "note": scan.tally.note(),
            "layers": list(LAYERS),
            "edge_headers": list(EDGE_HEADERS),
            "columns": list(ROW_COLUMNS),
            "event_columns": list(EVENT_COLUMNS),
        },
        "strings": index.strings.table,
        "rows": index.rows,
        "details": index.shown,
        "compare": compared,
    }


def _compared_ids(compared: Mapping[str, Any]) -> tuple[str, str]:
    return compared["a"]["test_id"], compared["b"]["test_id"]


class _Index:
    """The index rows of the page, from the rows ``_Reader.keep`` made, one at a time, and
    the tests shown in detail, in the order of their rows; names numbered in ``strings``."""

    __slots__ = ("failed", "labels", "maps", "rows", "shown", "start", "start_s", "strings")

    def __init__(self, strings: Strings, labels: Mapping[str, str], failed: frozenset[str], start: str | None) -> None:
        self.strings, self.labels, self.failed, self.start = strings, labels, failed, start
        self.start_s = seconds(start) if start is not None else 0.0
        self.rows: list[list[Any]] = []
        self.shown: list[dict[str, Any]] = []
        # another process's table -> its numbers in ``strings``, as ints and as event text
        self.maps: dict[int, tuple[list[int], list[bytes]]] = {}

    def add(self, kept: Mapping[str, Any]) -> None:
        cells = kept["_cells"]
        to = self._map(kept["_strings"])
        if to is not None:
            ints = to[0]
            cells[2], cells[3], cells[5] = ints[cells[2]], ints[cells[3]], ints[cells[5]]
            cells[10] = [ints[x] for x in cells[10]]
        tid = cells[0]
        cells[1] = self.labels.get(tid)
        if tid in self.failed:
            cells[4] = 1
        cells[11] = round((cells[11] - self.start_s) * 1000)
        held = kept.get("_read")
        if held is not None:  # a test shown in detail, its events read where it was diagnosed
            cells[14] = len(self.shown)
            events = _renumbered(held, None if to is None else to[1])
            self.shown.append({"t0": held.t0_ms, "diagnosis": kept["_diagnosis"], "events": events, "more": held.more})
        self.rows.append(cells)

    def _map(self, numbered: Strings) -> tuple[list[int], list[bytes]] | None:
        """How names numbered in ``numbered`` (another process's table) are numbered in
        ``strings``; None when they are the same table."""
        if numbered is self.strings:
            return None
        to = self.maps.get(id(numbered))
        if to is None:
            ints = [self.strings[name] for name in numbered]
            to = self.maps[id(numbered)] = (ints, [b"%d" % n for n in ints])
        return to


def index_json(doc: Mapping[str, Any]) -> bytes:
    """The document without its details, as JSON (the page parses this at load)."""
    return dumps({k: v for k, v in doc.items() if k != "details"})


def detail_json(detail: Mapping[str, Any]) -> bytes:
    """One test's detail as JSON; its events are already encoded."""
    head = dumps({k: v for k, v in detail.items() if k != "events"})
    return head[:-1] + b',"events":[' + b",".join(detail["events"]) + b"]}"
