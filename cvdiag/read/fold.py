"""Fold the envelopes of a buffer into per-test aggregates (``Agg``) and diagnosis evidence.

``tests`` needs a few facts per test, not its events: ``Fold`` keeps one ``Agg`` per test
id (and, when diagnosing, one ``Evidence``), so memory follows the number of tests, not
the size of the log. ``find`` locates each envelope head
(``{"schema_version":1,"test_id":"``), and an envelope in the emitter's canonical layout
there (after ``CVDIAG ``, after ``CVDIAG_EVENT ``, or a bare NDJSON line) gives up the
fields ``tests`` needs to one anchored regex over its head, built from the schema's own
field order, and a fixed-tail check catches cut lines, so it is never JSON-parsed.
Markers found between those lines (Docker json-file, escaped strings, other key orders,
cut or broken lines) send their line through the general ``parsing.parse_span``, so
every shape is read and every malformed line counted. Diagnosis parses the envelopes it
folds, except SSE events and the like, whose head fields are all it needs once a fixed
middle and tail show the line is valid JSON.

When the compiled fold (``_cfold``, built from ``_cfold.c`` at install) is there, it
runs this same pass in C: the canonical lines, each test's row and the head facts of
its diagnosis are kept there, and only what Python alone decides comes back here (a
test or a boundary name met the first time, a line in another shape, the metadata of a
body the diagnosis reads). It also reads the lines behind colour codes and in Docker
json-file records where the general parser certainly reads the same envelope from them,
which this path leaves to it. ``CVDIAG_COMPILED=0`` turns it off; both paths give the
same rows and the same verdicts (``tests/test_compiled_fold.py``).

Which part of the inputs a fold reads is ``split``'s business; what is done with the
evidence, ``_diagnosing``'s.
"""

from __future__ import annotations

import functools
import math
import os
import re
from collections.abc import Callable, Iterable, Iterator
from typing import Any

import orjson

from cvdiag.contract.layout import HEAD, INT, LITERAL, NULL_OR_INT, NULL_OR_STR, ROLES, STR, TERMINAL, HeadField
from cvdiag.contract.schema import (
    ACCOUNTING_PREFIX,
    EDGE_HEADERS,
    ENVELOPE_FIELDS,
    FAILURE_OUTCOMES,
    JAVA_PREFIX,
    LAYERS,
    PREFIX,
    is_accounting,
)
from cvdiag.contract.timestamps import bytes_seconds, canonical_ts, order_key, ts_seconds
from cvdiag.read._compiled import CFOLD
from cvdiag.read.parsing import ENVELOPE, MALFORMED, MARKERS, MAX_LINE, Tally, coerce, parse_span
from cvdiag.read.scan import LineCounter
from cvdiag.read.split import Share, Window

# No escapes and no control characters in the leading strings, JSON-valid integers: a
# line that matches is JSON up to its edge headers (others go to the general parser).
_Q = rb'"([^"\\\x00-\x1f]*)"'
_S = rb'"[^"\\\x00-\x1f]*"'
_INT = rb"-?(?:0|[1-9]\d*)"
# The kinds of field the head is made of, as a pattern here and as a code in ``_cfold.c``.
_LITERAL, _CAPTURED_STR, _STR, _NULL_OR_STR, _CAPTURED_INT, _NULL_OR_INT = range(6)
_KIND_PATTERNS = {
    _CAPTURED_STR: _Q,
    _STR: _S,
    _NULL_OR_STR: rb"(?:null|" + _S + rb")",
    _CAPTURED_INT: rb"(" + _INT + rb")",
    _NULL_OR_INT: rb"(?:null|" + _INT + rb")",
}


def _read_kind(field: HeadField) -> int:
    """How this fold reads a head field the layout declares: a field with a role is captured."""
    if field.kind == STR:
        return _CAPTURED_STR if field.role else _STR
    if field.kind == INT:
        return _CAPTURED_INT if field.role == "mono_ns" else _NULL_OR_INT
    return {LITERAL: _LITERAL, NULL_OR_STR: _NULL_OR_STR, NULL_OR_INT: _NULL_OR_INT}[field.kind]


