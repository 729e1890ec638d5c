"""What an exception recorded on a span says: a framework's own limit, an output that did
not validate, a cancellation, or a fault of the app's own HTTP client.

Tables by exception class and message, each entry naming the framework source it came
from. A class is matched by its short name (``pydantic_ai.exceptions.UsageLimitExceeded``
is ``UsageLimitExceeded``); a message pattern alone is enough where the wording is the
framework's own (``Max iterations of 4 reached!`` is raised as several classes).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

#: How much of a message or stack trace is searched: a 10 MB message costs no more.
SEARCH_CHARS = 4096


@dataclass(frozen=True, slots=True)
class Limit:
    """A framework's own limit on an agent's run, as its exception names it."""

    classes: frozenset[str]
    pattern: re.Pattern[str]  # group "value", and group "name" where the message names the limit
    name: str  # the limit's name when the message does not say it
    source: str
    message_alone: bool  # the wording is the framework's own: it names the limit under any class


def _limit(classes: str, pattern: str, name: str, source: str, message_alone: bool = True) -> Limit:
    return Limit(frozenset(classes.split()), re.compile(pattern), name, source, message_alone)


LIMITS: tuple[Limit, ...] = (
    _limit(
        "MaxTurnsExceeded",
        r"Max turns \((?P<value>\d+)\) exceeded|Max turns exceeded: \{'max_turns': (?P<value2>\d+)\}",
        "max_turns",
        "openai-agents agents/run.py: MaxTurnsExceeded(f'Max turns ({max_turns}) exceeded'); its span's"
        " SpanError('Max turns exceeded', data={'max_turns': n}) as openinference-instrumentation-openai-agents"
        " writes it",
    ),
    _limit(
        "UsageLimitExceeded",
        r"(?P<name>\w+_limit)`? of `?(?P<value>[\d.]+)",
        "usage_limit",
        "pydantic-ai pydantic_ai/usage.py: 'The next request would exceed the request_limit of {n}'",
        message_alone=False,
    ),
    _limit(
        "GraphRecursionError",
        r"Recursion limit of (?P<value>\d+) reached",
        "recursion_limit",
        "langgraph langgraph/pregel/main.py: GraphRecursionError('Recursion limit of {n} reached ...')",
    ),
    _limit(
        "WorkflowRuntimeError",
        r"Max iterations of (?P<value>\d+) reached",
        "max_iterations",
        "llama-index AgentWorkflow: 'Max iterations of {n} reached! ...'",
    ),
    _limit(
        "LlmCallsLimitExceededError",
        r"limit of `?(?P<value>\d+)`? exceeded",
        "max_llm_calls",
        "google-adk agents/invocation_context.py: 'Max number of llm calls limit of `{n}` exceeded'",
        message_alone=False,
    ),
    _limit(
        "AgentMaxStepsError",
        r"Reached max steps(?: \((?P<value>\d+)\))?",
        "max_steps",
        "smolagents agents.py: AgentMaxStepsError('Reached max steps.')",
    ),
)

#: Exceptions that say an agent's structured output failed its schema.
OUTPUT_CLASSES: frozenset[str] = frozenset(
    {
        "ValidationError",  # pydantic: LangGraph with_structured_output, instructor, any app
        "OutputParserException",  # langchain_core.exceptions
        "StructuredOutputException",  # langchain agents' response_format
        "InstructorRetryException",  # instructor, after its retries
        "OutputValidationError",
    }
)
#: ... and messages that say so whatever the class (pydantic-ai's output retries ran out:
#: pydantic_ai/_agent_graph.py 'Exceeded maximum output retries ({n})', older
#: 'Exceeded maximum retries ({n}) for output validation' / 'for result validation';
#: openai-agents agents/agent_output.py ModelBehaviorError 'Invalid JSON when parsing ...').
OUTPUT_MESSAGE = re.compile(
    r"Exceeded maximum (?:output )?retries \((?P<retries>\d+)\)(?: for (?:output|result) validation)?\Z"
    r"|Exceeded maximum (?:output )?retries \((?P<retries2>\d+)\)"
    r"|Invalid JSON when parsing"
    r"|validation errors? for (?P<schema>[A-Za-z_][\w.]*)"
)
#: pydantic's first error line, ``n\n  Input should be ... [type=int_parsing, input_value='zz',
#: input_type=str]``: the model's own text (input_value) is dropped, the rest kept.
_INPUT_VALUE = re.compile(r",\s*input_value=.*?,\s*input_type=\w+", re.S)
_SCHEMA = re.compile(r"\d+ validation errors? for (?P<schema>[A-Za-z_][\w.]*)")
_PYDANTIC_ERROR = re.compile(r"\n(?P<loc>[^\n]+)\n\s+(?P<msg>[^\n]+)")

#: Exceptions that mean the call was cancelled or timed out, not that it failed.
CANCELLED_CLASSES: frozenset[str] = frozenset({"CancelledError", "KeyboardInterrupt", "GeneratorExit"})
TIMEOUT_CLASSES: frozenset[str] = frozenset(
    {"TimeoutError", "ReadTimeout", "ConnectTimeout", "WriteTimeout", "APITimeoutError", "ServerTimeoutError"}
)

#: The app's own HTTP client failing locally, before or instead of the provider answering:
#: not the provider's fault. Matched in the message and in the chained exceptions of the
#: stack trace (openai and anthropic wrap them as ``APIConnectionError``).
LOCAL_CLIENT_FAULTS: tuple[tuple[str, re.Pattern[str], str], ...] = (
    ("RuntimeError", re.compile(r"Event loop is closed"), "asyncio: a client used after its event loop closed"),
    (
        "RuntimeError",
        re.compile(r"attached to a different (?:event )?loop|bound to a different event loop"),
        "asyncio: a client shared across event loops",
    ),
    (
        "RuntimeError",
        re.compile(r"Cannot send a request, as the client has been closed"),
        "httpx _client.py: a closed AsyncClient reused",
    ),
    ("RuntimeError", re.compile(r"Session is closed"), "aiohttp client.py: a closed ClientSession reused"),
    ("PoolTimeout", re.compile(r"PoolTimeout"), "httpx: the app's connection pool was exhausted"),
)


#: The classes those faults raise: an LLM call that failed with one of them and no HTTP
#: status never reached the provider.
LOCAL_CLIENT_CLASSES: frozenset[str] = frozenset(cls for cls, _, _ in LOCAL_CLIENT_FAULTS)


def short_class(name: str | None) -> str | None:
    """``pydantic_ai.exceptions.UsageLimitExceeded`` -> ``UsageLimitExceeded``."""
    if not name:
        return None
    return name.rpartition(".")[2].rpartition(":")[2][:64] or None


def framework_limit(error_class: str | None, message: str | None) -> tuple[str, int | float | None] | None:
    """The framework's own limit (its name and value) that ``error_class: message`` reports."""
    text = (message or "")[:SEARCH_CHARS]
    for limit in LIMITS:
        m = limit.pattern.search(text)
        if error_class in limit.classes or (m is not None and limit.message_alone):
            if m is None:
                return limit.name, None
            found = m.groupdict()
            return found.get("name") or limit.name, _number(found.get("value") or found.get("value2"))
    return None


