"""A test's tool calls from its ``backend.tool.call.start/response`` envelopes, paired by
call id: what the faces (timeline, compare, the pytest report) show of them.

The wire carries no arguments or results, only sizes, a hash and, for a failed call,
its scrubbed excerpt: that is all there is to show. Read side; pure.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from cvdiag.contract.timestamps import order_key
from cvdiag.contract.tool_pairs import model_call_id, same_call

START = "backend.tool.call.start"
RESPONSE = "backend.tool.call.response"
#: A timeline shows this many tool calls in its table; the rest are counted.
MAX_SHOWN = 50
_EXCERPT_CHARS = 120


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None


def _number(value: Any) -> float | None:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


class ToolCall:
    """One tool call: its name, where it was seen, how it ended (``open``: no response).

    A plain slotted class, not a dataclass: every CLI start-up imports this module, and
    making a dataclass costs more than the rest of it."""

    __slots__ = ("call_id", "duration_ms", "error_class", "error_kind", "excerpt", "handed_back", "name", "outcome",
                 "server", "source")  # fmt: skip

    def __init__(self, name: str, source: str | None, server: str | None, outcome: str,
                 duration_ms: float | None, error_kind: str | None, excerpt: str | None,
                 error_class: str | None = None, call_id: str | None = None) -> None:  # fmt: skip
        self.name, self.source, self.server, self.outcome = name, source, server, outcome
        self.duration_ms, self.error_kind, self.excerpt = duration_ms, error_kind, excerpt
        self.error_class, self.call_id = error_class, call_id
        #: A call (MCP, or a span's) whose result the framework also handed back to the model
        #: (a ``wire`` call shown as this one, ``contract.tool_pairs``).
        self.handed_back = False

    def __eq__(self, other: object) -> bool:
        return isinstance(other, ToolCall) and self.to_json() == other.to_json()

    __hash__ = None  # type: ignore[assignment]

    @property
    def failed(self) -> bool:
        """Outcome err, or a timeout of the tool's own; not a wire call given up (``given_up``)."""
        if self.outcome == "timeout":
            return self.error_kind is not None and not self.given_up
        return self.outcome == "err"

    @property
    def given_up(self) -> bool:
        """A ``wire`` call whose result never came back before its request ended."""
        return self.outcome == "timeout" and self.source == "wire"

    @property
    def where(self) -> str:
        """``mcp, server weather``: where the call was seen (``mcp+wire``: also handed back)."""
        return ", ".join(p for p in (self.seen_on, f"server {self.server}" if self.server else None) if p)

    @property
    def seen_on(self) -> str | None:
        """The source, ``mcp+wire`` for an MCP call also seen on its hand-back to the model."""
        return f"{self.source}+wire" if self.handed_back else self.source

    def label(self) -> str:
        """``forecast (mcp, server weather)``."""
        return f"{self.name} ({self.where})" if self.where else self.name

    def failure(self) -> str:
        """``protocol: 'Unknown city: Atlantis'``, or '' for a call that did not fail."""
        if not self.failed:
            return ""
        excerpt = self.excerpt or ""
        if len(excerpt) > _EXCERPT_CHARS:
            excerpt = excerpt[: _EXCERPT_CHARS - 1] + "…"
        kind = self.error_kind or self.outcome
        if self.error_class:
            kind += f" {self.error_class}"
        return f"{kind}: {excerpt!r}" if excerpt else kind

    def to_json(self) -> dict[str, Any]:
        out = {
            "tool": self.name,
            "source": self.source,
            "server": self.server,
            "outcome": self.outcome,
            "duration_ms": self.duration_ms,
            "error_kind": self.error_kind,
            "error_excerpt": self.excerpt,
            "handed_back": self.handed_back,
        }
        if self.error_class:  # a span's or a hook's: the exception the tool raised
            out["error_class"] = self.error_class
        return out


def is_tool_line(envelope: Mapping[str, Any]) -> bool:
    return envelope.get("boundary") in (START, RESPONSE)


