"""What a diagnosis is made of and gives back: its tunable limits and its verdict."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Thresholds:
    """Tunable limits of the rules; the defaults are the documented ones (docs/diagnosis.md)."""

    #: An LLM call whose latency, or whose last heartbeat's elapsed time, reaches this is slow.
    slow_s: float = 30.0
    #: aimock with no matching fixture is a mismatch when fewer bytes than this came back.
    aimock_min_bytes: int = 16


@dataclass(frozen=True, slots=True)
class Finding:
    """What a rule that matched says: how sure it is and one sentence why."""

    confidence: float
    reason: str


@dataclass(frozen=True, slots=True)
class Diagnosis:
    """The verdict for one test: a class, how sure, one sentence why, and the facts used."""

    test_id: str
    cls: str
    confidence: float
    reason: str
    evidence: dict

    def to_json(self) -> dict:
        return verdict_json(self.test_id, self.cls, self.confidence, self.reason, self.evidence)


def verdict_json(test_id: str, cls: str, confidence: float, reason: str, evidence: dict) -> dict:
    """A verdict as JSON, made from its parts: ``Diagnosis.to_json``, and a verdict made
    without the object in between (``Judgement.to_json``)."""
    return {"test_id": test_id, "class": cls, "confidence": confidence, "reason": reason, "evidence": evidence}