#: How the emitter writes each field before ``edge_headers`` (``contract.layout.HEAD``), as
#: this fold reads it: (kind, literal text).
_FIELD_KINDS: dict[str, tuple[int, bytes]] = {f.name: (_read_kind(f), f.literal.encode()) for f in HEAD}
_FIELD_PATTERNS: dict[str, bytes] = {
    name: re.escape(literal) if kind == _LITERAL else _KIND_PATTERNS[kind]
    for name, (kind, literal) in _FIELD_KINDS.items()
}
_HEAD_FIELDS = ENVELOPE_FIELDS[: ENVELOPE_FIELDS.index("edge_headers")]
# Anchored at a `_HEAD` found by `find`: only a few hundred bytes are matched per envelope.
# Built in the schema's order; a field the schema gains without a pattern above stops the
# import here (KeyError), rather than sending every envelope the slow way.
_CANONICAL = re.compile(
    rb"\{" + b",".join(b'"%s":%s' % (f.encode(), _FIELD_PATTERNS[f]) for f in _HEAD_FIELDS) + rb',"edge_headers":\{'
)
#: The fields ``Fold`` unpacks from ``_CANONICAL``'s groups, in this order (the
#: schema's): checked here, as a schema that reordered them would feed it wrong fields.
_FOLDED = ("test_id", "layer", "boundary", "slug", "ts", "mono_ns", "outcome")
if tuple(f.role for f in HEAD if re.compile(_FIELD_PATTERNS[f.name]).groups) != _FOLDED:
    raise ImportError(f"the layout's envelope head {_HEAD_FIELDS} no longer gives fold._FOLDED in order")
#: What ``find`` looks for: what ``_CANONICAL`` matches first, up to the test id's quote.
_HEAD = b'{"%s":%s,"%s":"' % (_HEAD_FIELDS[0].encode(), _FIELD_PATTERNS[_HEAD_FIELDS[0]], _HEAD_FIELDS[1].encode())
_PREFIX, _JAVA_PREFIX = PREFIX.encode(), JAVA_PREFIX.encode()
_PREFIX_LEN, _JAVA_PREFIX_LEN = len(_PREFIX), len(_JAVA_PREFIX)
# The rest of an envelope that says nothing beyond its head (every SSE event): the
# emitter's all-null edge headers, its metadata object, its usual tail. Checked so, with
# a JSON parse of the small metadata only, the line is known to be valid JSON.
_PLAIN_MIDDLE = b",".join(b'"%s":null' % k.encode() for k in EDGE_HEADERS) + b'},"metadata":'
_PLAIN_END = b"," + b",".join(b'"%s":false' % k.encode() for k in ENVELOPE_FIELDS[-2:]) + b"}"


def _role(field: HeadField) -> int:
    """A head field's role as the compiled fold numbers it (its ``ROLES``), -1 for none."""
    return ROLES.index(field.role) if field.role else -1


#: ``_CANONICAL`` for the compiled fold: each field with the separator before it, its kind,
#: its literal and its role (an index in ``ROLES``, -1 for none).
_C_FIELDS = (
    *(
        (b'%s"%s":' % (b"{" if i == 0 else b",", f.name.encode()), *_FIELD_KINDS[f.name], _role(f))
        for i, f in enumerate(HEAD)
    ),
    (b',"edge_headers":', _LITERAL, b"{", -1),
)


_CFOLD = CFOLD  # a module global, so that tests can fold without it in the same process
_EMITTER_SECONDS: Callable[[str], float | None] = CFOLD.emitter_seconds if CFOLD is not None else lambda ts: None


def seconds(ts: str) -> float:
    """``ts_seconds``: an emitter timestamp read in one compiled call (the same float), any
    other (or 0.0, alike) by ``ts_seconds``. Rows and a report's index read three a test."""
    return _EMITTER_SECONDS(ts) or ts_seconds(ts)


# What the compiled fold answers when it meets a test id (``Fold._admit``).
_SKIP, _UNTRACKED, _ROW, _ROW_AND_EVIDENCE = -1, -2, 1, 3


def compiled() -> bool:
    """Whether passes run in the compiled fold (the CLI says so when they cannot, on big inputs)."""
    return _CFOLD is not None


def compiled_folder(**callbacks: Any) -> Any:
    """A ``_cfold.Folder`` that reads the emitter's layout, with the pass's ``callbacks``."""
    assert _CFOLD is not None
    return _CFOLD.Folder(
        fields=_C_FIELDS, head=_HEAD, prefix=_PREFIX, java_prefix=_JAVA_PREFIX, markers=(_CV, _SV),
        middle=_PLAIN_MIDDLE, end=_PLAIN_END, tails=_TAILS, tail_room=_TAIL_ROOM, failed=tuple(sorted(_FAILED)),
        accounting=ACCOUNTING_PREFIX.encode(), llm_response=_LLM_RESPONSE, terminal_bits=_TERMINAL_BITS,
        backend_bit=_BACKEND, ts_facts=_ts_facts, loads=orjson.loads, max_line=MAX_LINE, **callbacks,
    )  # fmt: skip


#: The head fields ``compiled_folder`` matches, in order (what ``Folder.event``'s rules are for).
HEAD_FIELDS: tuple[str, ...] = (*_HEAD_FIELDS, "edge_headers")


def line_reader() -> Any:
    """A ``_cfold.Folder`` that folds nothing, for ``Folder.event``: reading one line at a time."""
    return compiled_folder(admit=None, boundary_info=None, fold_aggs=False, keep_lines=0, max_tests=0)


