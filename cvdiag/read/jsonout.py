"""JSON out of the read side that a hostile log can never break.

``orjson`` refuses integers past 64 bits, and a log can hold any number (a
``bytes_before_abort`` of 10**24 is valid JSON). Results are written with orjson as
usual; only when it refuses one does a slower pass tame the values it cannot write.
"""

from __future__ import annotations

import math
from typing import Any

import orjson

from cvdiag.contract.schema import JSON_INT_MAX, JSON_INT_MIN


def dumps(value: Any, option: int = 0) -> bytes:
    """``orjson.dumps``, with out-of-range integers as floats and unknown types as text."""
    try:
        return orjson.dumps(value, option=option)
    except TypeError:  # orjson.JSONEncodeError is a TypeError
        return orjson.dumps(_tame(value), option=option, default=str)


def _tame(value: Any) -> Any:
    if isinstance(value, dict):
        return {str(k): _tame(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_tame(v) for v in value]
    if isinstance(value, int) and not isinstance(value, bool) and not JSON_INT_MIN <= value <= JSON_INT_MAX:
        as_float = float(value) if value.bit_length() < 1024 else math.inf
        return as_float if math.isfinite(as_float) else str(value)
    return value
