"""Strict schema v1 checks of one envelope (spec section 2, 3 and 6).

The reader is lenient on purpose (it reads other emitters' logs); this is the strict
side, for emitter authors and CI: every problem is reported, not just the first.
"""

from __future__ import annotations

import re
from typing import Any

from cvdiag.contract.schema import (
    AGENT_ERROR_MESSAGE_MAX_CHARS,
    AGENT_SOURCES,
    DEMO_MAX_CHARS,
    EDGE_HEADER_MAX_CHARS,
    EDGE_HEADERS,
    ENVELOPE_FIELDS,
    LAYERS,
    LLM_APIS,
    LLM_SOURCES,
    LLM_TEXT_MAX_CHARS,
    OUTCOMES,
    SLUG_RE,
    SPAN_ID_RE,
    STDERR_TAIL_MAX_CHARS,
    TEST_ID_RE,
    TOOL_ERROR_KINDS,
    TOOL_EXCERPT_MAX_CHARS,
    TOOL_KINDS,
    TOOL_NAMES_MAX,
    TOOL_SOURCES,
    UUID7_RE,
    is_accounting,
    lookup,
)
from cvdiag.contract.timestamps import parse_ts
from cvdiag.read.parsing import restored

_TS_RE = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d{1,9})?(Z|\+00:00)$")
_ARGS_HASH_RE = re.compile(r"[0-9a-fA-F]{8}")
_BOUNDARY_RE = re.compile(r"^(probe|backend|aimock|cvdiag)(\.[a-z][a-z0-9_]*)+$")
_NULLABLE = {"parent_span_id", "duration_ms"}
#: Spec section 2: an absent flag means false (earlier emitters never wrote them).
_OPTIONAL = frozenset(("_metadata_dropped", "_truncated"))
_TYPES: dict[str, tuple[type, ...]] = {
    "schema_version": (int,),
    "test_id": (str,),
    "trace_id": (str,),
    "span_id": (str,),
    "parent_span_id": (str,),
    "layer": (str,),
    "boundary": (str,),
    "slug": (str,),
    "demo": (str,),
    "ts": (str,),
    "mono_ns": (int,),
    "duration_ms": (int,),
    "outcome": (str,),
    "edge_headers": (dict,),
    "metadata": (dict,),
    "_metadata_dropped": (bool,),
    "_truncated": (bool,),
}


def _type_ok(name: str, value: Any) -> bool:
    if value is None:
        return name in _NULLABLE
    if isinstance(value, bool) and bool not in _TYPES[name]:
        return False
    return isinstance(value, _TYPES[name])


def problems(env: Any) -> list[str]:
    """Every way ``env`` breaks schema v1; empty when it is valid."""
    if not isinstance(env, dict):
        return ["not a JSON object"]
    env = restored(env)  # checked as written, not as the reader coerced it
    out: list[str] = []
    missing = [f for f in ENVELOPE_FIELDS if f not in env and f not in _OPTIONAL]
    if missing:
        out.append(f"missing fields: {', '.join(missing)}")
    extra = sorted(k for k in env if k not in _TYPES)
    if extra:
        out.append(f"unknown fields: {', '.join(extra)}")
    for name in ENVELOPE_FIELDS:
        if name in env and not _type_ok(name, env[name]):
            out.append(f"{name} has the wrong type ({type(env[name]).__name__})")
    if out:
        return out
    if env["schema_version"] != 1:
        out.append(f"schema_version is {env['schema_version']}, not 1")
    tid = env["test_id"]
    if not (UUID7_RE.match(tid) or TEST_ID_RE.match(tid)):
        out.append("test_id is neither a lowercase UUIDv7 nor a sanitized id ([a-z0-9._-], at most 128)")
    if not SPAN_ID_RE.match(env["span_id"]):
        out.append("span_id is not 16 lowercase hex characters")
    if env["parent_span_id"] is not None and not SPAN_ID_RE.match(env["parent_span_id"]):
        out.append("parent_span_id is neither null nor 16 lowercase hex characters")
    if env["layer"] not in LAYERS:
        out.append(f"layer {env['layer']!r} is not one of {', '.join(LAYERS)}")
    if not SLUG_RE.match(env["slug"]):
        out.append(f"slug {env['slug']!r} does not match {SLUG_RE.pattern}")
    if len(env["demo"]) > DEMO_MAX_CHARS:
        out.append(f"demo is longer than {DEMO_MAX_CHARS} characters")
    if not _TS_RE.match(env["ts"]):
        out.append(f"ts {env['ts']!r} is not an RFC 3339 UTC time")
    else:
        try:
            parse_ts(env["ts"])
        except ValueError:
            out.append(f"ts {env['ts']!r} is not a valid date")
    if env["outcome"] not in OUTCOMES:
        out.append(f"outcome {env['outcome']!r} is not one of {', '.join(OUTCOMES)}")
    for name in ("mono_ns", "duration_ms"):
        if env[name] is not None and env[name] < 0:
            out.append(f"{name} is negative")
    out.extend(_edge_problems(env["edge_headers"]))
    out.extend(_boundary_problems(env))
    return out


