"""Capture what the real emitter writes, for tests: ``cvdiag.testing.capture`` with lookups."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import cvdiag
from cvdiag.contract.schema import is_accounting
from cvdiag.read.validate import problems
from cvdiag.testing import capture as capture_envelopes


class Captured:
    def __init__(self, envelopes: list[dict[str, Any]]) -> None:
        self.envelopes = envelopes

    def all(self) -> list[dict[str, Any]]:
        """Every envelope so far, accounting lines included."""
        cvdiag.flush()
        return list(self.envelopes)

    def events(self) -> list[dict[str, Any]]:
        """The envelopes so far, without cvdiag.* accounting lines."""
        return [e for e in self.all() if not is_accounting(e["boundary"])]

    def llm_responses(self) -> list[dict[str, Any]]:
        """The response envelopes of the LLM calls, each checked against the schema on the way."""
        for env in self.all():
            assert problems(env) == [], (env, problems(env))
        return [e for e in self.events() if e["boundary"] == "backend.llm.call.response"]

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
    with capture_envelopes(tier=tier, **settings) as envelopes:
        yield Captured(envelopes)
