"""The bulk path of ``tests``: fold a whole buffer into per-test aggregates fast.

``find`` locates each ``{"schema_version":1,"test_id":"`` (C speed over the noise);
an envelope in the emitter's canonical layout there (after ``CVDIAG ``, after
``CVDIAG_EVENT ``, or a bare NDJSON line) gives up the six fields ``tests`` needs to
one anchored regex over its head, and a fixed-tail check catches cut lines, so it is
never JSON-parsed. Markers found between those lines (Docker json-file, escaped
strings, other key orders, cut or broken lines) send their line through the general
``reader.parse_line``, so every shape is read and every malformed line counted.
Diagnosis parses the envelopes it folds, except SSE events and the like, whose head
fields are all it needs once a fixed middle and tail show the line is valid JSON.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import orjson

from cvdiag.contract.schema import EDGE_HEADERS, FAILURE_OUTCOMES, LAYERS
from cvdiag.contract.timestamps import bytes_seconds, canonical_ts
from cvdiag.read import reader
from cvdiag.read.reader import ENVELOPE, MALFORMED, Tally

_HEAD = b'{"schema_version":1,"test_id":"'
# No escapes and no control characters in the leading strings, JSON-valid integers: a
# line that matches is JSON up to its edge headers (others go to the general parser).
_Q = rb'"([^"\\\x00-\x1f]*)"'
_S = rb'"[^"\\\x00-\x1f]*"'
_INT = rb"-?(?:0|[1-9]\d*)"
# Anchored at a `_HEAD` found by `find`: only a few hundred bytes are matched per envelope.
_CANONICAL = re.compile(
    rb'\{"schema_version":1,"test_id":' + _Q + rb',"trace_id":' + _S + rb',"span_id":' + _S
    + rb',"parent_span_id":(?:null|' + _S + rb'),"layer":' + _Q + rb',"boundary":' + _Q + rb',"slug":' + _Q
    + rb',"demo":' + _S + rb',"ts":' + _Q + rb',"mono_ns":(' + _INT + rb'),"duration_ms":(?:null|' + _INT + rb')'
    + rb',"outcome":' + _Q
    + rb',"edge_headers":\{'
)  # fmt: skip
# The rest of an envelope that says nothing beyond its head (every SSE event): the
# emitter's all-null edge headers, its metadata object, its usual tail. Checked so, with
# a JSON parse of the small metadata only, the line is known to be valid JSON.
_PLAIN_MIDDLE = b",".join(b'"%s":null' % k.encode() for k in EDGE_HEADERS) + b'},"metadata":'
_PLAIN_END = b',"_metadata_dropped":false,"_truncated":false}'


def _is_object(raw: Any) -> bool:
    try:
        return type(orjson.loads(raw)) is dict
    except orjson.JSONDecodeError:
        return False


def _head(buf: Any, pos: int, le: int) -> tuple[int, tuple[bytes, ...], int] | None:
    """(where the line's envelope starts, its seven fields, where the head ends) when the
    envelope at ``pos`` is in the emitter's canonical layout, else None.

    Canonical: right after ``CVDIAG ``, ``CVDIAG_EVENT `` or at a line start, keys in
    wire order, compact, no escapes or control characters in the leading fields.
    """
    if buf[pos - 7 : pos] == b"CVDIAG ":
        ms = pos - 7
    elif buf[pos - 13 : pos] == b"CVDIAG_EVENT ":
        ms = pos - 13
    elif pos == 0 or buf[pos - 1] == 10:
        ms = pos - 1 if pos else 0
    else:
        return None
    m = _CANONICAL.match(buf, pos, le)
    return None if m is None else (ms, m.groups(), m.end())


_TAIL_FALSE = b'"_truncated":false}'
_TAILS = (_TAIL_FALSE, b'"_truncated":true}')
_FAILED = frozenset(o.encode() for o in FAILURE_OUTCOMES)
_ABORTED, _COMPLETE, _ERROR, _BACKEND = 1, 2, 4, 8
_TERMINAL_BITS = {
    b"backend.sse.aborted": _ABORTED,
    b"backend.response.complete": _COMPLETE,
    b"backend.error.caught": _ERROR,
}
_MAX_SLUGS = 4


class Agg:
    """Running facts about one test id; mergeable, so workers can split a file."""

    __slots__ = ("events", "failed", "first", "flags", "last", "layers", "slugs")

    def __init__(self, ts: bytes) -> None:
        self.events = 0
        self.layers: set[bytes] = set()
        self.slugs: list[bytes] = []
        self.first = self.last = ts  # canonical bytes: compared as bytes
        self.flags = 0
        self.failed = False

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
        if f & _ABORTED:
            return "aborted"
        if f & _COMPLETE:
            return "complete"
        if f & _ERROR:
            return "error"
        return "incomplete" if f & _BACKEND else "none"

    def row(self, test_id: bytes) -> dict[str, Any]:
        terminal = self.terminal
        layers = {x.decode("utf-8", "replace") for x in self.layers}
        return {
            "test_id": test_id.decode("utf-8", "replace"),
            "slug": ",".join(s.decode("utf-8", "replace") for s in self.slugs),
            "layers": [x for x in LAYERS if x in layers] + sorted(layers - set(LAYERS)),
            "events": self.events,
            "first_ts": self.first.decode(),
            "last_ts": self.last.decode(),
            "duration_ms": round((bytes_seconds(self.last) - bytes_seconds(self.first)) * 1000),
            "terminal": terminal,
            "status": "fail" if self.failed or terminal != "complete" else "ok",
        }


class Folder:
    """Folds buffers into per-test aggregates (``aggs``) and, given an ``Evidence``
    class, into diagnosis evidence (``evidence``), which needs every envelope parsed
    except those whose head says it all (``Evidence.add_head``: most of a log).

    Evidence costs about 1.7 KB per test, so at most ``budget`` tests get one per
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
        self._head_only: dict[bytes, bool] = {}  # boundary -> may go to Evidence.add_head

    def _plain(self, boundary: bytes) -> bool:
        plain = self._head_only.get(boundary)
        if plain is None:
            add_head = getattr(self.evidence_cls, "add_head", None)
            plain = add_head is not None and not self.evidence_cls.needs_body(boundary.decode("utf-8", "replace"))
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
        if boundary.startswith(b"cvdiag."):
            return agg  # accounting: counted, but says nothing about layers or the terminal
        agg.layers.add(layer)
        if slug not in agg.slugs and len(agg.slugs) < _MAX_SLUGS:
            agg.slugs.append(slug)
        if layer == b"backend":
            agg.flags |= _BACKEND | _TERMINAL_BITS.get(boundary, 0)
        return agg

    def buffer(
        self,
        buf: Any,
        name: str,
        start: int = 0,
        end: int | None = None,
        count_malformed: bool = True,
        base_line: int = 1,
    ) -> None:
        """Fold the lines of ``buf[start:end]``; ``start`` is 0 or the index of a newline."""
        end = len(buf) if end is None else end
        find = buf.find
        counter = reader.LineCounter(buf, base_line)
        evidence, owns, only, fold_aggs = self.evidence_cls, self.owns, self.only, self.fold_aggs
        fold = self.fold
        gap = start
        # The next marker at or after `gap`; a marker before the next match means a line
        # the regex did not take, handled by `_gap`. -1: no more markers in the range.
        cv, sv = find(b"CVDIAG", start, end), find(b"schema_version", start, end)
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
            if -1 < cv < ms or -1 < sv < ms:
                self._gap(buf, gap, ms, name, counter, count_malformed)
            gap = le
            if cv < le:
                cv = find(b"CVDIAG", le, end) if cv >= 0 else -1
            if sv < le:
                sv = find(b"schema_version", le, end) if sv >= 0 else -1
            pos = nxt
            if buf[le - 19 : le] != _TAIL_FALSE and not buf[le - 40 : le].rstrip().endswith(_TAILS):
                # Not the fixed tail: maybe cut, maybe trailing colour codes; the general parser decides.
                self._line(buf, ms + 1 if buf[ms] == 10 else buf.rfind(b"\n", start, ms) + 1, le, name, counter,
                           count_malformed)  # fmt: skip
                continue
            tid = fields[0]
            if (owns is not None and not owns(tid)) or (only is not None and tid not in only):
                continue  # another worker's or another pass's test (which counts its malformed lines)
            ev = self._evidence_for(tid) if evidence is not None else None
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
                        env = orjson.loads(buf[pos_json:le])
                    except orjson.JSONDecodeError:
                        self._malformed(counter, name, ms, "cut or not JSON", fold_aggs)
                        continue
            if fold_aggs:
                try:
                    fold(tid, layer, boundary, slug, ts, outcome)
                except ValueError:
                    self._malformed(counter, name, ms, "ts is not an RFC 3339 time", True)
                    continue
            if env is not None:
                ev.add(env)
            elif plain:
                ev.add_head(layer.decode(), boundary.decode(), outcome.decode(), ts.decode(), int(mono))
        if gap < end and (cv >= 0 or sv >= 0):
            self._gap(buf, gap, end, name, counter, count_malformed)

    def _gap(self, buf: Any, lo: int, hi: int, name: str, counter: reader.LineCounter, count: bool) -> None:
        find, rfind = buf.find, buf.rfind
        pos = lo
        while pos < hi:
            hits = [p for p in (find(b"CVDIAG", pos, hi), find(b"schema_version", pos, hi)) if p >= 0]
            if not hits:
                return
            p = min(hits)
            ls = rfind(b"\n", lo, p) + 1  # lo is 0 or a newline, so this never falls before it
            le = find(b"\n", p)
            if le < 0:
                le = len(buf)
            if le > hi:  # the line of the next canonical match: it is folded there
                return
            self._line(buf, ls, le, name, counter, count)
            pos = le + 1

    def _line(self, buf: Any, ls: int, le: int, name: str, counter: reader.LineCounter, count: bool) -> None:
        kind, env = reader.parse_span(buf, ls, le)
        if kind == MALFORMED:
            self._malformed(counter, name, ls, env, count)
        if kind != ENVELOPE:
            return
        tid = env["test_id"].encode()
        if (self.owns is not None and not self.owns(tid)) or (self.only is not None and tid not in self.only):
            return
        if self.fold_aggs:
            slug = env.get("slug")
            fields = (env["layer"], env["boundary"], slug if isinstance(slug, str) else "", env["ts"], env["outcome"])
            try:
                self.fold(tid, *(f.encode() for f in fields))
            except ValueError:
                self._malformed(counter, name, ls, "ts is not an RFC 3339 time", count)
                return
        ev = self._evidence_for(tid) if self.evidence_cls is not None else None
        if ev is not None:
            ev.add(env)

    def _malformed(self, counter: reader.LineCounter, name: str, offset: int, reason: str, count: bool) -> None:
        if count:
            self.tally.add(lambda: f"{name}:{counter.at(offset)}", reason)
