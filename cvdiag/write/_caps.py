"""Render an envelope within its byte cap by the shrink ladder of spec section 7.

Runs after scrubbing, so a cut can never expose part of a secret. Ids, slug, enums
and numbers are never altered; ``_truncated`` is set only when something changed.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import Any

import orjson

from cvdiag.contract.schema import EDGE_HEADERS, JSON_INT_MAX, JSON_INT_MIN
from cvdiag.contract.scrubber import REDACTED

TRUNCATED_OBJECT = "[truncated]"
#: The edge headers of a line about a request that sent none (most lines).
NO_EDGE_HEADERS: Mapping[str, str | None] = {k: None for k in EDGE_HEADERS}
#: ... as written: orjson copies a Fragment where it would write nine keys (a third of
#: the cost of encoding a whole line).
_NO_EDGE_HEADERS_JSON = orjson.Fragment(orjson.dumps(NO_EDGE_HEADERS))
_LONE_SURROGATE = re.compile("[\ud800-\udfff]")
_DEMO_CLAMP = 32
_EDGE_CLAMP = 16


def _cut(value: str, keep: int, limit: int) -> str:
    # The marker stays whole: a reader searching for it must still find it.
    return value[:keep] + "..." if len(value) > limit and value != REDACTED else value


def _cut_metadata(limit: int, keep: int, flatten: bool) -> Callable[[dict[str, Any]], bool]:
    def step(envelope: dict[str, Any]) -> bool:
        metadata = envelope["metadata"]
        changed = False
        for key, value in metadata.items():
            if isinstance(value, str):
                new: Any = _cut(value, keep, limit)
            elif flatten and isinstance(value, dict | list | tuple):
                new = TRUNCATED_OBJECT
            else:
                continue
            if new != value:
                metadata[key] = new
                changed = True
        return changed

    return step


def _empty_metadata(envelope: dict[str, Any]) -> bool:
    if not envelope["metadata"]:
        return False
    envelope["metadata"] = {}
    return True


def _clamp_demo(envelope: dict[str, Any]) -> bool:
    demo = envelope["demo"]
    if len(demo) <= _DEMO_CLAMP:
        return False
    envelope["demo"] = demo[:_DEMO_CLAMP]
    return True


def _clamp_edge_headers(envelope: dict[str, Any], cap: int) -> bool:
    """Clamp header values longest first, re-measuring after each, until it fits."""
    edge = dict(envelope["edge_headers"])
    envelope["edge_headers"] = edge
    changed = False
    for key in sorted(EDGE_HEADERS, key=lambda k: -len(edge.get(k) or "")):
        value = edge.get(key)
        if value is None or len(value) <= _EDGE_CLAMP:
            break
        edge[key] = _cut(value, _EDGE_CLAMP - 3, _EDGE_CLAMP)
        changed = True
        if len(orjson.dumps(envelope)) <= cap:
            break
    return changed


_LADDER: tuple[Callable[[dict[str, Any]], bool], ...] = (
    _cut_metadata(64, 61, flatten=True),
    _cut_metadata(8, 5, flatten=False),
    _empty_metadata,
    _clamp_demo,
)


def without_surrogates(text: str) -> str:
    """``text`` with each lone surrogate (not UTF-8 encodable) replaced by U+FFFD."""
    return _LONE_SURROGATE.sub("\ufffd", text)


def _encodable(value: Any) -> Any:
    """``value`` as orjson can write it: lone surrogates as U+FFFD, and an integer past
    64 bits (a provider or an app can report any token count) as null, not a lost line."""
    if isinstance(value, str):
        return without_surrogates(value)
    if isinstance(value, int) and not JSON_INT_MIN <= value <= JSON_INT_MAX:
        return None
    if isinstance(value, dict):
        return {_encodable(k): _encodable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_encodable(v) for v in value]
    return value


def render_capped(envelope: dict[str, Any], cap: int) -> bytes:
    """The envelope's JSON, shrunk step by step until it is at most ``cap`` bytes.

    May modify ``envelope`` (its metadata and demo; edge headers are copied first).
    orjson refuses lone surrogates (a client can send ``"\\ud800"`` in valid JSON) and
    integers past 64 bits: on its refusal ``_encodable`` mends them and it renders again;
    the common path pays nothing.
    """
    no_edge = envelope["edge_headers"] is NO_EDGE_HEADERS
    if no_edge:
        envelope["edge_headers"] = _NO_EDGE_HEADERS_JSON
    try:
        line = orjson.dumps(envelope)
    except orjson.JSONEncodeError:
        envelope.update(_encodable(envelope))
        line = orjson.dumps(envelope)
    if no_edge:  # the ladder below clamps a mapping
        envelope["edge_headers"] = NO_EDGE_HEADERS
    if len(line) <= cap:
        return line
    envelope["_truncated"] = True
    envelope["metadata"] = dict(envelope["metadata"])
    for step in _LADDER:
        if step(envelope):
            line = orjson.dumps(envelope)
            if len(line) <= cap:
                return line
    _clamp_edge_headers(envelope, cap)
    return orjson.dumps(envelope)