def _ts_facts(ts: bytes) -> tuple[bytes | None, int | None]:
    """(``canonical_ts``, or None when it is no time; the microseconds of its ``order_key``,
    or None) of a ts not in the emitter's shape, for the compiled fold."""
    try:
        canonical = canonical_ts(ts)
    except ValueError:
        canonical = None
    key = order_key(ts.decode("utf-8", "replace"), None)
    return canonical, None if key is None else key >> 64


#: JSON shorter than this cannot nest as deep as orjson refuses (1024 levels, 2 bytes each).
_DEEP_ROOM = 2048


def _is_object(raw: Any) -> bool:
    """Whether the metadata ``raw`` is a JSON object as the whole line reads it: one level
    down, inside the envelope's object (metadata nested 1024 deep is read alone, not
    there); the compiled fold's ``load_metadata``."""
    try:
        if len(raw) < _DEEP_ROOM:
            return type(orjson.loads(raw)) is dict
        return type(orjson.loads(b"[%b]" % raw)[0]) is dict
    except orjson.JSONDecodeError:
        return False


def _head(buf: Any, pos: int, le: int) -> tuple[int, tuple[bytes, ...], int] | None:
    """(where the line's envelope starts, its ``_FOLDED`` fields, where the head ends)
    when the envelope at ``pos`` is in the emitter's canonical layout, else None.

    Canonical: right after ``CVDIAG ``, ``CVDIAG_EVENT `` or at a line start, keys in
    wire order, compact, no escapes or control characters in the leading fields.
    """
    if buf[pos - _PREFIX_LEN : pos] == _PREFIX:
        ms = pos - _PREFIX_LEN
    elif buf[pos - _JAVA_PREFIX_LEN : pos] == _JAVA_PREFIX:
        ms = pos - _JAVA_PREFIX_LEN
    elif pos == 0 or buf[pos - 1] == 10:
        ms = pos - 1 if pos else 0
    else:
        return None
    m = _CANONICAL.match(buf, pos, le)
    return None if m is None else (ms, m.groups(), m.end())


_TAIL_FALSE = b'"%s":false}' % ENVELOPE_FIELDS[-1].encode()
_TAILS = (_TAIL_FALSE, b'"%s":true}' % ENVELOPE_FIELDS[-1].encode())
_TAIL_LEN = len(_TAIL_FALSE)
_TAIL_ROOM = 40  # bytes searched for a tail followed by trailing spaces
_FAILED = frozenset(o.encode() for o in FAILURE_OUTCOMES)
#: A row's flags: one bit per terminal boundary (``contract.layout.TERMINAL``, in the
#: order a row prefers them), then one for "a backend envelope was seen".
_TERMINAL_BITS = {boundary.encode(): 1 << i for i, (boundary, _) in enumerate(TERMINAL)}
_TERMINAL_NAMES = tuple((1 << i, name) for i, (_, name) in enumerate(TERMINAL))
_BACKEND = 1 << len(TERMINAL)
_MAX_SLUGS = 4
#: The LLM call envelope whose ``duration_ms`` a report adds up per test (``Kept.llm_ms``).
_LLM_RESPONSE_TEXT = "backend.llm.call.response"
_LLM_RESPONSE = _LLM_RESPONSE_TEXT.encode()
_FAR_MS = 1e15  # about 30,000 years: any duration past it is junk, not a time
#: Test ids folded, whatever the log: each costs about 1 KB, and a log of a million
#: made-up ids (a few MB of gzip) cost 1.2 GB. Later ids are counted and left out.
MAX_TESTS = int(os.environ.get("CVDIAG_MAX_TESTS", 100_000))
_CV, _SV = MARKERS


@functools.lru_cache(maxsize=4096)
def _accounting(boundary: bytes) -> bool:
    """``is_accounting`` of a boundary found as bytes (a log has a few dozen)."""
    return is_accounting(boundary.decode("utf-8", "replace"))


def finite_ms(value: Any) -> float | None:
    """A finite number of milliseconds, or None: a log can hold 1e308, and two of them add up to inf."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return value if math.isfinite(value) and abs(value) < _FAR_MS else None


def _llm_ms(env: dict[str, Any] | None) -> float | None:
    """The time an LLM call's response envelope says the call took, which a report adds up."""
    if env is None or env["boundary"] != _LLM_RESPONSE_TEXT or not isinstance(env.get("metadata", {}), dict):
        return None
    return finite_ms(env.get("duration_ms"))


def _parsed(raw: Any) -> dict[str, Any] | None:
    try:
        env = orjson.loads(raw)
    except orjson.JSONDecodeError:
        return None
    return coerce(env) if type(env) is dict else None


_PLACE_MAX = (1 << 31) - 1  # a place is three int32s: past this (never, with blocks of MBs) it is counted