def _edge_problems(edges: dict[str, Any]) -> list[str]:
    out = []
    keys = set(edges)
    if keys != set(EDGE_HEADERS):
        missing, extra = sorted(set(EDGE_HEADERS) - keys), sorted(keys - set(EDGE_HEADERS))
        out.append(f"edge_headers keys differ (missing: {missing or '-'}, unknown: {extra or '-'})")
    for k, v in edges.items():
        if v is not None and not isinstance(v, str):
            out.append(f"edge_headers[{k!r}] is not a string or null")
        elif isinstance(v, str) and len(v) > EDGE_HEADER_MAX_CHARS:
            out.append(f"edge_headers[{k!r}] is longer than {EDGE_HEADER_MAX_CHARS} characters")
    return out


def _boundary_problems(env: dict[str, Any]) -> list[str]:
    name, layer = env["boundary"], env["layer"]
    if is_accounting(name):
        out = []
        if env["slug"] != "cvdiag":
            out.append(f"accounting boundary {name} must have slug 'cvdiag'")
        if env["outcome"] != "info":
            out.append(f"accounting boundary {name} must have outcome 'info'")
        return out
    if not _BOUNDARY_RE.match(name) or name.split(".", 1)[0] != layer:
        return [f"boundary {name!r} is not '<layer>.<name>' for layer {layer!r}"]
    known = lookup(name)
    if known is None or known.metadata is None:
        return []  # a custom boundary: its metadata keys are the application's
    unknown = sorted(k for k in env["metadata"] if not known.allows(k))
    out = [f"metadata keys not in the catalog for {name}: {', '.join(unknown)}"] if unknown else []
    if name.startswith("backend.llm.call."):
        out.extend(_key_problems(env["metadata"], _LLM_KEY_CHECKS))
    elif name == "backend.agent.exit":
        out.extend(_key_problems(env["metadata"], _LLM_KEY_CHECKS | _AGENT_EXIT_CHECKS))
    elif name == "backend.agent.output":
        out.extend(_key_problems(env["metadata"], _AGENT_OUTPUT_CHECKS))
    elif name.startswith("backend.tool.call."):
        out.extend(_key_problems(env["metadata"], _TOOL_KEY_CHECKS))
    elif name == "backend.tool.server.start":
        out.extend(_key_problems(env["metadata"], _TOOL_SERVER_CHECKS))
    elif name in ("backend.response.complete", "backend.error.caught"):
        out.extend(_key_problems(env["metadata"], _OTEL_CHECKS))
    return out