def _number(text: str | None) -> int | float | None:
    if not text:
        return None
    try:
        return int(text)
    except ValueError:
        try:
            return float(text)
        except ValueError:
            return None


@dataclass(frozen=True, slots=True)
class OutputFailure:
    """An output that failed its schema: what the exception says of it."""

    schema_name: str | None
    attempts: int | None
    excerpt: str | None


def output_failure(error_class: str | None, message: str | None) -> OutputFailure | None:
    """The failed output check that ``error_class: message`` reports, or None."""
    text = (message or "")[:SEARCH_CHARS]
    m = OUTPUT_MESSAGE.search(text)
    if error_class not in OUTPUT_CLASSES and m is None:
        return None
    retries = m and (m.group("retries") or m.group("retries2"))
    schema = _SCHEMA.search(text)
    return OutputFailure(
        schema_name=schema.group("schema") if schema else None,
        attempts=int(retries) + 1 if retries else None,
        excerpt=validator_error(text),
    )


def validator_error(text: str) -> str | None:
    """The validator's first error without the model's text: ``n: Input should be a valid integer
    [type=int_parsing]``; else the message's first line."""
    first = _PYDANTIC_ERROR.search(text)
    if first is not None and _SCHEMA.match(text):
        return f"{first.group('loc').strip()}: {_INPUT_VALUE.sub('', first.group('msg').strip())}"
    line = text.strip().split("\n", 1)[0]
    return _INPUT_VALUE.sub("", line) or None


def local_client_fault(message: str | None, stacktrace: str | None) -> str | None:
    """The class of a local fault of the app's own HTTP client behind an LLM call's exception."""
    for text in ((message or "")[:SEARCH_CHARS], (stacktrace or "")[-SEARCH_CHARS:]):
        for cls, pattern, _ in LOCAL_CLIENT_FAULTS:
            if text and pattern.search(text):
                return cls
    return None