class Kept:
    """What a report needs of one test beyond its row, kept by a ``Fold`` given
    ``keep_lines``: where its first envelopes are (``places``: block, start, end of each,
    so the tests shown in detail are read again line by line, not the whole log), how
    many more there are, and the time its LLM calls took. The Python fold keeps the places
    as int32s; the compiled one packs them in about 4 bytes each (``unpack_places``), as a
    report keeps them for every envelope of every test until the pass ends. Never sent
    between processes: the process that diagnoses reads the places
    (``_diagnosing._read_detail``)."""

    __slots__ = ("llm_ms", "more", "places")

    def __init__(self) -> None:
        from array import array  # only here: a shared library, and only ``report`` keeps places

        self.places: Any = array("i")  # int32: half the memory of int64, and blocks are MBs
        self.more = 0
        self.llm_ms: float | None = None

    def lines(self) -> memoryview:
        """``places`` as int32s (block, start, end of each), whether the Python fold
        appended them or the compiled one packed them."""
        places = self.places
        if type(places) is bytes:
            places = CFOLD.unpack_places(places)
        return memoryview(places).cast("B").cast("i")

    @classmethod
    def of(cls, places: bytes, more: int, llm_ms: float | None) -> Kept:
        """What the compiled fold kept: ``places`` packed, kept as they are."""
        kept = cls.__new__(cls)
        kept.places, kept.more, kept.llm_ms = places, more, llm_ms
        return kept


class Agg:
    """Running facts about one test id; mergeable, so workers can split a file."""

    __slots__ = ("events", "failed", "first", "flags", "last", "layers", "slugs")

    def __init__(self, ts: bytes) -> None:
        self.events = 0
        self.layers: set[bytes] | frozenset[bytes] = set()
        self.slugs: list[bytes] = []
        self.first = self.last = ts  # canonical bytes: compared as bytes
        self.flags = 0
        self.failed = False

    @classmethod
    def of(cls, facts: Any) -> Agg:
        """The row the compiled fold kept (its ``Agg`` result), its layers a frozenset that
        tests with the same ones share (``merge`` makes a new one)."""
        agg = cls.__new__(cls)
        agg.events, agg.first, agg.last, agg.flags = facts.events, facts.first, facts.last, facts.flags
        agg.layers, agg.slugs, agg.failed = facts.layers, facts.slugs, bool(facts.failed)
        return agg

    def __getstate__(self) -> tuple:
        return tuple(getattr(self, k) for k in self.__slots__)

    def __setstate__(self, state: tuple) -> None:
        for k, v in zip(self.__slots__, state, strict=True):
            setattr(self, k, v)

    def merge(self, other: Agg) -> None:
        self.first = min(self.first, other.first)
        self.last = max(self.last, other.last)
        self.events += other.events
        self.failed |= other.failed
        self.layers |= other.layers
        self.slugs += [s for s in other.slugs if s not in self.slugs][: max(0, _MAX_SLUGS - len(self.slugs))]
        self.flags |= other.flags

    @property
    def terminal(self) -> str:
        f = self.flags
        for bit, name in _TERMINAL_NAMES:
            if f & bit:
                return name
        return "incomplete" if f & _BACKEND else "none"

    @property
    def status(self) -> str:
        """The row's status: ``fail`` or ``ok``."""
        return "fail" if self.failed or self.terminal != "complete" else "ok"

    def row(self, test_id: bytes) -> dict[str, Any]:
        terminal = self.terminal
        first, last = self.first.decode(), self.last.decode()
        return {
            "test_id": test_id.decode("utf-8", "replace"),
            # a comma ends any broken UTF-8 sequence: joined, then decoded, is each decoded, then joined
            "slug": b",".join(self.slugs).decode("utf-8", "replace"),
            "layers": _layer_names(self.layers),
            "events": self.events,
            "first_ts": first,
            "last_ts": last,
            "duration_ms": round((seconds(last) - seconds(first)) * 1000),
            "terminal": terminal,
            "status": "fail" if self.failed or terminal != "complete" else "ok",
        }


#: A set of layers (as the compiled fold shares it between tests) -> its names in a row's order.
_LAYER_NAMES: dict[frozenset[bytes], tuple[str, ...]] = {}


def _layer_names(layers: set[bytes] | frozenset[bytes]) -> list[str]:
    """A row's layers: the known ones in ``LAYERS``' order, then the others sorted; worked
    out once for each set, as most tests of a log have one of a few."""
    key = layers if type(layers) is frozenset else frozenset(layers)
    names = _LAYER_NAMES.get(key)
    if names is None:
        decoded = {x.decode("utf-8", "replace") for x in key}
        names = (*(x for x in LAYERS if x in decoded), *sorted(decoded - set(LAYERS)))
        if len(_LAYER_NAMES) < 4096:
            _LAYER_NAMES[key] = names
    return list(names)


