"""Two tests side by side: their events aligned by boundary, and where they part ways.

Typically A is a passing run and B a failing run of the same test. Each test's events
are keyed by (boundary, n-th occurrence of that boundary), so retried LLM attempts pair
up in order (A's first ``backend.llm.call.response`` with B's first), and the two key
sequences are aligned with ``difflib.SequenceMatcher``. Every aligned step says what
differs (outcome, duration, the silence before it, a boundary only one side has); the
first step that differs is the divergence a person should look at.

Pure data, like ``diagnose``: no I/O, no rendering. Faces use it as::

    result = compare(a_envelopes, b_envelopes)    # each: one test's envelopes (dicts)
    result.divergence                              # "B: backend.llm.call.response err (500) where A had ok"
    for step in result.steps:                      # in time order
        step.boundary, step.a, step.b, step.differences   # a/b: Side or None
    result.to_json()                               # what ``cvdiag compare --json`` prints
"""

from __future__ import annotations

import difflib
import heapq
import operator
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from cvdiag.contract.schema import FAILURE_OUTCOMES
from cvdiag.contract.timestamps import order_key, parse_ts
from cvdiag.read.toolcalls import ToolCall, is_tool_line, tool_calls

#: A time difference counts when the longer side is at least this long (ms) ...
SIGNIFICANT_MS = 1000
#: ... and at least this many times the shorter side.
SIGNIFICANT_RATIO = 2.0

#: Boundaries a test repeats a varying number of times (ticks of a stream or a wait):
#: one side having more of them is a consequence, never the divergence itself.
REPEATING = frozenset({"backend.llm.call.heartbeat", "backend.sse.event", "probe.sse.event", "aimock.sse.chunk"})

#: Short names for sentences about durations.
_LABELS = {
    "backend.llm.call.response": "LLM call",
    "backend.agent.exit": "agent",
    "backend.response.complete": "request",
    "backend.sse.aborted": "stream",
    "aimock.response.complete": "aimock response",
    "probe.exit": "probe",
}

#: Metadata keys that say why an outcome was what it was, most telling first.
_DETAIL_KEYS = (
    "http_status",
    "error_kind",
    "error_type",
    "error_class",
    "exception_type",
    "termination_kind",
    "terminal_outcome",
    "status",
    "response_status",
)


@dataclass(frozen=True, slots=True)
class Side:
    """One test's event at an aligned step."""

    envelope: Mapping[str, Any]
    #: Seconds since this test's first event.
    offset_s: float
    #: Seconds since this test's previous event (0 for the first).
    gap_s: float

    @property
    def outcome(self) -> str:
        return str(self.envelope.get("outcome", ""))

    @property
    def duration_ms(self) -> float | None:
        value = self.envelope.get("duration_ms")
        return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None

    @property
    def detail(self) -> str:
        """What explains the outcome, e.g. ``500`` or ``rst``; empty when nothing does."""
        md = self.envelope.get("metadata")
        if not isinstance(md, Mapping):
            return ""
        for key in _DETAIL_KEYS:
            value = md.get(key)
            if value is not None and value != "" and not (key == "terminal_outcome" and value == "ok"):
                return str(value)
        return ""

    @property
    def outcome_text(self) -> str:
        """The outcome with what explains it: ``err (500)``, ``ok``."""
        detail = self.detail
        return f"{self.outcome} ({detail})" if detail and detail != self.outcome else self.outcome

    def to_json(self) -> dict[str, Any]:
        return {
            "ts": self.envelope.get("ts"),
            "offset_ms": round(self.offset_s * 1000),
            "gap_ms": round(self.gap_s * 1000),
            "outcome": self.outcome,
            "duration_ms": self.envelope.get("duration_ms"),
            "detail": self.detail or None,
        }


@dataclass(frozen=True, slots=True)
class Step:
    """One row of the comparison: the same boundary in both tests, or in one only."""

    boundary: str
    a: Side | None
    b: Side | None
    #: Sentences naming what differs; empty when the two sides agree.
    differences: tuple[str, ...]
    #: The differences are a consequence only (more or fewer ticks of a stream or a wait).
    minor: bool = False

    @property
    def offset_s(self) -> float:
        """Where the step sits in time: B's offset when B has it, else A's."""
        side = self.b or self.a
        return side.offset_s if side is not None else 0.0

    def to_json(self) -> dict[str, Any]:
        return {
            "boundary": self.boundary,
            "a": self.a.to_json() if self.a else None,
            "b": self.b.to_json() if self.b else None,
            "differences": list(self.differences),
        }


