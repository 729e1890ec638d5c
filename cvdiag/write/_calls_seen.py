"""The LLM and MCP tool calls the wire capture wrote lately, so that a span of the same
call (read in process by ``_otel_spans``) is not written a second time.

A bounded ring of ``(test id, kind, name, start, end)`` in Unix epoch nanoseconds (the
clock spans use); ``deque.append`` is atomic, so writers take no lock.
"""

from __future__ import annotations

import time
from collections import deque

from cvdiag.contract.tool_pairs import SPAN_SLACK_US

__all__ = ["note", "reset", "seen_within"]

#: Calls remembered, over all tests (the oldest is forgotten first).
SEEN_MAX = 2048
_SLACK_NS = SPAN_SLACK_US * 1000

_seen: deque[tuple[str, str, str | None, int, int]] = deque(maxlen=SEEN_MAX)


def note(test_id: str, kind: str, name: str | None, start_mono_ns: int) -> None:
    """Remember a call of ``kind`` (``llm``, ``tool``) that started at ``start_mono_ns``
    (the monotonic clock) and ends now."""
    now_mono, now = time.monotonic_ns(), time.time_ns()
    _seen.append((test_id, kind, name, now - (now_mono - start_mono_ns), now))


def seen_within(test_id: str, kind: str, name: str | None, start_ns: int, end_ns: int) -> bool:
    """Whether a call of this test and kind (and name, when given) ran inside the span
    from ``start_ns`` to ``end_ns`` (epoch ns): the span and the wire saw one call."""
    if not _seen:
        return False
    low, high = start_ns - _SLACK_NS, end_ns + _SLACK_NS
    for seen_test, seen_kind, seen_name, start, end in reversed(_seen):
        if end < low:  # appended as they end: every older one ended before too
            break
        if (
            seen_test == test_id
            and seen_kind == kind
            and (name is None or seen_name == name)
            and low <= start
            and end <= high
        ):
            return True
    return False


def reset() -> None:
    _seen.clear()