class Fold:
    """Folds buffers into per-test aggregates (``aggs``) and, given an ``Evidence``
    class, into diagnosis evidence (``evidence``), which needs every envelope parsed
    except those whose head says it all (``Evidence.add_head``: most of a log).

    Evidence costs about 1.3 KB per test, so at most ``budget`` tests get one per
    pass: a test first seen when the budget is spent is ``deferred`` whole, for a later
    pass that reads only those ids (``only``) and skips the aggregates (``fold_aggs``).
    """

    def __init__(
        self,
        evidence_cls: Any = None,
        owns: Callable[[bytes], bool] | None = None,
        *,
        budget: int | None = None,
        only: set[bytes] | None = None,
        fold_aggs: bool = True,
        keep_lines: int = 0,
    ) -> None:
        self.aggs: dict[bytes, Agg] = {}
        self.evidence: dict[bytes, Any] = {}
        self.deferred: set[bytes] = set()
        self.tally = Tally()
        self.evidence_cls = evidence_cls
        self.owns = owns
        self.budget = budget
        self.only = only
        self.fold_aggs = fold_aggs
        self.max_tests = MAX_TESTS
        self._head_only: dict[bytes, bool] = {}  # boundary -> may go to Evidence.add_head
        self.parsed = 0  # lines read by the general parser, not the canonical head
        self.keep_lines = keep_lines
        self.kept: dict[bytes, Kept] | None = {} if keep_lines else None
        # The compiled fold, for evidence that can take its head facts from it (``take_head``),
        # its head-only counters a size handed in.
        self._c: Any = None
        if _CFOLD is not None and (evidence_cls is None or hasattr(evidence_cls, "take_head")):
            self._c = compiled_folder(
                admit=self._admit,
                boundary_info=self._boundary_info,
                fold_aggs=fold_aggs,
                keep_lines=keep_lines,
                max_tests=self.max_tests,
                # more head-only counters than it has room for: refused (a ValueError), never off in silence
                counters=0 if evidence_cls is None else evidence_cls.head_counters,
            )
            self._slot_tids: list[bytes] = []  # the compiled fold's slots, in its order
            self._slot_evidence: list[Any] = []

    # -- what the compiled fold asks ------------------------------------------------------

    def _admit(self, tid: bytes, full: bool) -> int:
        """What to do with a test id met the first time (``buffer``'s checks, in its order)."""
        if (self.owns is not None and not self.owns(tid)) or (self.only is not None and tid not in self.only):
            return _SKIP
        if full:
            self.tally.untracked_limit = self.max_tests
            return _UNTRACKED
        ev = self._evidence_for(tid) if self.evidence_cls is not None else None
        if ev is None and not self.fold_aggs:
            return _SKIP
        self._slot_tids.append(tid)
        self._slot_evidence.append(ev)
        return _ROW if ev is None else _ROW_AND_EVIDENCE

    def _boundary_info(self, boundary: bytes) -> tuple[bool, int]:
        """(whether its head says all, the head-only counter it adds to or -1), of a boundary."""
        if self.evidence_cls is None:
            return False, -1
        return self._plain(boundary), self.evidence_cls.head_counter(boundary.decode("utf-8", "replace"))

    def finish(self) -> None:
        """Take what the compiled fold kept into ``aggs``, ``kept`` and each evidence's head.
        Called once the buffers are all read (``read`` does); nothing to do without it."""
        c, self._c = self._c, None
        if c is None:
            return
        self.tally.untracked += c.untracked
        rows: list[tuple[int, bytes, Agg]] = []
        for slot, tid in enumerate(self._slot_tids):
            taken = c.take(slot)  # one test at a time: never all of them twice
            agg, kept = taken.agg, taken.kept
            if agg is not None:
                rows.append((agg.order, tid, Agg.of(agg)))
                if kept is not None and self.kept is not None:
                    self.kept[tid] = Kept.of(kept.places, kept.more, kept.llm_ms)
            if taken.head is not None:
                self._slot_evidence[slot].take_head(taken.head)
        rows.sort(key=lambda row: row[0])  # in the order the tests got their rows, as the Python fold makes them
        self.aggs.update((tid, agg) for _, tid, agg in rows)
        self._slot_tids, self._slot_evidence = [], []  # ``evidence`` holds them: let go with it

    def _add_llm_ms(self, slot: int, env: dict[str, Any] | None) -> None:
        """An LLM answer's time, added in the compiled fold's slot in file order with
        those it reads itself (``Kept.llm_ms``)."""
        d = _llm_ms(env)
        if d is not None:
            self._c.add_llm_ms(slot, d)

    def _compiled_buffer(self, buf: Any, name: str, start: int, end: int, count: bool, base: int, block: int) -> None:
        """``buffer`` in the compiled fold: Python sees only the lines it must decide."""
        counter = LineCounter(buf, base)
        fold_aggs, evidences, tally = self.fold_aggs, self._slot_evidence, self.tally

        def line(ls: int, le: int) -> None:
            self._line(buf, ls, le, name, counter, count, block)

        def body(slot: int, ms: int, pos: int, le: int, key: Any, bad_ts: bool, llm_only: bool) -> Any:
            if llm_only:  # a test without evidence: its LLM time only, for the report
                self._add_llm_ms(slot, _parsed(buf[pos:le]))
                return None
            try:
                env = coerce(orjson.loads(buf[pos:le]))
            except orjson.JSONDecodeError:
                self._malformed(counter, name, ms, "cut or not JSON", fold_aggs)
                return None
            if fold_aggs:
                tally.seen(env, lambda: f"{name}:{counter.at(ms)}")
            if bad_ts:
                self._malformed(counter, name, ms, "ts is not an RFC 3339 time", True)
                return None
            if self.kept is not None:
                self._add_llm_ms(slot, env)
            evidences[slot].add_body(env)
            return env

        def malformed(ms: int) -> None:
            self._malformed(counter, name, ms, "ts is not an RFC 3339 time", True)

        # True: a line may be folded from its metadata alone, by the compiled fold itself
        self._c.buffer(buf, start, end, block, line, body, True, malformed, evidences)

    def _plain(self, boundary: bytes) -> bool:
        plain = self._head_only.get(boundary)
        if plain is None:
            add_head = getattr(self.evidence_cls, "add_head", None)
            plain = add_head is not None and not self.evidence_cls.needs_body(boundary.decode("utf-8", "replace"))
            plain = plain and not (self.kept is not None and boundary == _LLM_RESPONSE)  # its duration is kept
            if len(self._head_only) < 4096:
                self._head_only[boundary] = plain
        return plain

    def _evidence_for(self, tid: bytes) -> Any:
        ev = self.evidence.get(tid)
        if ev is None and tid not in self.deferred:
            if self.budget is not None and len(self.evidence) >= self.budget:
                self.deferred.add(tid)
            else:
                ev = self.evidence[tid] = self.evidence_cls(tid.decode("utf-8", "replace"))
        return ev

    def _untracked(self, tid: bytes) -> bool:
        """Whether ``tid`` comes after ``max_tests`` others: counted, then left out."""
        if not self.fold_aggs or tid in self.aggs or len(self.aggs) < self.max_tests:
            return False
        self.tally.untracked += 1
        self.tally.untracked_limit = self.max_tests
        return True

    @property
    def latest(self) -> float | None:
        """Epoch seconds of the last ``ts`` folded (the end of the log, for diagnosis)."""
        return bytes_seconds(max(a.last for a in self.aggs.values())) if self.aggs else None

    def fold(self, tid: bytes, layer: bytes, boundary: bytes, slug: bytes, ts: bytes, outcome: bytes) -> Agg:
        ts = canonical_ts(ts)
        agg = self.aggs.get(tid)
        if agg is None:
            agg = self.aggs[tid] = Agg(ts)
        elif ts < agg.first:
            agg.first = ts
        elif ts > agg.last:
            agg.last = ts
        agg.events += 1
        if outcome in _FAILED:
            agg.failed = True
        if _accounting(boundary):
            return agg  # accounting: counted, but says nothing about layers or the terminal
        agg.layers.add(layer)
        if slug not in agg.slugs and len(agg.slugs) < _MAX_SLUGS:
            agg.slugs.append(slug)
        if layer == b"backend":
            agg.flags |= _BACKEND | _TERMINAL_BITS.get(boundary, 0)
        return agg

    def read(self, windows: Iterable[Window], progress: Callable[[int], None] | None = None, *, count: bool) -> None:
        """Fold every window (``split.Share.windows``); ``count``: tally malformed lines."""
        for buf, name, a, b, base, block in windows:
            self.buffer(buf, name, a, b, count_malformed=count, base_line=base, block=block)
            if progress is not None:
                progress(b - a)
        self.finish()

    def buffer(
        self,
        buf: Any,
        name: str,
        start: int = 0,
        end: int | None = None,
        count_malformed: bool = True,
        base_line: int = 1,
        block: int = 0,
    ) -> None:
        """Fold the lines of ``buf[start:end]``; ``start`` is 0 or the index of a newline.

        ``block`` numbers ``buf`` among the buffers of the inputs, for ``kept`` places;
        ``finish`` once all are folded."""
        end = len(buf) if end is None else end
        if self._c is not None:
            self._compiled_buffer(buf, name, start, end, count_malformed, base_line, block)
            return
        find = buf.find
        counter = LineCounter(buf, base_line)
        evidence, owns, only, fold_aggs = self.evidence_cls, self.owns, self.only, self.fold_aggs
        fold, kept = self.fold, self.kept
        # Hoisted so that an envelope costs no method call for the common cases: a test
        # already folded (or room for it), evidence already started.
        aggs, max_tests, evidences = self.aggs, self.max_tests, self.evidence
        gap = start
        # The next marker at or after `gap`; a marker before the next match means a line
        # the regex did not take, handled by `_gap`. -1: no more markers in the range.
        cv, sv = find(_CV, start, end), find(_SV, start, end)
        pos = find(_HEAD, start, end)
        while pos >= 0:
            le = find(b"\n", pos, end)
            if le < 0:
                le = end
            nxt = find(_HEAD, le, end)
            head = _head(buf, pos, le)
            if head is None:  # not canonical: its markers make `_gap` take the line
                pos = nxt
                continue
            ms, fields, head_end = head
            pos_json = pos
            if ms < gap:  # inside a line already handled
                pos = nxt
                continue
            ls = ms + 1 if buf[ms] == 10 else buf.rfind(b"\n", start, ms) + 1
            # Another marker before this one (anywhere in a bare line): the general parser's
            # rule for a line with several markers (its first one decides), not this head.
            lo, hi = (pos, le) if ms >= pos - 1 else (ls, ms)
            several = -1 < cv < hi and (cv >= lo or find(_CV, lo, hi) >= 0)
            if -1 < cv < ms or -1 < sv < ms:
                self._gap(buf, gap, ms, name, counter, count_malformed, block)
            gap = le
            if cv < le:
                cv = find(_CV, le, end) if cv >= 0 else -1
            if sv < le:
                sv = find(_SV, le, end) if sv >= 0 else -1
            pos = nxt
            if several or (
                buf[le - _TAIL_LEN : le] != _TAIL_FALSE and not buf[le - _TAIL_ROOM : le].rstrip().endswith(_TAILS)
            ):
                # Not the fixed tail: maybe cut, maybe trailing colour codes; the general parser decides.
                self._line(buf, ls, le, name, counter, count_malformed, block)
                continue
            tid = fields[0]
            if (owns is not None and not owns(tid)) or (only is not None and tid not in only):
                continue  # another worker's or another pass's test (which counts its malformed lines)
            if len(aggs) >= max_tests and self._untracked(tid):
                continue
            ev = None if evidence is None else (evidences.get(tid) or self._evidence_for(tid))
            if ev is None and not fold_aggs:
                continue
            tid, layer, boundary, slug, ts, mono, outcome = fields
            env = None
            plain = False
            if ev is not None:  # diagnosis needs the whole envelope, or a head that says it all
                md = head_end + len(_PLAIN_MIDDLE)
                md_end = le - len(_PLAIN_END)
                plain = (
                    self._plain(boundary)
                    and buf[head_end:md] == _PLAIN_MIDDLE
                    and buf[md_end:le] == _PLAIN_END
                    and buf[pos_json:head_end].isascii()
                    and _is_object(buf[md:md_end])
                )
                if not plain:
                    try:
                        env = coerce(orjson.loads(buf[pos_json:le]))
                    except orjson.JSONDecodeError:
                        self._malformed(counter, name, ms, "cut or not JSON", fold_aggs)
                        continue
                    if fold_aggs:
                        self.tally.seen(env, lambda c=counter, o=ms: f"{name}:{c.at(o)}")
            if fold_aggs:
                try:
                    fold(tid, layer, boundary, slug, ts, outcome)
                except ValueError:
                    self._malformed(counter, name, ms, "ts is not an RFC 3339 time", True)
                    continue
                if kept is not None:
                    if env is None and boundary == _LLM_RESPONSE:  # a deferred test's: parsed for its duration
                        env = _parsed(buf[pos_json:le])
                        self._keep(tid, block, ls, le, env)
                        env = None
                    else:
                        self._keep(tid, block, ls, le, env)
            if env is not None:
                ev.add(env)
            elif plain:
                ev.add_head(layer.decode(), boundary.decode(), outcome.decode(), ts.decode(), int(mono))
        if gap < end and (cv >= 0 or sv >= 0):
            self._gap(buf, gap, end, name, counter, count_malformed, block)

    def _gap(self, buf: Any, lo: int, hi: int, name: str, counter: LineCounter, count: bool, block: int) -> None:
        """The marked lines of ``buf[lo:hi]``, each through the general parser."""
        for ls, le in gap_lines(buf, lo, hi):
            self._line(buf, ls, le, name, counter, count, block)

    def _line(self, buf: Any, ls: int, le: int, name: str, counter: LineCounter, count: bool, block: int) -> None:
        self.parsed += 1
        kind, env, raw = parse_span(buf, ls, le)
        le = ls + len(raw)  # a line a container runtime split: where its last record ends, for ``kept``
        if kind == MALFORMED:
            self._malformed(counter, name, ls, env, count)
        if kind != ENVELOPE:
            return
        if count:
            self.tally.seen(env, lambda: f"{name}:{counter.at(ls)}")
        if self._c is not None:  # the row and the head in the compiled fold, the body here
            slot = self._c.fold_env(env, block, ls, le)
            if slot == -2:
                self._malformed(counter, name, ls, "ts is not an RFC 3339 time", count)
            elif slot >= 0:
                if self.kept is not None:
                    self._add_llm_ms(slot, env)
                ev = self._slot_evidence[slot]
                if ev is not None:
                    ev.add_body(env)
            return
        tid = env["test_id"].encode()
        if (self.owns is not None and not self.owns(tid)) or (self.only is not None and tid not in self.only):
            return
        if self._untracked(tid):
            return
        if self.fold_aggs:
            slug = env.get("slug")
            fields = (env["layer"], env["boundary"], slug if isinstance(slug, str) else "", env["ts"], env["outcome"])
            try:
                self.fold(tid, *(f.encode() for f in fields))
            except ValueError:
                self._malformed(counter, name, ls, "ts is not an RFC 3339 time", count)
                return
            if self.kept is not None:
                self._keep(tid, block, ls, le, env)
        ev = self._evidence_for(tid) if self.evidence_cls is not None else None
        if ev is not None:
            ev.add(env)

    def _keep(self, tid: bytes, block: int, ls: int, le: int, env: dict[str, Any] | None) -> None:
        """Where the envelope at ``buf[ls:le]`` of ``tid`` is (the first ``keep_lines``), and
        its duration when it is an LLM call's response (``env``: parsed, or None)."""
        assert self.kept is not None  # only called when keeping
        kept = self.kept.get(tid)
        if kept is None:
            kept = self.kept[tid] = Kept()
        if len(kept.places) < 3 * self.keep_lines and max(block, le) <= _PLACE_MAX:
            kept.places.extend((block, ls, le))
        else:
            kept.more += 1
        d = _llm_ms(env)
        if d is not None:
            kept.llm_ms = (kept.llm_ms or 0.0) + d

    def _malformed(self, counter: LineCounter, name: str, offset: int, reason: str, count: bool) -> None:
        if count:
            self.tally.add(lambda: f"{name}:{counter.at(offset)}", reason)