def _count(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def _short_text(value: Any) -> bool:
    return isinstance(value, str) and len(value) <= LLM_TEXT_MAX_CHARS


def _text_up_to(limit: int) -> tuple[Any, str]:
    return (lambda v: isinstance(v, str) and len(v) <= limit), f"a string of at most {limit} characters"


def _tool_names(value: Any) -> bool:
    return isinstance(value, list) and len(value) <= TOOL_NAMES_MAX and all(_short_text(v) for v in value)


def _one_of(names: tuple[str, ...]) -> tuple[Any, str]:
    # ``type(v) is str`` first: a list or a dict from another emitter is no name (and not hashed).
    return (lambda v: type(v) is str and v in names), f"one of {', '.join(names)}"


_A_COUNT = (_count, "a count (int >= 0)")
_A_BOOLEAN = (lambda v: isinstance(v, bool), "a boolean")
_A_STRING = (lambda v: isinstance(v, str), "a string")


#: The optional keys of LLM calls seen at the HTTP client and of agent.exit (section 3),
#: when present and not null.
_LLM_KEY_CHECKS: dict[str, tuple[Any, str]] = {
    "source": _one_of(LLM_SOURCES),
    "api": _one_of(LLM_APIS),
    "stream": _A_BOOLEAN,
    "attempt": _A_COUNT,
    "http_status": (lambda v: _count(v) and 100 <= v <= 599, "an HTTP status (100-599)"),
    "error_type": _text_up_to(LLM_TEXT_MAX_CHARS),
    "request_id": _text_up_to(LLM_TEXT_MAX_CHARS),
    "retry_after_ms": _A_COUNT,
    "output_chars": _A_COUNT,
    "chunks": _A_COUNT,
    "error_class": _A_STRING,
    "client": _A_STRING,  # another emitter's client library may have another name
    "tool_calls": _A_COUNT,
    "tool_names": (
        _tool_names,
        f"a list of at most {TOOL_NAMES_MAX} strings of at most {LLM_TEXT_MAX_CHARS} characters",
    ),
    "output_schema": _A_BOOLEAN,
    "output_valid": _A_BOOLEAN,
    "error_message": _text_up_to(AGENT_ERROR_MESSAGE_MAX_CHARS),
    "otel_convention": _text_up_to(LLM_TEXT_MAX_CHARS),
}
#: The keys of tool call lines (section 3, "Tool calls"), when present and not null.
_TOOL_KEY_CHECKS: dict[str, tuple[Any, str]] = {
    "tool_name": _A_STRING,
    "call_id": _A_STRING,
    "source": _one_of(TOOL_SOURCES),
    "server": _A_STRING,
    "args_chars": _A_COUNT,
    "args_hash": (lambda v: isinstance(v, str) and _ARGS_HASH_RE.fullmatch(v) is not None, "8 hex digits"),
    "result_chars": _A_COUNT,
    "error_kind": _one_of(TOOL_ERROR_KINDS),
    "error_excerpt": _text_up_to(TOOL_EXCERPT_MAX_CHARS),
    "kind": _one_of(TOOL_KINDS),
    "error_class": _A_STRING,
    "handed_back": _A_BOOLEAN,
    "stderr_tail": _text_up_to(STDERR_TAIL_MAX_CHARS),
    "otel_convention": _text_up_to(LLM_TEXT_MAX_CHARS),
}


#: Where a line was read from a span, and the convention it was read with (section 9).
_OTEL_CHECKS: dict[str, tuple[Any, str]] = {
    "source": _one_of(("otel",)),
    "otel_convention": _text_up_to(LLM_TEXT_MAX_CHARS),
}
_A_NUMBER = (lambda v: isinstance(v, int | float) and not isinstance(v, bool), "a number")
#: An agent run's end read from a span or a scope (section 9, extension).
_AGENT_EXIT_CHECKS: dict[str, tuple[Any, str]] = {
    "source": _one_of(AGENT_SOURCES),
    "agent_name": _A_STRING,
    "turns": _A_COUNT,
    "limit_name": _text_up_to(LLM_TEXT_MAX_CHARS),
    "limit_value": _A_NUMBER,
    "otel_convention": _text_up_to(LLM_TEXT_MAX_CHARS),
}
#: An output check (section 9, extension).
_AGENT_OUTPUT_CHECKS: dict[str, tuple[Any, str]] = {
    "agent_name": _A_STRING,
    "valid": _A_BOOLEAN,
    "schema_name": _A_STRING,
    "attempts": _A_COUNT,
    "error_class": _A_STRING,
    "error_excerpt": _text_up_to(TOOL_EXCERPT_MAX_CHARS),
    "source": _one_of(AGENT_SOURCES),
    "otel_convention": _text_up_to(LLM_TEXT_MAX_CHARS),
}
#: A tool server's start (section 9, extension).
_TOOL_SERVER_CHECKS: dict[str, tuple[Any, str]] = {
    "server": _A_STRING,
    "transport": _one_of(("stdio", "http")),
    "command": _A_STRING,
    "error_class": _A_STRING,
    "error_excerpt": _text_up_to(TOOL_EXCERPT_MAX_CHARS),
    "stderr_tail": _text_up_to(STDERR_TAIL_MAX_CHARS),
}


def _key_problems(metadata: dict[str, Any], checks: dict[str, tuple[Any, str]]) -> list[str]:
    out = []
    for key, (check, what) in checks.items():
        value = metadata.get(key)
        if value is not None and not check(value):
            out.append(f"metadata {key} is not {what}")
    return out