@dataclass(frozen=True, slots=True)
class Comparison:
    """Tests A and B aligned step by step; ``divergence`` is the first real difference."""

    a_id: str
    b_id: str
    steps: tuple[Step, ...]
    a_duration_ms: int | None
    b_duration_ms: int | None
    #: Each test's tool calls (``read.toolcalls``), in time order.
    a_tools: tuple[ToolCall, ...] = ()
    b_tools: tuple[ToolCall, ...] = ()

    @property
    def divergence_index(self) -> int | None:
        for i, step in enumerate(self.steps):
            if step.differences and not step.minor:
                return i
        return None

    @property
    def divergence(self) -> str | None:
        """The first sentence of the first step that differs (repeating ticks aside)."""
        i = self.divergence_index
        return None if i is None else self.steps[i].differences[0]

    def to_json(self) -> dict[str, Any]:
        i = self.divergence_index
        return {
            "a": {
                "test_id": self.a_id,
                "events": _count(self.steps, "a"),
                "duration_ms": self.a_duration_ms,
                "tool_calls": [c.to_json() for c in self.a_tools],
            },
            "b": {
                "test_id": self.b_id,
                "events": _count(self.steps, "b"),
                "duration_ms": self.b_duration_ms,
                "tool_calls": [c.to_json() for c in self.b_tools],
            },
            "first_divergence": None
            if i is None
            else {"index": i, "boundary": self.steps[i].boundary, "reason": self.steps[i].differences[0]},
            "steps": [s.to_json() for s in self.steps],
        }


def _count(steps: Iterable[Step], side: str) -> int:
    return sum(getattr(s, side) is not None for s in steps)


def _seconds(env: Mapping[str, Any]) -> float:
    try:
        return parse_ts(str(env.get("ts")))
    except ValueError:
        return float("nan")


def _order(env: Mapping[str, Any]) -> tuple[bool, int]:
    """The one order key (``order_key``); an envelope without a time goes last."""
    key = order_key(env.get("ts"), env.get("mono_ns"))
    return (key is None, key or 0)