def gap_lines(buf: Any, lo: int, hi: int) -> Iterator[tuple[int, int]]:
    """(start, end) of the marked lines of ``buf[lo:hi]`` that end by ``hi``: the lines
    between two canonical ones, which the general parser reads.

    Each marker's next position is kept until a line passes it: searching again
    from every line would cost the rest of the gap per line (quadratic).
    """
    find, rfind = buf.find, buf.rfind
    cv, sv = find(_CV, lo, hi), find(_SV, lo, hi)
    while cv >= 0 or sv >= 0:
        p = sv if cv < 0 or (0 <= sv < cv) else cv
        ls = rfind(b"\n", lo, p) + 1  # lo is 0 or a newline, so this never falls before it
        le = find(b"\n", p)
        if le < 0:
            le = len(buf)
        if le > hi:  # the line of the next canonical match: it is read there
            return
        yield ls, le
        if 0 <= cv <= le:
            cv = find(_CV, le + 1, hi)
        if 0 <= sv <= le:
            sv = find(_SV, le + 1, hi)


def aggregate_share(share: Share) -> tuple[dict[bytes, Agg], Tally, float | None]:
    """(aggregates, tally, latest ``ts``) of ``share``'s byte range of every buffer: the
    work of one process when ``tests`` does not diagnose (aggregates merge)."""
    folder = Fold()
    folder.read(share.windows(by_range=True), share.progress_of_all(), count=True)
    return folder.aggs, folder.tally, folder.latest


