"""JSON out of the read side that a hostile log can never break.

``orjson`` refuses integers past 64 bits and containers nested deeper than 254, and a
log can hold both (a ``bytes_before_abort`` of 10**24, metadata nested 600 deep, are
valid JSON). Results are written with orjson as usual; only when it refuses one does a
slower pass tame the values it cannot write.
"""

from __future__ import annotations

import math
from typing import Any

import orjson

from cvdiag.contract.schema import JSON_INT_MAX, JSON_INT_MIN

#: The containers orjson writes one inside another; one deeper is written as ``TOO_DEEP``.
MAX_DEPTH = 254
TOO_DEEP = "(nested too deep: left out)"


def dumps(value: Any, option: int = 0) -> bytes:
    """``orjson.dumps``, with out-of-range integers as floats, unknown types as text and
    what is nested past ``MAX_DEPTH`` as ``TOO_DEEP``."""
    try:
        return orjson.dumps(value, option=option)
    except TypeError:  # orjson.JSONEncodeError is a TypeError
        return orjson.dumps(_tame(value, 0), option=option, default=str)


def _tame(value: Any, depth: int) -> Any:
    """``value`` as orjson writes it, ``depth`` containers inside the top: one frame per
    level (no comprehension), so the deepest orjson writes is far from Python's limit."""
    if isinstance(value, dict | list | tuple) and depth >= MAX_DEPTH:
        return TOO_DEEP
    if isinstance(value, dict):
        tamed = {}
        for k, v in value.items():
            tamed[str(k)] = _tame(v, depth + 1)
        return tamed
    if isinstance(value, list | tuple):
        items = []
        for v in value:
            items.append(_tame(v, depth + 1))
        return items
    if isinstance(value, int) and not isinstance(value, bool) and not JSON_INT_MIN <= value <= JSON_INT_MAX:
        as_float = float(value) if value.bit_length() < 1024 else math.inf
        return as_float if math.isfinite(as_float) else str(value)
    return value