def _in_order(envelopes: Iterable[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    """One test's envelopes that name a boundary, in time order."""
    return sorted((e for e in envelopes if isinstance(e.get("boundary"), str)), key=_order)


def _sides(envelopes: Iterable[Mapping[str, Any]]) -> tuple[list[tuple[str, int]], list[Side], int | None]:
    """(keys, sides, duration in ms) of one test's events in time order."""
    ordered = _in_order(envelopes)
    times = [_seconds(e) for e in ordered]
    known = [t for t in times if t == t]
    start = known[0] if known else 0.0
    keys: list[tuple[str, int]] = []
    sides: list[Side] = []
    seen: dict[str, int] = {}
    previous = start
    for env, t in zip(ordered, times, strict=True):
        t = previous if t != t else t  # an unreadable time stays where it was logged
        boundary = _step_name(env)
        n = seen.get(boundary, 0)
        seen[boundary] = n + 1
        keys.append((boundary, n))
        sides.append(Side(env, t - start, max(0.0, t - previous)))
        previous = max(previous, t)
    duration = round((known[-1] - start) * 1000) if known else None
    return keys, sides, duration


def _step_name(env: Mapping[str, Any]) -> str:
    """The boundary, and for a tool line the tool: the n-th call of a tool in A pairs with
    the n-th call of the same tool in B, whatever other tools ran in between."""
    boundary = env["boundary"]
    if is_tool_line(env):
        md = env.get("metadata")
        name = md.get("tool_name") if isinstance(md, Mapping) else None
        if isinstance(name, str) and name:
            return f"{boundary} {name}"
    return boundary


def _significant(x_ms: float, y_ms: float) -> bool:
    longer, shorter = max(x_ms, y_ms), min(x_ms, y_ms)
    return longer >= SIGNIFICANT_MS and longer >= SIGNIFICANT_RATIO * max(shorter, 1.0)


def _seconds_text(ms: float) -> str:
    return f"{ms:.0f} ms" if ms < 1000 else f"{ms / 1000:.1f} s"


def _label(boundary: str) -> str:
    return _LABELS.get(boundary, boundary)


def _paired(boundary: str, a: Side, b: Side) -> tuple[str, ...]:
    found = []
    if a.outcome != b.outcome or (a.detail != b.detail and b.outcome in FAILURE_OUTCOMES):
        found.append(f"B: {boundary} {b.outcome_text} where A had {a.outcome_text}")
    da, db = a.duration_ms, b.duration_ms
    if da is not None and db is not None and _significant(da, db):
        found.append(f"{_label(boundary)} took {_seconds_text(db)} in B vs {_seconds_text(da)} in A")
    ga, gb = a.gap_s * 1000, b.gap_s * 1000
    if _significant(ga, gb):
        found.append(f"B waited {_seconds_text(gb)} before {boundary} where A waited {_seconds_text(ga)}")
    return tuple(found)


def _only(boundary: str, n: int, side: Side, which: str) -> str:
    """The sentence for a boundary one side lacks; the n-th (from 0) of its name."""
    attempt = f" (attempt {n + 1})" if ".llm.call." in boundary and n else ""
    if which == "a":
        return f"B has no {boundary}{attempt}"
    failed = side.outcome in FAILURE_OUTCOMES
    return f"B has an extra {boundary}{attempt}" + (f" {side.outcome_text}" if failed else "")


def compare(
    a_envelopes: Iterable[Mapping[str, Any]],
    b_envelopes: Iterable[Mapping[str, Any]],
    *,
    a_id: str | None = None,
    b_id: str | None = None,
) -> Comparison:
    """Align two tests' envelopes by boundary and say where B departs from A."""
    a_env, b_env = list(a_envelopes), list(b_envelopes)
    a_keys, a_sides, a_ms = _sides(a_env)
    b_keys, b_sides, b_ms = _sides(b_env)
    # Heartbeats and stream events are paired by occurrence, outside the alignment: they
    # are most of a debug-tier test's events, and interleaved differently on each side they
    # would make SequenceMatcher quadratic. Only the boundaries that tell the story are aligned.
    a_main = [i for i, k in enumerate(a_keys) if k[0] not in REPEATING]
    b_main = [j for j, k in enumerate(b_keys) if k[0] not in REPEATING]
    steps = _aligned(
        [a_keys[i] for i in a_main],
        [a_sides[i] for i in a_main],
        [b_keys[j] for j in b_main],
        [b_sides[j] for j in b_main],
    )
    repeating = _aligned_by_occurrence(a_keys, a_sides, b_keys, b_sides)
    steps = list(heapq.merge(steps, repeating, key=_BY_OFFSET))
    return Comparison(
        a_id=a_id or _test_id(a_env),
        b_id=b_id or _test_id(b_env),
        steps=tuple(steps),
        a_duration_ms=a_ms,
        b_duration_ms=b_ms,
        a_tools=tuple(tool_calls(_in_order(a_env))),
        b_tools=tuple(tool_calls(_in_order(b_env))),
    )


_BY_OFFSET = operator.attrgetter("offset_s")


def _aligned(a_keys: list, a_sides: list[Side], b_keys: list, b_sides: list[Side]) -> list[Step]:
    """Steps of the two key sequences aligned by ``SequenceMatcher``, in order."""
    steps: list[Step] = []
    matcher = difflib.SequenceMatcher(None, a_keys, b_keys, autojunk=False)
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        if tag == "equal":
            for i, j in zip(range(i1, i2), range(j1, j2), strict=True):
                boundary = a_keys[i][0]
                steps.append(Step(boundary, a_sides[i], b_sides[j], _paired(boundary, a_sides[i], b_sides[j])))
            continue
        steps += _lone(
            [(a_keys[i], a_sides[i], "a") for i in range(i1, i2)]
            + [(b_keys[j], b_sides[j], "b") for j in range(j1, j2)]
        )
    return steps


def _aligned_by_occurrence(a_keys: list, a_sides: list[Side], b_keys: list, b_sides: list[Side]) -> list[Step]:
    """Steps of the repeating boundaries: the n-th of a name in A beside the n-th in B."""
    in_b = {k: side for k, side in zip(b_keys, b_sides, strict=True) if k[0] in REPEATING}
    steps: list[Step] = []
    leftovers: list[tuple[Any, Side, str]] = []
    for key, side in zip(a_keys, a_sides, strict=True):
        if key[0] not in REPEATING:
            continue
        other = in_b.pop(key, None)
        if other is None:
            leftovers.append((key, side, "a"))
        else:
            steps.append(Step(key[0], side, other, _paired(key[0], side, other), minor=True))
    leftovers += [(key, side, "b") for key, side in in_b.items()]
    return list(heapq.merge(steps, _lone(leftovers), key=_BY_OFFSET))


def _lone(found: list[tuple[Any, Side, str]]) -> list[Step]:
    """Steps for events one side only has, A's and B's interleaved by their offsets."""
    steps = []
    for (boundary, n), side, which in sorted(found, key=lambda x: (x[1].offset_s, x[2])):
        a_side, b_side = (side, None) if which == "a" else (None, side)
        steps.append(Step(boundary, a_side, b_side, (_only(boundary, n, side, which),), minor=boundary in REPEATING))
    return steps


def _test_id(envelopes: list[Mapping[str, Any]]) -> str:
    for env in envelopes:
        if isinstance(env.get("test_id"), str):
            return env["test_id"]
    return ""
