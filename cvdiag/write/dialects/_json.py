"""Reading parsed JSON of any provider without trusting its shape: the helpers every dialect shares."""

from __future__ import annotations

import json
from typing import Any

from cvdiag.contract.schema import LLM_TEXT_MAX_CHARS

__all__ = ["ERROR_TYPE_MAX", "as_int", "as_str", "clip", "dicts", "dumped", "dumped_len", "get", "mapping"]

# Kept longer than written (LLM_TEXT_MAX_CHARS): the capture scrubs it first, then cuts.
ERROR_TYPE_MAX = 8 * LLM_TEXT_MAX_CHARS
_NAME_MAX = LLM_TEXT_MAX_CHARS


def dicts(value: Any) -> list[dict]:
    """The dict elements of a list (nothing for anything else)."""
    return [v for v in value if isinstance(v, dict)] if isinstance(value, list) else []


def mapping(value: Any) -> dict:
    """``value`` when it is a dict, else an empty one."""
    return value if isinstance(value, dict) else {}


def get(obj: Any, *path: str) -> Any:
    for key in path:
        if not isinstance(obj, dict):
            return None
        obj = obj.get(key)
    return obj


def as_int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def as_str(value: Any) -> str | None:
    return value[:ERROR_TYPE_MAX] if isinstance(value, str) and value else None


def clip(value: Any, limit: int = _NAME_MAX) -> str | None:
    return value[:limit] if isinstance(value, str) and value else None


def dumped_len(value: Any) -> int:
    """Characters of a value as the model wrote it (a string as is, else compact JSON)."""
    if isinstance(value, str):
        return len(value)
    try:
        return len(json.dumps(value, separators=(",", ":")))
    except (TypeError, ValueError):
        return 0


def dumped(value: Any) -> str:
    """JSON text of an argument or result object (compact; ``str`` kept as it is)."""
    if isinstance(value, str):
        return value
    try:
        return json.dumps(value, separators=(",", ":"), ensure_ascii=False, default=str)
    except (TypeError, ValueError):
        return ""