def merged_aggs(parts: Iterable[dict[bytes, Agg]], tally: Tally) -> dict[bytes, Agg]:
    """The workers' aggregates as one, at most ``MAX_TESTS`` ids (each worker kept that many)."""
    aggs: dict[bytes, Agg] = {}
    for part_aggs in parts:
        for tid, agg in part_aggs.items():
            if tid in aggs:
                aggs[tid].merge(agg)
            elif len(aggs) < MAX_TESTS:
                aggs[tid] = agg
            else:
                tally.untracked += agg.events
                tally.untracked_limit = MAX_TESTS
    return aggs


def rows_of(
    aggs: dict[bytes, Agg],
    verdict: Callable[[bytes, dict[str, Any]], Any] | None = None,
    kept: dict[bytes, Kept] | None = None,
) -> Iterator[dict[str, Any]]:
    """Rows of the tests that have more than accounting envelopes, in ``aggs``' order,
    with their class if ``verdict`` is given (it is asked for each test's, given the test
    id and its row: a class, or the verdict, as JSON or a judgement with its ``cls``, then
    kept whole in ``_diagnosis``),
    and what ``kept`` holds of them under ``_kept``. Made one at a time, each test's
    aggregate and kept facts let go as its row is made: whoever takes the rows one by one
    never holds them beside every aggregate."""
    for tid in list(aggs):
        agg = aggs.pop(tid)
        held = kept.pop(tid, None) if kept is not None else None
        if not agg.layers:  # only accounting envelopes: about cvdiag, not about a test
            continue
        row = agg.row(tid)
        if verdict is not None:
            v = verdict(tid, row)
            if type(v) is str:
                row["class"] = v
            else:
                row["class"], row["_diagnosis"] = v["class"] if type(v) is dict else v.cls, v
        if kept is not None:
            row["_kept"] = held or Kept()
        yield row
