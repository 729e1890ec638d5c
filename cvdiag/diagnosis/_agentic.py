"""The agent-level part of an ``Evidence``: tool calls, the causes that texts name, the
finish reasons and structured output of the answers. Made only for a test that has one.

Bounded like the rest of the evidence: counters, a few first/last values and small
capped dictionaries, never a tool's arguments or results (the wire carries only their
hash, sizes and a failed call's scrubbed excerpt). Envelopes arrive in any order, so
every first/last value is decided by the order key (``_picks``).
"""

from __future__ import annotations

from array import array
from collections.abc import Mapping
from typing import Any

from cvdiag.contract.tool_pairs import model_call_id, same_call
from cvdiag.diagnosis._causes import OUTPUT_TOOL_PREFIX
from cvdiag.diagnosis._convert import TEXT_LIMIT, as_name, as_text
from cvdiag.diagnosis._picks import Pick, earlier, later, latest_key

#: Distinct (tool, arguments hash, source) keys counted for loop detection; a test inventing
#: more keeps the counts it has.
MAX_REPEAT_KEYS = 32
#: A failed tool call's excerpt kept for a reason sentence.
EXCERPT_CHARS = 120
#: Tool calls with the same name and arguments that make a loop (with no final answer).
LOOP_REPEATS = 3
#: Answered tool calls kept, of all sources, to find one call seen by several (the wire's
#: hand-back of its result to the model, the MCP capture, a span); a test with more counts
#: the rest apart.
MAX_SPANS = 32
#: A sighting's source as a number (4 bits of its first word; 0: another source).
_SOURCE_CODES = {"wire": 1, "mcp": 2, "otel": 3, "hook": 4, "scope": 5}
#: How a source is said in a reason: a span's sighting came from the traces.
_SOURCE_SAID = {"otel": "traces"}


class ToolCall:
    """What a reason says of one tool call: its name, where it was seen, its server,
    and for a failed one how it failed and the excerpt of its error."""

    __slots__ = (
        "call_id",
        "error_class",
        "error_kind",
        "excerpt",
        "handed_back",
        "key",
        "ms",
        "name",
        "outcome",
        "server",
        "source",
    )

    def __init__(self, md: Mapping[str, Any], outcome: Any, ms: float | None, key: int | None = None) -> None:
        self.key = key  # its order key: a call is its own pick (a Pick around it would cost half again)
        self.name = as_name(md.get("tool_name")) or "?"
        self.source = as_name(md.get("source"))
        self.server = as_name(md.get("server"))
        self.error_kind = as_name(md.get("error_kind"))
        self.error_class = as_name(md.get("error_class"))
        self.call_id = model_call_id(md.get("call_id"), md.get("source"))
        self.handed_back = md.get("handed_back") is True
        excerpt = as_text(md.get("error_excerpt"))
        self.excerpt = excerpt[:EXCERPT_CHARS] if excerpt else None
        self.outcome = outcome if isinstance(outcome, str) else None
        self.ms = ms

    def where(self) -> str:
        """``get_weather (mcp, server weather)``; ``(traces)`` for a span's sighting."""
        source = _SOURCE_SAID.get(self.source or "", self.source)
        parts = [p for p in (source, f"server {self.server}" if self.server else None) if p]
        return f"{self.name} ({', '.join(parts)})" if parts else self.name


def is_output_tool(name: str) -> bool:
    return name.startswith(OUTPUT_TOOL_PREFIX)


