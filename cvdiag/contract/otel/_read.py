"""One finished span to the envelope of the boundary it ends (spec section 9): the one place.

``read_span`` takes only the attributes the convention tables list, measures a tool's
result without keeping it, and reads the recorded exception for the framework's limit,
a failed output, a cancellation or a local fault of the app's own HTTP client.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from functools import lru_cache
from types import MappingProxyType
from typing import Any

import cvdiag.contract.otel._conventions as c
import cvdiag.contract.otel._exceptions as x
from cvdiag.contract.ids import sanitize_test_id
from cvdiag.contract.otel._view import SpanEvidence, SpanView
from cvdiag.contract.schema import (
    AGENT_ERROR_MESSAGE_MAX_CHARS,
    LLM_TEXT_MAX_CHARS,
    STDERR_TAIL_MAX_CHARS,
    TOOL_EXCERPT_MAX_CHARS,
)
from cvdiag.contract.scrubber import SCAN_LIMIT, scrub_clipped

__all__ = ["read_span", "scrub_metadata", "span_test_id"]

_SERVER = 2
#: The attributes and baggage entries a test id is read from, in order (spec section 9).
TEST_ID_KEYS = ("cvdiag.test_id", "test.id")
BAGGAGE_TEST_ID = "cvdiag.test_id"
#: A JSON-RPC error code as MCP writes ``error.type`` (``-32602``), or its tool error.
_PROTOCOL_ERROR = re.compile(r"-?\d{1,6}|tool_error")
#: An error code a provider wrote (``rate_limit_exceeded``, ``429``), not a class name.
_PROVIDER_CODE = re.compile(r"[a-z0-9_]{1,64}")
#: The provider's HTTP status as the frameworks' exceptions print it: pydantic-ai's
#: ModelHTTPError 'status_code: 500, ...', openai's APIStatusError 'Error code: 429 - ...'.
_STATUS_IN_MESSAGE = re.compile(r"\A(?:status_code: |Error code: )(?P<status>[1-5]\d\d)\b")
#: openai-agents marks a tool error it handed back to the model (agents/_run_impl.py).
_HANDED_BACK_STATUS = "non-fatal"

#: How long each metadata string may be once scrubbed (the catalog's caps); others 64.
_TEXT_LIMITS: Mapping[str, int] = MappingProxyType(
    {
        "error_excerpt": TOOL_EXCERPT_MAX_CHARS,
        "error_message": AGENT_ERROR_MESSAGE_MAX_CHARS,
        "stderr_tail": STDERR_TAIL_MAX_CHARS,
        "message_scrubbed": 512,
        "tool_name": 128,
        "agent_name": 128,
        "call_id": 128,
        "server": 128,
        "model": 128,
        "schema_name": 128,
    }
)


#: What may make a span evidence: an attribute that marks a convention family, or a name
#: one of them gives. Any other span (an HTTP client's, a database's) gives nothing.
_MARKERS: frozenset[str] = frozenset(key for family in c.FAMILIES for key in family.markers)
_NAME_PREFIXES: tuple[str, ...] = tuple(prefix for family in c.FAMILIES for prefix, _ in family.names)


def may_be_evidence(name: str, attributes: Mapping[str, Any]) -> bool:
    """False for a span ``read_span`` surely reads as nothing: a reader in the request
    path skips building its view (an HTTP server's span is not counted here)."""
    return not _MARKERS.isdisjoint(attributes) or name.startswith(_NAME_PREFIXES)


def read_span(span: SpanView) -> SpanEvidence | None:
    """The evidence one finished span gives, or None for a span that is no evidence.

    Never raises: a span no table understands is no evidence, not a failure of the reader.
    """
    try:
        return _read(span)
    except Exception:  # a hostile attribute (a broken __str__, an odd type) is no evidence
        return None


def span_test_id(span: SpanView, baggage: Mapping[str, str] | None = None, attr: str | None = None) -> str | None:
    """The test a span belongs to (spec section 9): ``cvdiag.test_id``, then ``test.id``
    (on the span, then its resource), then baggage ``cvdiag.test_id``, then ``attr`` (a
    file reader's ``--test-id-attr``, on the span or its resource).

    None when nothing names one: a file reader then falls back to the trace id.
    """
    for key in TEST_ID_KEYS:
        for where in (span.attributes, span.resource):
            found = _test_id(where.get(key))
            if found:
                return found
    if baggage:
        found = _test_id(baggage.get(BAGGAGE_TEST_ID))
        if found:
            return found
    if attr:
        for where in (span.attributes, span.resource):
            found = _test_id(where.get(attr))
            if found:
                return found
    return None


def _test_id(value: Any) -> str | None:
    if isinstance(value, bool) or not isinstance(value, (str, int)):
        return None
    return _sanitized(str(value)[:SCAN_LIMIT])


@lru_cache(maxsize=1024)
def _sanitized(text: str) -> str | None:
    """A test id as the spec adopts it (the spans of one test carry the same one)."""
    return sanitize_test_id(text)


#: Keys whose values ``read_span`` takes from its own vocabulary, never from a span.
_OWN_WORDS = frozenset({"source", "kind", "error_kind", "otel_convention", "terminal_outcome"})


def scrub_metadata(metadata: Mapping[str, Any]) -> dict[str, Any]:
    """``metadata`` with every string scrubbed, then cut to its key's cap (spec section 7)."""
    return {
        k: _scrubbed(v, _TEXT_LIMITS.get(k, LLM_TEXT_MAX_CHARS)) if type(v) is str and k not in _OWN_WORDS else v
        for k, v in metadata.items()
    }


def _scrubbed(text: str, limit: int) -> str:
    # Names (tools, agents, models) repeat span after span: their scrub is remembered.
    return _scrubbed_name(text, limit) if len(text) <= 128 else scrub_clipped(text, limit)


@lru_cache(maxsize=4096)
def _scrubbed_name(text: str, limit: int) -> str:
    return scrub_clipped(text, limit)


# -- the mapping ----------------------------------------------------------------------------


class _Span:
    """One span being read: its family, its exception, and the fields its tables give."""

    __slots__ = ("attrs", "exc_class", "exc_message", "exc_trace", "failed", "family", "span")

    def __init__(self, span: SpanView, family: c.Family) -> None:
        self.span = span
        self.family = family
        self.attrs = span.attributes
        error_type = self.text("error_type")
        self.exc_class, self.exc_message, self.exc_trace = _exception(span)
        self.failed = span.status_error or error_type is not None
        if self.exc_class is None and error_type is not None and _is_class_name(error_type):
            self.exc_class = x.short_class(error_type)  # error.type is the class's name (GenAI spans)
        if self.exc_message is None and self.failed and span.status_message:
            self.exc_message = _clip(span.status_message)
            if self.exc_class is None and ": " in self.exc_message[:80]:
                # pydantic-ai writes the status description 'UsageLimitExceeded: The next request ...'
                head, _, rest = self.exc_message.partition(": ")
                if head.isidentifier():
                    self.exc_class, self.exc_message = head, rest

    def value(self, field: str) -> Any:
        """The first attribute of the family's table for ``field`` that the span carries."""
        for key in self.family.by_field.get(field, ()):
            v = self.attrs.get(key)
            if v is not None and v != "" and v != ():
                return v
        return None

    def text(self, field: str) -> str | None:
        v = self.value(field)
        if isinstance(v, (tuple, list)):
            v = v[0] if v else None
        if v is None or isinstance(v, bool) or not isinstance(v, (str, int, float)):
            return None
        return _clip(str(v)) or None

    def count(self, field: str) -> int | None:
        v = self.value(field)
        if isinstance(v, bool) or not isinstance(v, (int, float)) or v != v or not 0 <= v < 1 << 63:
            return None
        return int(v)

    def flag(self, field: str) -> bool | None:
        v = self.value(field)
        return v if isinstance(v, bool) else None

    def retry(self, field: str) -> Any:
        for a in c.PYDANTIC_AI_RETRY:
            if a.field == field:
                v = self.attrs.get(a.key)
                return v if v not in (None, "") else None
        return None

    def evidence(self, boundary: str, outcome: str, metadata: dict[str, Any]) -> SpanEvidence:
        metadata["otel_convention"] = self.family.convention
        kept = MappingProxyType({k: v for k, v in metadata.items() if v is not None})
        return SpanEvidence(boundary, outcome, _duration_ms(self.span), kept, self.family.convention)


def _read(span: SpanView) -> SpanEvidence | None:
    family, role = _classify(span)
    if family is None:
        return _server(span) if span.kind == _SERVER else None
    s = _Span(span, family)
    if s.retry("output_retry_cause") is not None or s.retry("output_retry_attempt") is not None:
        role = "output"  # pydantic-ai's output function or output tool, made again
    if role == "tool":
        return _tool(s)
    if role == "llm":
        return _llm(s)
    if role == "output":
        return _output(s)
    if role in ("agent", "chain"):
        return _agent(s, chain=role == "chain")
    return None


def _classify(span: SpanView) -> tuple[c.Family | None, str | None]:
    attrs = span.attributes
    for family in c.FAMILIES:
        marked = any(k in attrs for k in family.markers)
        named = _by_name(family, span.name) if family.names else None
        if not marked and named is None:
            continue
        role = None
        if family.kind_key is not None:
            kind = attrs.get(family.kind_key)
            if isinstance(kind, str):
                role = family.kinds.get(kind.lower())
        if role is None and family is c.OPENLLMETRY and "llm.request.type" in attrs:
            role = "llm"
        if role is None and family is c.GENAI and attrs.get("mcp.method.name") == "tools/call":
            role = "tool"
        return family, role or named
    return None, None


def _by_name(family: c.Family, name: str) -> str | None:
    for prefix, role in family.names:
        if name == prefix or name.startswith(prefix + " ") or name.startswith(prefix + ":"):
            return role
    return None


def _name_after(span: SpanView, family: c.Family) -> str | None:
    """``execute_tool lookup`` -> ``lookup``: the name a span's title gives after its prefix."""
    for prefix, _ in family.names:
        if span.name.startswith(prefix + " ") or span.name.startswith(prefix + ": "):
            return _clip(span.name[len(prefix) :].lstrip(": ")) or None
    return None


def _tool(s: _Span) -> SpanEvidence:
    span = s.span
    name = s.text("tool_name") or _name_after(span, s.family) or _clip(span.name)
    mcp = s.text("mcp_method") is not None or span.name.startswith(("MCP send", "tools/call"))
    tool_type = s.text("tool_type")
    kind = "mcp" if mcp else "other" if tool_type in ("extension", "datastore") else "function"
    retried = s.retry("tool_retry_cause")
    failed = s.failed or retried is not None
    outcome, error_kind = "ok", None
    if failed:
        outcome, error_kind = "err", "raised"
        error_type = s.text("error_type")
        if s.exc_class in x.CANCELLED_CLASSES:  # cancelled with its request: no failure of its own
            outcome, error_kind = "timeout", None
        elif s.exc_class in x.TIMEOUT_CLASSES:
            outcome, error_kind = "timeout", "timeout"
        elif mcp and error_type is not None and _PROTOCOL_ERROR.fullmatch(error_type):
            error_kind = "protocol"
    handed_back = None
    if retried is not None or (span.status_message and _HANDED_BACK_STATUS in span.status_message[:200]):
        handed_back = True
    result = s.value("result")
    excerpt = s.exc_message or (_clip(str(retried)) if retried is not None else None)
    return s.evidence(
        "backend.tool.call.response",
        outcome,
        {
            "tool_name": name,
            "call_id": s.text("call_id"),
            "source": "otel",
            "server": s.text("server"),
            "kind": kind,
            "result_chars": len(result) if isinstance(result, str) and not failed else None,
            "error_kind": error_kind,
            "error_class": s.exc_class if failed else None,
            "error_excerpt": excerpt if failed else None,
            "handed_back": handed_back,
        },
    )


def _llm(s: _Span) -> SpanEvidence:
    outcome = "ok"
    error_class = None
    status = s.count("http_status")
    error_type = s.text("error_type")
    if s.failed:
        outcome = "err"
        error_class = s.exc_class
        if error_class in x.TIMEOUT_CLASSES or error_class in x.CANCELLED_CLASSES:
            outcome = "timeout"
        local = x.local_client_fault(s.exc_message, s.exc_trace)
        if local is not None:
            error_class, error_type = local, None  # the app's own client failed, not the provider
        elif status is None and s.exc_message:
            m = _STATUS_IN_MESSAGE.match(s.exc_message)
            status = int(m.group("status")) if m else None
        if error_type is not None and (_is_class_name(error_type) or error_type == "_OTHER"):
            error_type = None  # a class name, already error_class
    return s.evidence(
        "backend.llm.call.response",
        outcome,
        {
            "provider": s.text("provider"),
            "model": s.text("model"),
            "prompt_tokens": s.count("prompt_tokens"),
            "completion_tokens": s.count("completion_tokens"),
            "finish_reason": s.text("finish_reason"),
            "stream": s.flag("stream"),
            "http_status": status if status is not None and 100 <= status <= 599 else None,
            "error_class": error_class,
            "error_type": error_type,
            "latency_ms": _duration_ms(s.span),
            "source": "otel",
        },
    )


def _agent_name(s: _Span) -> str | None:
    return (
        s.text("agent_name")
        or _name_after(s.span, s.family)
        or (_clip(s.span.name) if s.family is c.OPENINFERENCE else None)
    )


def _agent(s: _Span, chain: bool) -> SpanEvidence | None:
    limit = x.framework_limit(s.exc_class, s.exc_message) if s.failed else None
    failure = x.output_failure(s.exc_class, s.exc_message) if s.failed and limit is None else None
    if failure is not None:
        return _output_failed(s, failure)
    if chain and limit is None:
        return None  # a chain's every step is a span: evidence only when it names a limit
    terminal = "ok"
    if s.failed:
        terminal = "cancelled" if s.exc_class in x.CANCELLED_CLASSES else "error"
    return s.evidence(
        "backend.agent.exit",
        "ok" if terminal == "ok" else "err",
        {
            "terminal_outcome": terminal,
            "total_duration_ms": _duration_ms(s.span),
            "error_class": s.exc_class if s.failed else None,
            "error_message": s.exc_message if s.failed else None,
            "agent_name": _agent_name(s),
            "source": "otel",
            "limit_name": limit[0] if limit else None,
            "limit_value": limit[1] if limit else None,
        },
    )


def _output(s: _Span) -> SpanEvidence:
    """pydantic-ai's output function or tool: valid unless it has to be made again."""
    cause = s.retry("output_retry_cause")
    if not s.failed and cause is None:
        return s.evidence("backend.agent.output", "ok", {"agent_name": _agent_name(s), "valid": True, "source": "otel"})
    attempt = s.retry("output_retry_attempt")
    failure = x.output_failure(s.exc_class or "ValidationError", s.exc_message or _clip(str(cause or "")))
    excerpt = failure.excerpt if failure else None
    return _output_failed(
        s,
        x.OutputFailure(
            failure.schema_name if failure else None,
            attempt if isinstance(attempt, int) and not isinstance(attempt, bool) else None,
            excerpt,
        ),
    )


def _output_failed(s: _Span, failure: x.OutputFailure) -> SpanEvidence:
    return s.evidence(
        "backend.agent.output",
        "err",
        {
            "agent_name": _agent_name(s) if s.family is not c.OPENLLMETRY else None,
            "valid": False,
            "schema_name": failure.schema_name,
            "attempts": failure.attempts,
            "error_class": s.exc_class,
            "error_excerpt": failure.excerpt,
            "source": "otel",
        },
    )


def _server(span: SpanView) -> SpanEvidence | None:
    """An HTTP server's span: the request's terminal, as the middleware would have written it."""
    if not any(k in span.attributes for k in c.HTTP_SERVER.markers):
        return None
    s = _Span(span, c.HTTP_SERVER)
    status = s.count("http_status")
    if status is not None and 100 <= status <= 599:
        return s.evidence(
            "backend.response.complete",
            "ok" if status < 500 else "err",
            {"http_status": status, "total_duration_ms": _duration_ms(span), "source": "otel"},
        )
    if not s.failed:
        return None
    return s.evidence(
        "backend.error.caught",
        "err",
        {"exception_type": s.exc_class, "message_scrubbed": s.exc_message, "source": "otel"},
    )


# -- small readers ---------------------------------------------------------------------------


def _exception(span: SpanView) -> tuple[str | None, str | None, str | None]:
    """The last exception event's class (short name), message and stack trace."""
    for name, _, attrs in reversed(span.events):
        if name == c.EXCEPTION_EVENT:
            cls = attrs.get(c.EXCEPTION_TYPE)
            message = attrs.get(c.EXCEPTION_MESSAGE)
            trace = attrs.get(c.EXCEPTION_STACKTRACE)
            return (
                x.short_class(cls) if isinstance(cls, str) else None,
                _clip(message) if isinstance(message, str) else None,
                trace[-x.SEARCH_CHARS :] if isinstance(trace, str) else None,
            )
    return None, None, None


def _is_class_name(error_type: str) -> bool:
    """``error.type`` holds a class name, not a code (``429``, ``-32602``, ``tool_error``, ``_OTHER``)."""
    return (
        error_type != "_OTHER"
        and not _PROVIDER_CODE.fullmatch(error_type)
        and not _PROTOCOL_ERROR.fullmatch(error_type)
    )


def _clip(text: str) -> str:
    """At most the scrubber's scan limit: a 10 MB attribute costs no more than 2 KB."""
    return text[:SCAN_LIMIT] if len(text) > SCAN_LIMIT else text


def _duration_ms(span: SpanView) -> int | None:
    if span.end_ns <= 0 or span.end_ns < span.start_ns:
        return None
    return (span.end_ns - span.start_ns) // 1_000_000
