"""One table per convention family: which spans are evidence, and the attributes taken.

Each entry names the spec or source it came from. Only the attributes listed here are
ever read (an allow-list): prompts, completions, messages, tool arguments and results
(``gen_ai.prompt.*``, ``gen_ai.input.messages``, ``input.value``, ``output.value``,
``llm.input_messages.*``, ``gen_ai.tool.call.arguments``, ...) are never copied. A tool's
result is measured (``result_chars``), never kept.

A span's *role* says which boundary it ends: ``tool`` (a tool call's response), ``agent``
(an agent run's exit), ``llm`` (an LLM call's response), ``chain`` (evidence only when it
carries a framework's limit or a failed output), ``output`` (an output check), ``server``
(an HTTP request's terminal).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

# Where each table comes from (read on 2026-11-28; the versions installed in the dev extra).
GENAI_SPEC = "open-telemetry/semantic-conventions-genai docs/gen-ai/gen-ai-spans.md, gen-ai-agent-spans.md"
GENAI_MCP_SPEC = "open-telemetry/semantic-conventions-genai docs/gen-ai/mcp.md"
GENAI_PY = "opentelemetry-semantic-conventions 0.66b2 _incubating/attributes/gen_ai_attributes.py"
ERROR_SPEC = "open-telemetry/semantic-conventions docs/general/recording-errors.md (error.type)"
HTTP_SPEC = "open-telemetry/semantic-conventions docs/http/http-spans.md"
MCP_SDK = "mcp 2.3.0 mcp/server/_otel.py, mcp/shared/jsonrpc_dispatcher.py"
OPENINFERENCE_SPEC = "Arize-ai/openinference spec/semantic_conventions.md; openinference-semantic-conventions 0.1.42"
OPENLLMETRY_SPEC = "traceloop/openllmetry opentelemetry-semantic-conventions-ai 0.5.1 (SpanAttributes)"
PYDANTIC_AI = "pydantic-ai-slim 2.68.0 pydantic_ai/_instrumentation.py (InstrumentationNames)"


@dataclass(frozen=True, slots=True)
class Attr:
    """One attribute a convention defines, the metadata field it fills, and its source."""

    field: str
    key: str
    source: str


@dataclass(frozen=True, slots=True)
class Family:
    """A convention family: how to tell its spans, what they are, what they say."""

    convention: str  # the otel_convention value
    source: str
    markers: tuple[str, ...]  # an attribute any of whose presence says the span follows it
    kind_key: str | None  # the attribute naming what the span is
    kinds: Mapping[str, str]  # its value (case-folded) -> role
    names: tuple[tuple[str, str], ...] = ()  # span-name prefix -> role (when kind_key says nothing)
    attrs: tuple[Attr, ...] = ()
    by_field: Mapping[str, tuple[str, ...]] = field(init=False)

    def __post_init__(self) -> None:
        grouped: dict[str, list[str]] = {}
        for a in self.attrs:
            grouped.setdefault(a.field, []).append(a.key)
        object.__setattr__(self, "by_field", MappingProxyType({k: tuple(v) for k, v in grouped.items()}))


def _table(source: str, rows: str) -> tuple[Attr, ...]:
    """The attributes of ``rows``, one a line: the field it fills, then the key (``#`` starts
    a note). A table is data: a family's rows read as the spec lists them."""
    pairs = (line.partition("#")[0].split() for line in rows.splitlines())
    return tuple(Attr(name, key, source) for name, key in (p for p in pairs if p))


# Attributes every family may carry, defined by the general conventions.
_COMMON = (
    *_table(ERROR_SPEC, "error_type error.type"),
    *_table(
        HTTP_SPEC,
        """
            http_status  http.response.status_code
            http_status  http.status_code
        """,
    ),
)

_GENAI_LLM = _table(
    GENAI_SPEC,
    """
        provider           gen_ai.provider.name
        provider           gen_ai.system  # deprecated name, still written by many
        model              gen_ai.response.model
        model              gen_ai.request.model
        prompt_tokens      gen_ai.usage.input_tokens
        prompt_tokens      gen_ai.usage.prompt_tokens  # deprecated name
        completion_tokens  gen_ai.usage.output_tokens
        completion_tokens  gen_ai.usage.completion_tokens  # deprecated name
        finish_reason      gen_ai.response.finish_reasons
        stream             gen_ai.request.stream
    """,
)

#: GenAI semantic conventions: ``chat``, ``execute_tool``, ``invoke_agent`` (pydantic-ai
#: v3+, Strands, Google ADK, Semantic Kernel, AutoGen, Logfire, TypeScript SDKs) and MCP
#: ``tools/call`` (the mcp SDK: the server's span, and the client's ``MCP send``).
GENAI = Family(
    convention="genai",
    source=GENAI_SPEC,
    markers=("gen_ai.operation.name", "mcp.method.name"),
    kind_key="gen_ai.operation.name",
    kinds=MappingProxyType(
        {
            "execute_tool": "tool",
            "invoke_agent": "agent",
            "invoke_workflow": "agent",
            "chat": "llm",
            "text_completion": "llm",
            "generate_content": "llm",
            "embeddings": "llm",
        }
    ),
    names=(
        ("execute_tool", "tool"),
        ("invoke_agent", "agent"),
        ("MCP send tools/call", "tool"),  # MCP_SDK: the client's span names the tool only here
        ("tools/call", "tool"),  # GENAI_MCP_SPEC: "{mcp.method.name} {target}"
    ),
    attrs=(
        *_GENAI_LLM,
        *_table(
            GENAI_SPEC,
            """
                tool_name   gen_ai.tool.name
                call_id     gen_ai.tool.call.id
                tool_type   gen_ai.tool.type
                result      gen_ai.tool.call.result  # measured, never copied
                agent_name  gen_ai.agent.name
                agent_name  gen_ai.workflow.name
            """,
        ),
        *_table(
            GENAI_MCP_SPEC,
            """
                mcp_method  mcp.method.name
                server      server.address
            """,
        ),
        *_COMMON,
    ),
)

