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
from cvdiag.diagnosis.result import Diagnosis, Thresholds
from cvdiag.diagnosis.rules import RULES

#: Every class ``classify`` can return, in precedence order (the first rule that matches wins).
CLASSES: tuple[str, ...] = tuple(rule.cls for rule in RULES)

_DEFAULTS = Thresholds()


def classify(evidence: Evidence, thresholds: Thresholds = _DEFAULTS, *, log_end: float | None = None) -> Diagnosis:
    """The class of one test: the first rule of ``RULES`` that matches. Pure, no I/O.

    ``log_end`` is the epoch time of the last ``ts`` in all inputs; it dates an LLM
    call that never answered ("started 41.2 s before the log ends"). Without it the
    test's own last event is used.
    """
    facts = evidence.summary(log_end)
    for rule in RULES:
        finding = rule.match(evidence, thresholds, log_end, facts)
        if finding is not None:
            return Diagnosis(evidence.test_id, rule.cls, finding.confidence, finding.reason, facts)
    raise AssertionError("the last rule always matches")  # pragma: no cover


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


__all__ = ["CLASSES", "Diagnosis", "Evidence", "Thresholds", "classify", "diagnose"]
