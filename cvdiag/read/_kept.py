"""What a timeline keeps of a test with more events than anyone reads.

A test that heart-beats for days, or a log that repeats one id a million times, would
cost a dict per line (1.5 GB for 600,000 heartbeats). A timeline keeps the first and
the last events in file order, and the failures between them, and counts the rest.
"""

from __future__ import annotations

from collections import deque
from typing import Any

from cvdiag.contract.schema import FAILURE_OUTCOMES

HEAD = TAIL = 10_000  # the first and last events kept, in file order
FAILURES = 5_000  # failed envelopes and breadcrumbs kept between them


def _failure(entry: Any) -> bool:
    if entry.kind == "breadcrumb":
        return True
    return entry.kind == "envelope" and entry.data.get("outcome") in FAILURE_OUTCOMES


class Kept:
    """A bounded list of timeline entries: ``add`` each in file order, then ``entries``."""

    __slots__ = ("dropped", "failures", "head", "tail")

    def __init__(self) -> None:
        self.head: list[Any] = []
        self.failures: list[Any] = []
        self.tail: deque[Any] = deque(maxlen=TAIL)
        self.dropped = 0

    def add(self, entry: Any) -> None:
        if len(self.head) < HEAD:
            self.head.append(entry)
            return
        if len(self.tail) == TAIL:  # the oldest of the tail leaves it: kept only if it failed
            leaving = self.tail[0]
            if _failure(leaving) and len(self.failures) < FAILURES:
                self.failures.append(leaving)
            else:
                self.dropped += 1
        self.tail.append(entry)

    def entries(self) -> list[Any]:
        return [*self.head, *self.failures, *self.tail]