class Agentic:
    """Tool calls and agent-level causes of one test (see the module docstring)."""

    __slots__ = (
        "agent_message",
        "causes",
        "finish_unusual",
        "limit",
        "output",
        "output_key",
        "repeat_top_calls",
        "repeat_top_name",
        "repeats",
        "seen",
        "tool_cancelled",
        "tool_errors",
        "tool_failed",
        "tool_last_key",
        "tool_longest_run",
        "tool_open",
        "tool_open_last",
        "tool_output_failed",
        "tool_responses",
        "tool_slowest",
        "tool_starts",
    )

    def __init__(self) -> None:
        self.tool_starts = self.tool_responses = self.tool_errors = 0
        self.tool_failed: ToolCall | None = None  # the earliest failed call, output tools aside
        self.tool_output_failed: ToolCall | None = None  # the earliest failed call of the output tool
        self.tool_slowest: ToolCall | None = None  # the longest answered call
        self.tool_last_key: int | None = None  # the latest tool line
        self.tool_open = 0  # starts minus responses seen where the call itself is seen (not the wire)
        self.tool_open_last: ToolCall | None = None  # the latest such start
        # Four words per answered call, up to MAX_SPANS: its name's CRC-32 (shifted past its
        # source's code and 1 when it failed), its model call id's CRC-32 (0: none), its
        # start and end in microseconds; one call seen by several sources counts once (``calls``).
        self.seen: array[int] | None = None
        self.tool_cancelled: ToolCall | None = None  # the earliest call cancelled with its request (not the wire's)
        self.tool_longest_run: ToolCall | None = None  # the longest answered call not seen on the wire
        # The framework's own limit that ended a run: (limit name, its value, the run's error class).
        self.limit: Pick | None = None
        # The last output check: (valid, schema name, attempts, error class, excerpt, agent name).
        self.output: tuple[bool, str | None, int | None, str | None, str | None, str | None] | None = None
        self.output_key: int | None = None
        # One 64-bit word per (name, args_hash, source): its CRC-32 above, its calls in the low 16 bits
        # (a dict of these would cost three times more, and most tests call a tool or two).
        self.repeats: array[int] | None = None
        self.repeat_top_calls = 0  # calls of the most repeated (name, args_hash), and its name
        self.repeat_top_name: str | None = None
        # (class, key, text, from an LLM line) per class named, the earliest text of each:
        # a tuple, as most tests name one cause or none (a dict would cost four times more).
        self.causes: tuple[tuple[str, int | None, str, bool], ...] = ()
        self.finish_unusual: str | None = None  # an unusual finish reason of some answer
        self.agent_message: Pick | None = None  # the first failed agent's error_message

    # -- folding ---------------------------------------------------------------------------

    def tool_start(self, md: Mapping[str, Any], key: int | None) -> None:
        self.tool_starts += 1
        self.tool_last_key = latest_key(self.tool_last_key, key)
        name, digest = as_name(md.get("tool_name")), as_text(md.get("args_hash"))
        if name and digest:
            # Counted per source: each source sees a call once, and one MCP call is seen
            # twice (on MCP and on the wire), so the most of any source is the calls made.
            calls = self._repeat(_pair(name, digest, as_name(md.get("source")) or ""))
            if (calls, name) > (self.repeat_top_calls, self.repeat_top_name or ""):
                self.repeat_top_calls, self.repeat_top_name = calls, name
        if md.get("source") != "wire":  # a wire call starts when the model asks: never "open"
            self.tool_open += 1
            held = self.tool_open_last
            if later(held, held.key if held else None, key):
                self.tool_open_last = ToolCall(md, None, None, key)

    def _repeat(self, pair: int) -> int:
        """Count one more call of ``pair``; its calls so far (0 past MAX_REPEAT_KEYS pairs)."""
        repeats = self.repeats
        if repeats is None:
            repeats = self.repeats = array("Q")
        for i, word in enumerate(repeats):
            if word >> 16 == pair:
                calls = min((word & 0xFFFF) + 1, 0xFFFF)
                repeats[i] = pair << 16 | calls
                return calls
        if len(repeats) >= MAX_REPEAT_KEYS:
            return 0
        repeats.append(pair << 16 | 1)
        return 1

    def tool_response(self, md: Mapping[str, Any], outcome: Any, key: int | None, ms: float | None) -> None:
        self.tool_responses += 1
        self.tool_last_key = latest_key(self.tool_last_key, key)
        if md.get("source") not in ("wire", "otel"):  # a span is written once it ended: it had no start line
            self.tool_open -= 1
        call = ToolCall(md, outcome, ms, key)
        if key is not None and ms is not None and not is_output_tool(call.name):
            self._seen(call, key, ms)
        if failed_call(call):
            if is_output_tool(call.name):
                if _earlier(self.tool_output_failed, call):
                    self.tool_output_failed = call
            else:
                self.tool_errors += 1
                if _earlier(self.tool_failed, call):
                    self.tool_failed = call
        elif given_up(call):  # its duration is up to the request's end, not the tool's
            pass
        elif call.outcome == "timeout":  # cancelled with its request: it ran until the request ended
            if _earlier(self.tool_cancelled, call):
                self.tool_cancelled = call
        elif ms is not None:
            if self.tool_slowest is None or ms > (self.tool_slowest.ms or 0.0):
                self.tool_slowest = call
            held = self.tool_longest_run
            if call.source != "wire" and (held is None or ms > (held.ms or 0.0)):
                self.tool_longest_run = call

    def _seen(self, call: ToolCall, key: int, ms: float) -> None:
        """Keep when and how an answered call ran (up to ``MAX_SPANS``)."""
        seen = self.seen
        if (seen is not None and len(seen) >= 4 * MAX_SPANS) or not 0 <= ms < 1e9:  # NaN fails too
            return
        end = key >> 64
        first = _crc(call.name) << 8 | _SOURCE_CODES.get(call.source or "", 0) << 1 | failed_call(call)
        try:
            words = array("q", (first, _crc(call.call_id) if call.call_id else 0, end - int(ms * 1000), end))
        except OverflowError:
            return
        if seen is None:
            self.seen = words
        else:
            seen.extend(words)

    def exited(self, md: Mapping[str, Any], key: int | None) -> None:
        """An agent run ended by the framework's own limit (``limit_name``), the earliest kept."""
        name = as_name(md.get("limit_name"))
        if name is None or not earlier(self.limit, self.limit.key if self.limit else None, key):
            return
        value = md.get("limit_value")
        value = value if isinstance(value, int | float) and not isinstance(value, bool) else None
        self.limit = Pick(key, (name, value, as_name(md.get("error_class"))))

    def checked_output(self, md: Mapping[str, Any], outcome: Any, key: int | None) -> None:
        """An output check (``backend.agent.output``): the latest one says how the output ended."""
        if not later(self.output, self.output_key, key):
            return
        attempts = md.get("attempts")
        excerpt = as_text(md.get("error_excerpt"))
        self.output_key = key
        self.output = (
            md.get("valid") is not False and outcome != "err",
            as_name(md.get("schema_name")),
            attempts if isinstance(attempts, int) and not isinstance(attempts, bool) else None,
            as_name(md.get("error_class")),
            excerpt[:EXCERPT_CHARS] if excerpt else None,
            as_name(md.get("agent_name")),
        )

    def named(self, cls: str, text: str, key: int | None, *, from_llm: bool = False) -> None:
        """A text (an exception, an error type; ``from_llm``: of a failed LLM attempt,
        which a retry may have made good) named the cause ``cls``."""
        text = text[:TEXT_LIMIT]
        for i, (held, held_key, held_text, _) in enumerate(self.causes):
            if held == cls:
                if earlier(held_text, held_key, key):
                    self.causes = (*self.causes[:i], (cls, key, text, from_llm), *self.causes[i + 1 :])
                return
        self.causes += ((cls, key, text, from_llm),)

    def finished(self, reason: str) -> None:
        """Some answer stopped for an unusual reason (kept: the smallest, for a stable hint)."""
        if self.finish_unusual is None or reason < self.finish_unusual:
            self.finish_unusual = reason

    # -- derived ---------------------------------------------------------------------------

    def cause(self, cls: str) -> tuple[str, bool] | None:
        """(text, from an LLM line) that named ``cls`` first, or None."""
        for held, _, text, from_llm in self.causes:
            if held == cls:
                return text, from_llm
        return None

    def calls(self) -> tuple[int, int, int]:
        """(started, answered, failed) tool calls, one call seen by several sources (the
        wire's hand-back, the MCP capture, a span) counted once (``contract.tool_pairs``)."""
        groups = self.one_per_call()
        pairs = started_twice = both_failed = 0
        otel = _SOURCE_CODES["otel"]
        for group in groups:
            pairs += len(group) - 1
            started_twice += max(sum(s[0] != otel for s in group) - 1, 0)  # a span writes no start line
            both_failed += max(sum(s[5] for s in group) - 1, 0)
        return (
            max(self.tool_starts - started_twice, 0),
            max(self.tool_responses - pairs, 0),
            max(self.tool_errors - both_failed, 0),
        )

    def one_per_call(self) -> list[list[tuple[int, int, int | None, int, int, bool]]]:
        """The sightings kept, grouped by call: each joins the first call (in start order)
        that no sighting of its source is in yet and that one of its sightings is the
        same call as (``contract.tool_pairs.same_call``, on the names' and ids' CRCs)."""
        seen = self.seen or ()
        sightings = sorted(
            ((seen[i] >> 1 & 0xF, seen[i] >> 8, seen[i + 1] or None, seen[i + 2], seen[i + 3], bool(seen[i] & 1))
             for i in range(0, len(seen), 4)),
            key=lambda s: (s[3], s[4]),
        )  # fmt: skip
        groups: list[list[tuple[int, int, int | None, int, int, bool]]] = []
        for s in sightings:
            for group in groups:
                if all(m[0] != s[0] for m in group) and any(same_call(m[:5], s[:5]) for m in group):  # type: ignore[arg-type]
                    group.append(s)
                    break
            else:
                groups.append([s])
        return groups

    def running_at(self, us: int) -> ToolCall | None:
        """The longest call not seen on the wire, if it was running at ``us`` microseconds."""
        call = self.tool_longest_run
        if call is None or call.key is None or call.ms is None:
            return None
        end = call.key >> 64
        return call if end - call.ms * 1000 <= us <= end else None

    def most_repeated(self) -> tuple[str, int] | None:
        """(tool name, calls) of the call made most often with the same arguments."""
        if self.repeat_top_name is None:
            return None
        return self.repeat_top_name, self.repeat_top_calls


def _earlier(held: ToolCall | None, call: ToolCall) -> bool:
    return earlier(held, held.key if held is not None else None, call.key)


def _pair(name: str, digest: str, source: str) -> int:
    """A tool, its arguments' hash and where the call was seen as one 32-bit number."""
    return _crc(f"{name}\0{digest}\0{source}")


def _crc(text: str) -> int:
    """CRC-32 of ``text`` (zlib imported here: only a test with tool calls needs it, and
    start-up should not pay for it)."""
    import zlib

    return zlib.crc32(text.encode())


def failed_call(call: ToolCall) -> bool:
    """A tool call that failed: outcome err, or a timeout of the tool's own. A call
    cancelled with its request (outcome timeout, no error kind) did not fail, nor did a
    ``wire`` call given up when its request ended (outcome timeout): the wire saw only that
    no result came back before the end, so the end (a hang-up, a cancellation, the agent's
    exception) is the cause and the call is evidence."""
    if call.outcome == "timeout":
        return call.error_kind is not None and call.source != "wire"
    return call.outcome == "err"


def given_up(call: ToolCall) -> bool:
    """A ``wire`` call whose result never came back before its request ended."""
    return call.outcome == "timeout" and call.source == "wire"