def tool_calls(envelopes: Iterable[Mapping[str, Any]]) -> list[ToolCall]:
    """The tool calls of one test's envelopes (in time order), a response paired with the
    start of the same call id; a start never answered is ``open``. One MCP call also seen
    on the wire (its hand-back to the model) is one call, the MCP one (``_one_per_call``)."""
    opened: dict[Any, Mapping[str, Any]] = {}
    calls: list[ToolCall] = []
    spans: list[tuple[int, int, ToolCall]] = []  # (start, end) in µs of answered wire/MCP calls
    for env in envelopes:
        boundary = env.get("boundary")
        md = env.get("metadata")
        if boundary not in (START, RESPONSE) or not isinstance(md, Mapping):
            continue
        call_id = md.get("call_id") if isinstance(md.get("call_id"), str) else id(env)
        if boundary == START:
            opened[call_id] = md
            continue
        opened.pop(call_id, None)
        call = _call(md, str(env.get("outcome") or "?"), _number(env.get("duration_ms")))
        calls.append(call)
        key = order_key(env.get("ts"), env.get("mono_ns"))
        if key is not None and call.duration_ms is not None:
            end = key >> 64
            spans.append((end - int(call.duration_ms * 1000), end, call))
    calls += [_call(md, "open", None) for md in opened.values()]
    return _one_per_call(calls, spans) if spans else calls


#: Which sighting of a call seen by several sources a view shows: the one that saw the
#: tool run (a span, then the MCP capture), the wire's hand-back last.
_SHOWN_FIRST = {"otel": 0, "mcp": 1, "hook": 2, "scope": 3, "wire": 9}


def _one_per_call(calls: list[ToolCall], spans: list[tuple[int, int, ToolCall]]) -> list[ToolCall]:
    """``calls`` with each call seen by several sources shown once (``contract.tool_pairs``,
    in start order, as the diagnosis counts them): the sighting that saw the tool run,
    marked ``handed_back`` when the wire also carried its result to the model."""
    groups: list[list[tuple[int, int, ToolCall]]] = []
    for span in sorted(spans, key=lambda s: s[:2]):
        sighting = _sighting(span)
        for group in groups:
            if all(m[2].source != span[2].source for m in group) and any(
                same_call(_sighting(m), sighting) for m in group
            ):
                group.append(span)
                break
        else:
            groups.append([span])
    dropped: set[int] = set()
    for group in groups:
        if len(group) < 2:
            continue
        shown = min(group, key=lambda m: _SHOWN_FIRST.get(m[2].source or "", 5))[2]
        shown.handed_back = shown.handed_back or any(m[2].source == "wire" for m in group)
        dropped.update(id(m[2]) for m in group if m[2] is not shown)
    return [c for c in calls if id(c) not in dropped]


def _sighting(span: tuple[int, int, ToolCall]) -> tuple[object, object, object, int, int]:
    start, end, call = span
    return call.source, call.name, call.call_id, start, end


def _call(md: Mapping[str, Any], outcome: str, duration_ms: float | None) -> ToolCall:
    return ToolCall(
        name=_text(md.get("tool_name")) or "?",
        source=_text(md.get("source")),
        server=_text(md.get("server")),
        outcome=outcome,
        duration_ms=duration_ms,
        error_kind=_text(md.get("error_kind")),
        excerpt=_text(md.get("error_excerpt")),
        error_class=_text(md.get("error_class")),
        call_id=model_call_id(md.get("call_id"), md.get("source")),
    )


def summary(calls: list[ToolCall]) -> str:
    """``3 tool calls, 1 failed: forecast (protocol)``."""
    failed = [c for c in calls if c.failed]
    opened = sum(c.outcome == "open" or c.given_up for c in calls)
    text = f"{len(calls)} tool call" + ("" if len(calls) == 1 else "s")
    if failed:
        names = ", ".join(dict.fromkeys(f"{c.name} ({c.error_kind or c.outcome})" for c in failed))
        text += f", {len(failed)} failed: {names}"
    if opened:
        text += f", {opened} never answered"
    return text


def describe(envelope: Mapping[str, Any]) -> str | None:
    """A tool line's details for a timeline row: ``forecast (mcp, server weather)
    protocol: 'Unknown city…'``; None for any other line."""
    if not is_tool_line(envelope):
        return None
    md = envelope.get("metadata")
    md = md if isinstance(md, Mapping) else {}
    outcome = "info" if envelope.get("boundary") == START else str(envelope.get("outcome") or "?")
    call = _call(md, outcome, None)
    failure = call.failure()
    return call.label() + (f" {failure}" if failure else "")
