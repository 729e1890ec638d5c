"""The CVDIAG v1 contract: envelope fields, boundary catalog, tiers, caps, headers.

Both the emit side and the read side import this module (and ``ids``) and nothing
else of each other, so it must stay free of Starlette, structlog and rich. The source
of truth is ``shared/spec/wire-format.md``; section numbers below refer to it.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from enum import IntEnum
from types import MappingProxyType

SCHEMA_VERSION = 1

#: What every CVDIAG line holds (section 1): readers search for it to find the lines.
MARKER = "CVDIAG"
#: The line prefix on stdout (section 1). Readers also accept ``JAVA_PREFIX``.
PREFIX = MARKER + " "
JAVA_PREFIX = MARKER + "_EVENT "

#: Envelope keys in wire order (section 2); renderers must keep this order.
ENVELOPE_FIELDS: tuple[str, ...] = (
    "schema_version",
    "test_id",
    "trace_id",
    "span_id",
    "parent_span_id",
    "layer",
    "boundary",
    "slug",
    "demo",
    "ts",
    "mono_ns",
    "duration_ms",
    "outcome",
    "edge_headers",
    "metadata",
    "_metadata_dropped",
    "_truncated",
)

LAYERS: tuple[str, ...] = ("probe", "backend", "aimock")
OUTCOMES: tuple[str, ...] = ("ok", "err", "timeout", "info")
FAILURE_OUTCOMES: frozenset[str] = frozenset({"err", "timeout"})
TERMINATION_KINDS: tuple[str, ...] = ("fin_clean", "fin_premature", "rst", "chunk_error", "timeout", "shutdown")
TERMINAL_OUTCOMES: tuple[str, ...] = ("ok", "error", "cancelled")

#: Section 6: the only response/request headers an envelope carries, always all 9.
EDGE_HEADERS: tuple[str, ...] = (
    "cf-ray",
    "cf-mitigated",
    "cf-cache-status",
    "x-railway-edge",
    "x-railway-request-id",
    "x-hikari-trace",
    "retry-after",
    "via",
    "server",
)
EDGE_HEADER_MAX_CHARS = 256
#: Client IP and geo headers: never captured, whatever the configuration.
NEVER_CAPTURED_HEADERS: frozenset[str] = frozenset(
    {
        "cf-ipcountry",
        "cf-connecting-ip",
        "cf-ipcity",
        "cf-iplatitude",
        "cf-iplongitude",
        "cf-iptimezone",
        "cf-visitor",
        "cf-worker",
        "true-client-ip",
        "x-forwarded-for",
        "x-real-ip",
        "forwarded",
    }
)

TEST_ID_HEADER = "x-test-id"
SLUG_HEADER = "x-aimock-context"
#: Section 6: the only headers forwarded to outbound (LLM) calls.
OUTBOUND_ALLOW_LIST: tuple[str, ...] = (
    "x-test-id",
    "x-aimock-context",
    "x-diag-run-id",
    "x-diag-hops",
    "x-aimock-strict",
)

ACCOUNTING_SLUG = "cvdiag"
DEFAULT_DEMO = "default"
DEMO_MAX_CHARS = 256
TEST_ID_MAX_CHARS = 128

SLUG_RE = re.compile(r"^[a-z][a-z0-9-]{0,63}$")
SPAN_ID_RE = re.compile(r"^[0-9a-f]{16}$")
UUID7_RE = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$")
#: What an adopted (sanitized) test id may contain (section 5).
TEST_ID_RE = re.compile(r"^[a-z0-9._-]{1,128}$")


class Tier(IntEnum):
    """Cumulative verbosity: a boundary is written when its tier <= the active tier."""

    DEFAULT = 0
    VERBOSE = 1
    DEBUG = 2

    @classmethod
    def parse(cls, raw: str | None) -> Tier | None:
        """``"verbose"`` -> Tier.VERBOSE; None for anything unknown."""
        if raw is None:
            return None
        return _TIER_NAMES.get(raw.strip().lower())

    @property
    def label(self) -> str:
        return self.name.lower()


_TIER_NAMES = {t.name.lower(): t for t in Tier}

#: Section 7: serialized envelope caps in UTF-8 bytes, per active tier.
ENVELOPE_CAP_BYTES: Mapping[Tier, int] = MappingProxyType({Tier.DEFAULT: 2048, Tier.VERBOSE: 4096, Tier.DEBUG: 16384})


@dataclass(frozen=True, slots=True)
class Boundary:
    """One catalog entry: where it is emitted, from which tier, with which metadata.

    ``metadata`` is None for accounting boundaries, whose metadata is free.
    """

    name: str
    layer: str
    tier: Tier
    metadata: frozenset[str] | None

    def allows(self, key: str) -> bool:
        return self.metadata is None or key in self.metadata


def _b(name: str, tier: Tier, *keys: str) -> Boundary:
    return Boundary(name, name.split(".", 1)[0], tier, frozenset(keys))


_D, _V, _X = Tier.DEFAULT, Tier.VERBOSE, Tier.DEBUG

#: The ``api`` of an LLM call (section 3, extension): the wire format it speaks.
LLM_APIS: tuple[str, ...] = (
    "chat.completions",
    "responses",
    "completions",
    "embeddings",
    "messages",
    "generate_content",
    "other",
)
LLM_SOURCES: tuple[str, ...] = ("http", "scope", "otel")
#: The HTTP client library that carried an LLM call (section 3, "More keys on LLM lines").
LLM_CLIENTS: tuple[str, ...] = ("httpx", "httpx2", "aiohttp", "urllib3", "http.client")
#: Where a tool call was seen, and how a failed one failed (section 3, "Tool calls").
TOOL_SOURCES: tuple[str, ...] = ("wire", "mcp", "hook", "scope", "otel")
#: Where an agent run, a tool call's kind and an output check were seen (section 9, extension).
AGENT_SOURCES: tuple[str, ...] = ("scope", "otel")
TOOL_KINDS: tuple[str, ...] = ("function", "mcp", "agent", "other")
#: The convention family a span was read with (section 9): ``otel_convention``'s values
#: other than a framework's own name.
OTEL_CONVENTIONS: tuple[str, ...] = ("genai", "openinference", "openllmetry")
#: ``stderr_tail`` of an MCP server (its last lines of standard error) is cut to this.
STDERR_TAIL_MAX_CHARS = 512
TOOL_ERROR_KINDS: tuple[str, ...] = ("raised", "reported", "protocol", "transport", "timeout")
#: tool_names holds at most this many names, each cut to LLM_TEXT_MAX_CHARS.
TOOL_NAMES_MAX = 8
#: error_excerpt of a failed tool call, and error_message on agent.exit, are cut to these.
TOOL_EXCERPT_MAX_CHARS = 256
AGENT_ERROR_MESSAGE_MAX_CHARS = 256
#: error_type and request_id are cut to this many characters.
LLM_TEXT_MAX_CHARS = 64
#: The integers a JSON line can carry (orjson's: signed and unsigned 64-bit). A log or a
#: provider can hold any number; both sides write one past this range as something else.
JSON_INT_MIN, JSON_INT_MAX = -(1 << 63), (1 << 64) - 1

#: LLM calls seen at the HTTP client (section 3, extension): keys of start and response.
_LLM_CALL_KEYS = ("source", "api", "stream", "attempt", "client")
#: ... and of the response only.
_LLM_RESPONSE_KEYS = (
    "http_status",
    "error_type",
    "retry_after_ms",
    "request_id",
    "output_chars",
    "chunks",
    "tool_calls",
    "tool_names",
    "output_valid",
)
#: Tool calls (section 3, extension): keys of start and response.
_TOOL_CALL_KEYS = ("tool_name", "call_id", "source", "server")
#: Read from an OpenTelemetry span (section 9, extension): which convention said it.
_OTEL_KEYS = ("otel_convention",)
#: A tool call's response, when a span or a framework's hook saw it (section 9, extension):
#: what kind of tool, the exception's class, whether the framework handed the error back
#: to the model, and an MCP server's last lines of standard error.
_TOOL_RESPONSE_EXTRA = ("kind", "error_class", "handed_back", "stderr_tail", *_OTEL_KEYS)
#: An agent run's end, when a span saw it (section 9, extension): its turns and the
#: framework's own limit that ended it (name and value).
_AGENT_EXIT_EXTRA = ("agent_name", "source", "turns", "limit_name", "limit_value", *_OTEL_KEYS)

# Extension keys (section 3) are listed with their boundary: they are optional.
_BUILTIN: tuple[Boundary, ...] = (
    _b("backend.request.ingress", _V, "method", "path", "content_length", "inbound_test_id_adopted"),
    _b("backend.agent.enter", _D, "agent_name", "model_id"),
    _b(
        "backend.llm.call.start",
        _V,
        "provider",
        "model",
        "prompt_token_count_estimate",
        "output_schema",
        *_LLM_CALL_KEYS,
    ),
    _b("backend.llm.call.heartbeat", _V, "elapsed_ms_since_start"),
    _b(
        "backend.llm.call.response",
        _V,
        "provider",
        "model",
        "response_token_count",
        "latency_ms",
        "error_class",
        "prompt_tokens",
        "completion_tokens",
        "finish_reason",
        "ttft_ms",
        *_LLM_CALL_KEYS,
        *_LLM_RESPONSE_KEYS,
        *_OTEL_KEYS,
    ),
    _b("backend.sse.first_byte", _V, "delta_ms_from_ingress"),
    _b("backend.sse.event", _X, "event_type", "payload_size_bytes", "sequence_num"),
    _b("backend.sse.aborted", _D, "termination_kind", "bytes_before_abort"),
    _b(
        "backend.agent.exit",
        _D,
        "terminal_outcome",
        "total_duration_ms",
        "error_class",
        "error_message",
        *_AGENT_EXIT_EXTRA,
    ),
    # An agent's structured output checked against its schema (section 9, extension).
    _b(
        "backend.agent.output",
        _V,
        "agent_name",
        "valid",
        "schema_name",
        "attempts",
        "error_class",
        "error_excerpt",
        "source",
        *_OTEL_KEYS,
    ),
    _b("backend.tool.call.start", _V, *_TOOL_CALL_KEYS, "args_chars", "args_hash"),
    _b(
        "backend.tool.call.response",
        _V,
        *_TOOL_CALL_KEYS,
        "result_chars",
        "error_kind",
        "error_excerpt",
        *_TOOL_RESPONSE_EXTRA,
    ),
    # A tool server started and initialised (MCP over stdio; section 9, extension).
    _b(
        "backend.tool.server.start",
        _V,
        "server",
        "transport",
        "command",
        "error_class",
        "error_excerpt",
        "stderr_tail",
    ),
    _b(
        "backend.response.complete",
        _D,
        "http_status",
        "content_length",
        "total_duration_ms",
        "sse_event_count",
        "source",
        *_OTEL_KEYS,
    ),
    _b(
        "backend.error.caught",
        _D,
        "exception_type",
        "message_scrubbed",
        "stack_brief",
        "truncated",
        "source",
        *_OTEL_KEYS,
    ),
    _b("probe.start", _V, "url", "viewport"),
    _b("probe.navigate.complete", _V, "url", "nav_ms", "http_status"),
    _b("probe.message.send", _D, "message_index", "char_count", "demo"),
    _b("probe.dom.container.mount", _D, "delta_ms_from_start"),
    _b("probe.dom.firsttoken", _D, "delta_ms_from_start", "text_length"),
    _b("probe.dom.alternate_content", _D, "child_type_histogram"),
    _b("probe.sse.event", _V, "event_type", "payload_size_bytes", "sequence_num"),
    _b("probe.sse.aborted", _D, "termination_kind", "bytes_before_abort"),
    _b("probe.network.error", _D, "url", "error_class", "response_status"),
    _b("probe.network.response", _D, "url", "status", "content_length", "duration_ms"),
    _b("probe.console.error", _D, "level", "message_scrubbed", "source_file", "line_col"),
    _b(
        "probe.exit",
        _D,
        "terminal_outcome",
        "total_duration_ms",
        "sse_event_count",
        "first_token_delta_ms",
        "failure_classifier",
    ),
    _b("aimock.request.ingress", _V, "path", "content_length", "match_keys"),
    _b("aimock.match.decision", _V, "fixture_id", "match_score", "reject_reasons"),
    _b("aimock.response.start", _V, "delta_ms_from_ingress"),
    _b("aimock.sse.chunk", _X, "chunk_size_bytes", "sequence_num"),
    _b("aimock.response.aborted", _D, "termination_kind", "bytes_before_abort"),
    _b("aimock.response.complete", _D, "http_status", "total_bytes", "total_duration_ms", "chunk_count"),
)

#: Accounting boundaries: written at every tier, slug ``cvdiag``, outcome info, free metadata.
ACCOUNTING: tuple[Boundary, ...] = tuple(
    Boundary(name, "backend", Tier.DEFAULT, None)
    for name in (
        "cvdiag.queue_dropped",
        "cvdiag.metadata_dropped",
        "cvdiag.collision_detected",
        "cvdiag.purge_audit",
    )
)

#: The built-in catalog, read-only. Custom boundaries live in ``registry`` too.
CATALOG: Mapping[str, Boundary] = MappingProxyType({b.name: b for b in _BUILTIN + ACCOUNTING})

#: Tier promotion (section 3, extension): these boundaries are written at the default
#: tier too when their outcome is a failure (failures are rare and are the evidence).
PROMOTED_ON_FAILURE: frozenset[str] = frozenset(
    {
        "backend.llm.call.response",
        "backend.tool.call.response",
        "backend.agent.output",
        "backend.tool.server.start",
    }
)


def written_at(boundary: Boundary, outcome: str | None) -> Tier:
    """The lowest tier at which an envelope of ``boundary`` with ``outcome`` is written."""
    if outcome in FAILURE_OUTCOMES and boundary.name in PROMOTED_ON_FAILURE:
        return Tier.DEFAULT
    return boundary.tier


BACKEND_TERMINALS: tuple[str, ...] = (
    "backend.response.complete",
    "backend.sse.aborted",
    "backend.error.caught",
)

_CUSTOM_NAME_RE = re.compile(r"^(probe|backend|aimock)(\.[a-z][a-z0-9_]{0,63}){1,4}$")
_METADATA_KEY_RE = re.compile(r"^[a-z][a-z0-9_]{0,63}$")

_registry: dict[str, Boundary] = dict(CATALOG)


def lookup(name: str) -> Boundary | None:
    """The catalog entry for ``name`` (built-in or registered), or None."""
    return _registry.get(name)


#: ``lookup`` without a Python frame, for the emit path (registering adds to this dict).
lookup_now = _registry.get


#: Boundaries cvdiag writes about itself (drops, collisions), not about a request.
ACCOUNTING_PREFIX = "cvdiag."


def is_accounting(name: str) -> bool:
    return name.startswith(ACCOUNTING_PREFIX)


def register_boundary(
    name: str, *, layer: str, tier: str | Tier, metadata: tuple[str, ...] | list[str] | frozenset[str]
) -> Boundary:
    """Add a custom boundary (spec section 3, extension).

    Raises ValueError on a bad definition: a malformed name, a layer that is not the
    name's first segment, an unknown tier, a bad metadata key, or a clash with a
    different existing definition. Registering the same definition twice is a no-op.
    """
    if not isinstance(name, str) or not _CUSTOM_NAME_RE.match(name):
        raise ValueError(f"boundary name must look like '<layer>.<name>[.<name>...]' in lower case, got {name!r}")
    if layer not in LAYERS or name.split(".", 1)[0] != layer:
        raise ValueError(f"layer must be one of {LAYERS} and match the name's first segment, got {layer!r}")
    parsed = tier if isinstance(tier, Tier) else Tier.parse(tier)
    if parsed is None:
        raise ValueError(f"tier must be 'default', 'verbose' or 'debug', got {tier!r}")
    if isinstance(metadata, str):
        raise ValueError("metadata must be a collection of key names, not a string")
    keys = frozenset(metadata)
    bad = sorted(k for k in keys if not isinstance(k, str) or not _METADATA_KEY_RE.match(k))
    if bad:
        raise ValueError(f"metadata keys must be snake_case identifiers, got {bad!r}")
    boundary = Boundary(name, layer, parsed, keys)
    existing = _registry.get(name)
    if existing is not None and existing != boundary:
        raise ValueError(f"boundary {name!r} is already defined differently")
    _registry[name] = boundary
    return boundary
