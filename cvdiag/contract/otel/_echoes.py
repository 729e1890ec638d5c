"""Failures that only pass a child span's failure on: one fault, one line.

A framework that traces every step (LangChain's runnables, under OpenInference) marks the
same exception on each span it passes through: the output parser's, then the sequence's
that ran it. Each reads as a failed output check; only the first is news. Spans end
children first, so a failure is remembered under its parent's id; a parent that ends with
the same failure is its echo (and passes it on to its own parent in turn).
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Hashable

from cvdiag.contract.otel._view import SpanEvidence, SpanView

__all__ = ["FailureEchoes"]

#: The boundaries whose failures are passed up unchanged by the spans around them.
_ECHOED = frozenset({"backend.agent.output"})


class FailureEchoes:
    """The failures given as evidence, by the span they were handed up to (bounded: the
    oldest are forgotten first, so a parent that never ends costs one slot for a while)."""

    def __init__(self, most: int = 4096) -> None:
        self._most = most
        self._handed_up: OrderedDict[tuple[str, str], Hashable] = OrderedDict()
        self._lock = threading.Lock()

    def __reduce__(self) -> tuple[type[FailureEchoes], tuple[int]]:
        """Sent to another process (a file read by ranges) as a fresh one: a parent span
        in another range is read there on its own."""
        return (FailureEchoes, (self._most,))

    def is_echo(self, view: SpanView, evidence: SpanEvidence) -> bool:
        """True when ``evidence`` repeats the failure a child of ``view`` already gave."""
        if evidence.outcome != "err" or evidence.boundary not in _ECHOED:
            return False
        meta = evidence.metadata
        failure = (evidence.boundary, meta.get("error_class"), meta.get("error_excerpt"))
        with self._lock:
            echo = self._handed_up.pop((view.trace_id, view.span_id), None) == failure
            if view.parent_span_id:
                self._handed_up[(view.trace_id, view.parent_span_id)] = failure
                if len(self._handed_up) > self._most:
                    self._handed_up.popitem(last=False)
        return echo
