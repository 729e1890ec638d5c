"""Capture what the real emitter writes, for tests: a MemorySink on the real writer."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import cvdiag
from cvdiag.write.config import apply_settings, get_settings
from cvdiag.write.emitter import add_sink, remove_sink
from cvdiag.write.sinks import MemorySink


class Captured:
    def __init__(self, sink: MemorySink) -> None:
        self.sink = sink

    def all(self) -> list[dict[str, Any]]:
        """Every envelope so far, accounting lines included."""
        cvdiag.flush()
        return self.sink.envelopes()

    def events(self) -> list[dict[str, Any]]:
        """The envelopes so far, without cvdiag.* accounting lines."""
        return [e for e in self.all() if not e["boundary"].startswith("cvdiag.")]

    def boundaries(self) -> list[str]:
        return [e["boundary"] for e in self.events()]

    def of(self, boundary: str) -> list[dict[str, Any]]:
        return [e for e in self.events() if e["boundary"] == boundary]

    def one(self, boundary: str) -> dict[str, Any]:
        found = self.of(boundary)
        assert len(found) == 1, f"expected one {boundary}, got {len(found)}: {self.boundaries()}"
        return found[0]


@contextmanager
def capture(tier: str = "debug", **settings: Any) -> Iterator[Captured]:
    """Enable cvdiag at ``tier`` (label ``test``, stdout off) and capture in memory."""
    saved = get_settings()
    sink = MemorySink()
    add_sink(sink)
    settings.setdefault("environ", {"CVDIAG_ENV": "test"})
    settings.setdefault("stdout", False)
    cvdiag.configure(enabled=True, tier=tier, **settings)
    try:
        yield Captured(sink)
    finally:
        cvdiag.flush()
        remove_sink(sink)
        apply_settings(saved)
