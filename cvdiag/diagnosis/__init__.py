"""Diagnosis: the evidence one test's envelopes leave, and the rules that name its failure.

Pure: no I/O, no clock, no Starlette or structlog. Part of the read side.
"""

from cvdiag.diagnosis.core import CLASSES, Diagnosis, Evidence, Thresholds, classify, diagnose

__all__ = ["CLASSES", "Diagnosis", "Evidence", "Thresholds", "classify", "diagnose"]
