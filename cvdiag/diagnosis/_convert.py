"""Tolerant field readers: a parsed-but-malformed envelope yields None, never an exception.

A reader folds whatever a log holds (a boolean status, a NaN latency, a list where a
string belongs), so every metadata field goes through one of these first.
"""

from __future__ import annotations

import math
import sys
from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

#: Free text kept for a reason sentence (error classes, console messages) is cut here.
TEXT_LIMIT = 160

#: What ``as_mapping`` gives for anything that is not a mapping (shared, read-only).
EMPTY: Mapping[str, Any] = MappingProxyType({})


def as_int(value: Any) -> int | None:
    """An integer field (a finite float is truncated); None for booleans and non-numbers."""
    if type(value) is int:  # the usual case, first: a bool's type is not int
        return value
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, float) and math.isfinite(value):
        return int(value)
    return None


def as_float(value: Any) -> float | None:
    """A finite number as a float; None for booleans, NaN, infinities and non-numbers."""
    if type(value) is float:  # the usual case, first
        return value if math.isfinite(value) else None
    if isinstance(value, bool):
        return None
    if isinstance(value, int | float) and math.isfinite(value):
        return float(value)
    return None


def as_text(value: Any) -> str | None:
    """A string cut to ``TEXT_LIMIT``; None for anything else."""
    if isinstance(value, str):
        return value[:TEXT_LIMIT]
    return None


def as_name(value: Any) -> str | None:
    """``as_text``, interned: names repeat across thousands of tests (providers, models,
    agents), so each is kept once; interned strings are freed with their last user, so a
    log inventing names cannot grow the table."""
    if type(value) is str:  # as_text's usual case, without the call
        return sys.intern(value[:TEXT_LIMIT])
    text = as_text(value)
    return None if text is None else sys.intern(text)


def as_mapping(value: Any) -> Mapping[str, Any]:
    """A mapping field as it is; ``EMPTY`` for anything else."""
    return value if type(value) is dict or isinstance(value, Mapping) else EMPTY