#: OpenInference (Arize: openinference-instrumentation-openai, -langchain, -openai-agents,
#: -llama-index, -crewai, ...): ``openinference.span.kind`` says what a span is.
OPENINFERENCE = Family(
    convention="openinference",
    source=OPENINFERENCE_SPEC,
    markers=("openinference.span.kind",),
    kind_key="openinference.span.kind",
    kinds=MappingProxyType({"tool": "tool", "agent": "agent", "llm": "llm", "chain": "chain"}),
    attrs=(
        *_table(
            OPENINFERENCE_SPEC,
            """
                tool_name          tool.name
                call_id            tool.id
                result             output.value  # measured on TOOL spans, never copied
                agent_name         agent.name
                provider           llm.provider
                provider           llm.system
                model              llm.response.model_name
                model              llm.model_name
                model              llm.request.model_name
                prompt_tokens      llm.token_count.prompt
                completion_tokens  llm.token_count.completion
                finish_reason      llm.finish_reason
            """,
        ),
        *_COMMON,
    ),
)

#: OpenLLMetry (Traceloop: traceloop-sdk, opentelemetry-instrumentation-openai, -langchain,
#: -crewai, ...): ``traceloop.span.kind`` on decorated work, ``llm.request.type`` on LLM calls.
OPENLLMETRY = Family(
    convention="openllmetry",
    source=OPENLLMETRY_SPEC,
    markers=("traceloop.span.kind", "llm.request.type"),
    kind_key="traceloop.span.kind",
    kinds=MappingProxyType({"tool": "tool", "agent": "agent", "workflow": "chain", "task": "chain"}),
    attrs=(
        *_GENAI_LLM,  # OpenLLMetry writes the GenAI names for LLM calls
        *_table(
            OPENLLMETRY_SPEC,
            """
                llm_request_type  llm.request.type
                tool_name         traceloop.entity.name
                agent_name        traceloop.entity.name
                result            traceloop.entity.output  # measured on tool spans, never copied
                stream            llm.is_streaming
                stream            gen_ai.is_streaming
                finish_reason     llm.response.finish_reason
                finish_reason     gen_ai.response.finish_reason
            """,
        ),
        *_COMMON,
    ),
)

#: pydantic-ai's own names before it followed the GenAI conventions (instrumentation
#: version 2, still chosen by ``InstrumentationSettings(version=2)``), and Logfire's.
PYDANTIC_AI_V2 = Family(
    convention="pydantic-ai",
    source=PYDANTIC_AI,
    markers=(),
    kind_key=None,
    kinds=MappingProxyType({}),
    names=(("running tool", "tool"), ("agent run", "agent"), ("running output function", "output")),
    attrs=(
        *_GENAI_LLM,
        *_table(
            PYDANTIC_AI,
            """
                tool_name   gen_ai.tool.name
                call_id     gen_ai.tool.call.id
                result      tool_response
                agent_name  agent_name
                agent_name  gen_ai.agent.name
            """,
        ),
        *_COMMON,
    ),
)

#: pydantic-ai's own attributes on its GenAI spans (any version): a tool call or an output
#: that has to be made again, i.e. an error handed back to the model (``ModelRetry``, a
#: failed validation of a tool's arguments or of the output).
PYDANTIC_AI_RETRY = _table(
    PYDANTIC_AI,
    """
        tool_retry_cause      pydantic_ai.tool.retry.cause
        tool_retry_attempt    pydantic_ai.tool.retry.attempt
        tool_retry_max        pydantic_ai.tool.retry.max_retries
        output_retry_cause    pydantic_ai.output.retry.cause
        output_retry_attempt  pydantic_ai.output.retry.attempt
        output_retry_max      pydantic_ai.output.retry.max_retries
        failure_stage         pydantic_ai.tool.failure_stage
    """,
)

#: An HTTP server's span (any language's HTTP instrumentation): the request's terminal.
HTTP_SERVER = Family(
    convention="http",
    source=HTTP_SPEC,
    markers=("http.request.method", "http.method"),
    kind_key=None,
    kinds=MappingProxyType({}),
    attrs=_COMMON,
)

#: The families, in the order a span is tried: the specific markers first, the GenAI
#: conventions (which the others partly reuse) after, names last.
FAMILIES: tuple[Family, ...] = (OPENINFERENCE, OPENLLMETRY, GENAI, PYDANTIC_AI_V2)

#: Every attribute key any table reads: the allow-list (tests check nothing else is taken).
ALLOWED_KEYS: frozenset[str] = frozenset(a.key for f in (*FAMILIES, HTTP_SERVER) for a in f.attrs) | frozenset(
    a.key for a in PYDANTIC_AI_RETRY
)

#: Every attribute key ``read_span`` may look at (the allow-list, the markers and the keys
#: that say what a span is): a reader of files converts these and leaves the rest alone.
READ_KEYS: frozenset[str] = ALLOWED_KEYS | frozenset(
    k for f in (*FAMILIES, HTTP_SERVER) for k in (*f.markers, *((f.kind_key,) if f.kind_key else ()))
)

#: Exception event attributes (the general conventions; OpenInference reserves the same).
EXCEPTION_EVENT = "exception"
EXCEPTION_TYPE = "exception.type"
EXCEPTION_MESSAGE = "exception.message"
EXCEPTION_STACKTRACE = "exception.stacktrace"
