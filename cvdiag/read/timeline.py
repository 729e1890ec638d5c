"""One test's timeline: its envelopes, legacy breadcrumbs and (optionally) app log lines, in time order.

The one timeline model: ``cvdiag timeline``, ``diagnose``, ``--follow`` and the pytest
failure report all build it here and draw it with ``face.render.timeline_table``. Entries
are ordered by the one order key (``contract.timestamps.order_key``), lines read earlier
first on a tie. Only lines holding the test id's bytes are parsed (a plain ``find``), so
looking one test up in a big log costs little more than ``grep -F``.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

from cvdiag.contract.timestamps import key_seconds, line_ts, order_key, seconds_key
from cvdiag.read import parsing, scan
from cvdiag.read._kept import Kept
from cvdiag.read.jsonout import dumps
from cvdiag.read.parsing import BREADCRUMB, ENVELOPE, MALFORMED, NOTHING, Tally
from cvdiag.read.sources import Source


class Entry:
    """One row of a timeline: an envelope, a legacy breadcrumb, or an app log line."""

    __slots__ = ("data", "key", "kind", "seq", "source")

    def __init__(self, key: int, seq: int, kind: str, data: Any, source: str) -> None:
        self.key = key  # ``order_key``: (ts, mono_ns) in one int
        self.seq = seq  # the order it was read in, which breaks a tie
        self.kind = kind  # "envelope" | "breadcrumb" | "log"
        self.data = data  # envelope dict, breadcrumb dict, or the log line's text
        self.source = source

    @property
    def seconds(self) -> float:
        """Its time, epoch seconds."""
        return key_seconds(self.key)


def envelope_entry(env: dict[str, Any], source: str, seq: int, previous: int = 0) -> Entry:
    """An envelope's entry; one with no time takes ``previous``'s place."""
    key = order_key(env.get("ts"), env.get("mono_ns"))
    return Entry(previous if key is None else key, seq, "envelope", env, source)


def ordered(entries: Iterable[Entry]) -> list[Entry]:
    """``entries`` in time order, an envelope read twice (two sinks, or in-process and a log) kept once."""
    out = _unique(entries)
    out.sort(key=lambda e: (e.key, e.seq))
    return out


class Timeline:
    """One test's entries in time order; ``candidates`` are the ids the prefix matched."""

    __slots__ = ("candidates", "entries", "log_end", "tally", "test_id")

    def __init__(self, test_id: str | None, candidates: list[str], tally: Tally, log_end: float | None) -> None:
        self.test_id = test_id
        self.entries: list[Entry] = []
        self.candidates = candidates  # more than one and none equal to the prefix: ambiguous
        self.tally = tally
        self.log_end = log_end

    @property
    def envelopes(self) -> list[dict[str, Any]]:
        return [e.data for e in self.entries if e.kind == "envelope"]


def timeline(sources: list[Source], prefix: str, *, with_logs: bool = False) -> Timeline:
    """Every entry of the test whose id is ``prefix`` or starts with it, in time order.

    ``candidates`` lists the matching ids; more than one (none equal to ``prefix``) means
    the prefix is ambiguous and ``entries`` is empty.
    """
    tally = Tally()
    ends: list[float] = []
    found: dict[str, Kept] = {}  # bounded: a test may have millions of lines
    logs = Kept()
    for tid, entry in entries_for(sources, prefix, with_logs=with_logs, tally=tally, ends=ends):
        if entry.kind == "log":
            logs.add(entry)
        elif tid.startswith(prefix):
            kept = found.get(tid)
            if kept is None:
                kept = found[tid] = Kept()
            kept.add(entry)
        elif with_logs:  # another test's line that mentions this id: still a log line
            logs.add(Entry(entry.key, entry.seq, "log", dumps(entry.data).decode(), entry.source))
    log_end = max(ends) if ends else None
    ids = sorted(found)
    if prefix in found:
        ids = [prefix]
    tl = Timeline(ids[0] if len(ids) == 1 else None, candidates=ids, tally=tally, log_end=log_end)
    if tl.test_id is not None:
        tally.trimmed = found[tl.test_id].dropped + logs.dropped
        tl.entries = ordered([*found[tl.test_id].entries(), *logs.entries()])
    return tl


def entries_for(
    sources: list[Source], needle: str, *, with_logs: bool, tally: Tally, ends: list[float] | None = None
) -> Iterator[tuple[str, Entry]]:
    """(test_id, entry) for every line of ``sources`` that holds ``needle``.

    Lines with no time of their own inherit the previous line's place in their file.
    """
    seq = 0
    for src in sources:
        key = _EPOCH_KEY
        for buf in src.blocks():
            if ends is not None:
                t = scan.tail_ts(buf)
                if t is not None:
                    ends.append(t)
            counter = scan.LineCounter(buf)
            for ls, le in scan.lines_with(buf, needle.encode()):
                if le - ls > parsing.MAX_LINE:
                    tally.add(lambda c=counter, s=src, o=ls: f"{s.name}:{c.at(o)}", parsing.LONG_LINE)
                    continue
                raw = buf[ls:le]
                kind, value = parsing.parse_line(raw)
                seq += 1
                if kind == ENVELOPE:
                    tally.seen(value, lambda c=counter, s=src, o=ls: f"{s.name}:{c.at(o)}")
                    entry = envelope_entry(value, src.name, seq, key)
                    key = entry.key
                    yield value["test_id"], entry
                elif kind == BREADCRUMB:
                    key = _placed(raw, key)
                    yield value["test_id"], Entry(key, seq, "breadcrumb", value, src.name)
                elif kind == MALFORMED:
                    tally.add(lambda c=counter, s=src, o=ls: f"{s.name}:{c.at(o)}", value)
                elif kind == NOTHING and with_logs:
                    text, _ = parsing.unwrap(raw)
                    key = _placed(raw, key)
                    yield "", Entry(key, seq, "log", text.decode("utf-8", "replace"), src.name)


_EPOCH_KEY = seconds_key(0.0)  # lines before any time sort first


def _placed(raw: bytes, previous: int) -> int:
    """A line's order key by the time it shows (its wrapper's, else the first in its text),
    else ``previous``'s."""
    text, wrapper_ts = parsing.unwrap(raw)
    t = None
    if wrapper_ts:
        t = line_ts(wrapper_ts)
    if t is None:
        t = line_ts(text[:200].decode("utf-8", "replace"))
    return seconds_key(t) if t is not None else previous


def identity(env: dict[str, Any]) -> tuple[Any, ...]:
    """What makes two lines one envelope written twice (stdout and the file sink both given)."""
    return (env.get("span_id"), env["boundary"], env["ts"], str(env.get("mono_ns")))


def _unique(entries: Iterable[Entry]) -> list[Entry]:
    """Drops repeats of one envelope, as when stdout and the file sink are both given."""
    seen: set[tuple[Any, ...]] = set()
    out = []
    for e in entries:
        if e.kind == "envelope":
            key = identity(e.data)
            if key in seen:
                continue
            seen.add(key)
        out.append(e)
    return out
