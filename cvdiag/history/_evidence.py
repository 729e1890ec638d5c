"""A test's evidence as a run's history keeps it: the diagnosis' own, folded in the pass
that diagnoses, plus what a result stores beyond the verdict.

The history's facts are read off the same ``Evidence`` the rules read, so they cannot
disagree with the diagnosis' sentence: LLM attempts are at least the failed attempts the
sentence counts, tool failures are the failed calls it counts (a call seen on the wire
and on MCP once; a call given up or cancelled with its request not at all), and each
answer's tokens are read as the rules read them. Beyond that it sums each answer's time
and tokens (``Facts.answered``) and keeps the pytest node id the harness's
``probe.start`` line names (the test's stable name). One pass reads the logs.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from cvdiag.diagnosis import Evidence
from cvdiag.diagnosis._shapes import Response
from cvdiag.history.store import count
from cvdiag.read.fold import finite_ms

_PROBE_START = "probe.start"


class RunEvidence(Evidence):
    """``Evidence`` that also sums its LLM answers and keeps its node id (module docstring)."""

    __slots__ = ("llm_ms", "llm_tokens", "node")

    def __init__(self, test_id: str) -> None:
        super().__init__(test_id)
        self.llm_ms = 0.0
        self.llm_tokens = 0
        self.node: str | None = None

    def answered(self, response: Response, duration_ms: Any) -> None:
        ms = finite_ms(duration_ms)  # the report's LLM time, read the same way
        if ms is not None:
            self.llm_ms += ms
        used = (count(response.prompt_tokens) or 0) + (count(response.completion_tokens) or 0)
        self.llm_tokens += used or count(response.response_token_count) or 0

    @staticmethod
    def needs_body(boundary: str) -> bool:
        return boundary == _PROBE_START or Evidence.needs_body(boundary)

    def add(self, envelope: Mapping[str, Any]) -> None:
        super().add(envelope)
        self._probe_start(envelope)

    def add_body(self, envelope: Mapping[str, Any]) -> None:
        super().add_body(envelope)
        self._probe_start(envelope)

    def add_metadata(self, boundary: str, key: int | None, outcome: str, metadata: Any, duration_ms: Any) -> None:
        super().add_metadata(boundary, key, outcome, metadata, duration_ms)
        if boundary == _PROBE_START:
            self._node(metadata)

    def _probe_start(self, envelope: Mapping[str, Any]) -> None:
        try:
            if envelope.get("boundary") == _PROBE_START:
                self._node(envelope.get("metadata"))
        except Exception:  # as ``add``: an envelope too odd to read says nothing (it was counted)
            return

    def _node(self, metadata: Any) -> None:
        """The first ``probe.start`` in the log naming a pytest node id (not a page's URL)."""
        url = metadata.get("url") if isinstance(metadata, Mapping) else None
        if self.node is None and isinstance(url, str) and "::" in url and "://" not in url:
            self.node = url

    def row_facts(self) -> dict[str, Any]:
        """What a history result keeps of this test beyond its verdict (``_diagnosing``
        puts it in the verdict, under ``_facts``)."""
        answered = self.llm_responses
        failed = self.agentic.calls()[2] if self.agentic is not None else 0
        return {
            "llm_ms": round(self.llm_ms, 3) if answered else None,
            "llm_attempts": max(self.llm_starts, answered, self.failed_attempts()),
            "tokens": self.llm_tokens if answered else None,
            "tool_failures": failed,
            "node": self.node,
        }
