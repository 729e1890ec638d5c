"""Diagnosis: name the root cause of one test's failure from its CVDIAG envelopes.

The read side folds every envelope of a test into an ``Evidence`` (``evidence.py``),
then ``classify`` runs the rules of ``rules.RULES`` in precedence order and the first
that matches names the class. Causes deeper in the chain come first: an LLM failure
that made the endpoint raise is ``llm-error``, not ``server-error``. A rule that needs
a layer the log lacks does not match, so a class is never guessed.

Pure: no I/O, no clock, no Starlette or structlog. Part of the read side.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from cvdiag.diagnosis.evidence import Evidence
from cvdiag.diagnosis.result import Diagnosis, Finding, Thresholds, verdict_json
from cvdiag.diagnosis.rules import RULES

#: Every class ``classify`` can return, in precedence order (the first rule that matches wins).
CLASSES: tuple[str, ...] = tuple(rule.cls for rule in RULES)
#: ``RULES`` as (class, match) pairs: the loop every test runs reads no attribute.
_MATCHES: tuple[tuple[str, Any], ...] = tuple((rule.cls, rule.match) for rule in RULES)

_DEFAULTS = Thresholds()


class _Facts(dict):
    """The evidence's summary as the rules read and extend it, made the first time a rule
    reads a fact it has not written and that is not one of ``Evidence.CHEAP_FACTS``: most
    tests are judged without it, and a summary costs about a third of a verdict.
    ``whole`` gives it as a verdict always had it: the summary's keys in order, then the
    ones the rules added."""

    __slots__ = ("_evidence", "_filled", "_log_end")

    def __init__(self, evidence: Evidence, log_end: float | None) -> None:
        super().__init__()
        self._evidence, self._log_end, self._filled = evidence, log_end, False

    def __missing__(self, key: str) -> Any:
        if self._filled:
            raise KeyError(key)
        cheap = Evidence.CHEAP_FACTS.get(key)
        if cheap is not None:
            value = self[key] = cheap(self._evidence, self._log_end)
            return value
        self._fill()
        return self[key]

    def _fill(self) -> None:
        written = dict(self)
        self.clear()
        self.update(self._evidence.summary(self._log_end))
        self.update(written)
        self._filled = True

    def whole(self) -> dict:
        if not self._filled:
            self._fill()
        return dict(self)


class Judgement:
    """What the rules found for one test: its class at once, its verdict on demand."""

    __slots__ = ("_facts", "cls", "finding", "test_id")  # not a dataclass: see Evidence

    def __init__(self, test_id: str, cls: str, finding: Finding, facts: _Facts) -> None:
        self.test_id, self.cls, self.finding, self._facts = test_id, cls, finding, facts

    def diagnosis(self, facts: Iterable[str] | None = None) -> Diagnosis:
        """The verdict, with the whole evidence summary, or only the ``facts`` named (those
        the summary has)."""
        return Diagnosis(self.test_id, self.cls, self.finding.confidence, self.finding.reason, self._evidence(facts))

    def to_json(self, facts: Iterable[str] | None = None) -> dict:
        """``diagnosis(facts).to_json()`` without the ``Diagnosis`` in between: a report
        makes one for every test of a log."""
        return verdict_json(self.test_id, self.cls, self.finding.confidence, self.finding.reason, self._evidence(facts))

    def fact(self, name: str) -> Any:
        """One fact of the summary, None when it has none of that name: what a report's
        index row shows of a test, without a verdict made for it."""
        try:
            return self._facts[name]
        except KeyError:
            return None

    def _evidence(self, facts: Iterable[str] | None) -> dict:
        if facts is None:
            return self._facts.whole()
        evidence = {}
        for name in facts:
            try:
                evidence[name] = self._facts[name]
            except KeyError:
                continue  # not a fact of the summary
        return evidence


def judge(evidence: Evidence, thresholds: Thresholds = _DEFAULTS, *, log_end: float | None = None) -> Judgement:
    """The first rule of ``RULES`` that matches one test, as a ``Judgement``: ``.cls`` for a
    table of classes, ``.diagnosis()`` for the verdict. Pure, no I/O."""
    facts = _Facts(evidence, log_end)
    for cls, match in _MATCHES:
        finding = match(evidence, thresholds, log_end, facts)
        if finding is not None:
            return Judgement(evidence.test_id, cls, finding, facts)
    raise AssertionError("the last rule always matches")  # pragma: no cover


def classify(evidence: Evidence, thresholds: Thresholds = _DEFAULTS, *, log_end: float | None = None) -> Diagnosis:
    """The verdict of one test: the first rule of ``RULES`` that matches. Pure, no I/O.

    ``log_end`` is the epoch time of the last ``ts`` in all inputs; it dates an LLM
    call that never answered ("started 41.2 s before the log ends"). Without it the
    test's own last event is used.
    """
    return judge(evidence, thresholds, log_end=log_end).diagnosis()


def diagnose(
    envelopes: Iterable[Mapping[str, Any]], thresholds: Thresholds = _DEFAULTS, *, log_end: float | None = None
) -> Diagnosis:
    """Classify one test from its envelopes (any order); the id is taken from the first."""
    evidence: Evidence | None = None
    for envelope in envelopes:
        if evidence is None:
            test_id = envelope.get("test_id") if isinstance(envelope, Mapping) else None
            evidence = Evidence(test_id if isinstance(test_id, str) else "")
        evidence.add(envelope)
    return classify(evidence or Evidence(""), thresholds, log_end=log_end)


__all__ = ["CLASSES", "Diagnosis", "Evidence", "Judgement", "Thresholds", "classify", "diagnose", "judge"]
