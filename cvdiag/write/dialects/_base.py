"""What every provider dialect declares, and the small JSON helpers they share.

A ``Dialect`` is pure data and functions over parsed JSON: the routes that name the
format, the markers of its event stream, how a JSON answer says its facts, the tool calls
an answer asks for and the results a request carries. The machinery that reads bytes as
they pass (``_llm_stream.AnswerReader``, ``_tool_wire.AnswerTools``) hands each dialect
function a reader to set facts on; no dialect imports an HTTP client or an SDK.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from types import ModuleType
from typing import Any

from cvdiag.write._tool_failures import HEAD_CHARS, is_failure
from cvdiag.write.dialects._json import clip, dicts, dumped

__all__ = [
    "Dialect",
    "OutputKey",
    "StreamFacts",
    "ToolResult",
    "int_re",
    "role_turn",
    "stream_facts",
    "strings",
    "word_re",
]

# A JSON string value: group 1 is its body (escapes kept).
_STRING = rb'\s*:\s*"([^"\\]*(?:\\.[^"\\]*)*)"'


# -- what a dialect declares --------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class OutputKey:
    """A key whose string values are output: the key, the two forms its string values take
    (``"key":"`` from OpenAI and Anthropic, ``"key": "`` from Gemini), and the pattern that
    reads it in any form."""

    key: bytes
    forms: tuple[bytes, bytes]
    pattern: re.Pattern[bytes]


def strings(*keys: str) -> tuple[OutputKey, ...]:
    """The ``OutputKey`` of each of ``keys``."""
    found = []
    for k in keys:
        key = b'"' + k.encode() + b'"'
        found.append(OutputKey(key, (key + b':"', key + b': "'), re.compile(re.escape(key) + _STRING)))
    return tuple(found)


def int_re(key: str) -> re.Pattern[bytes]:
    return re.compile(rb'"' + key.encode() + rb'"\s*:\s*(\d+)')


def word_re(key: str) -> re.Pattern[bytes]:
    return re.compile(rb'"' + key.encode() + rb'"\s*:\s*"([A-Za-z0-9_.:-]{1,64})"')


@dataclass(frozen=True, slots=True)
class StreamFacts:
    """How one provider's event stream says what ``AnswerReader`` records."""

    output: tuple[OutputKey, ...]  # keys of the strings of generated text and tool-call arguments
    finish: re.Pattern[bytes] | None
    finish_key: bytes
    #: The finish key with no reason yet (every chat event has one): no regex needed.
    finish_null: bytes
    prompt_tokens: re.Pattern[bytes]
    completion_tokens: re.Pattern[bytes]
    usage_key: bytes
    #: (marker, finish reason it implies or None): any of them ends the stream cleanly.
    terminals: tuple[tuple[bytes, str | None], ...]
    #: The stream has no terminal event of its own: a finish reason ends it (Gemini).
    finish_ends: bool = False
    #: Tool calls whose arguments are objects, not strings: parse their events (Gemini).
    object_calls: bytes | None = None
    #: Characters of the arguments of those tool calls in one parsed event.
    object_call_chars: Callable[[Any], int] | None = None
    #: The finish reason of an incomplete answer, read from the terminal event (Responses).
    incomplete_reason: re.Pattern[bytes] | None = None


def stream_facts(
    output: tuple[str, ...],
    finish: str | None,
    tokens: tuple[str, str] = ("input_tokens", "output_tokens"),
    usage_key: bytes = b"_tokens",
    terminals: tuple[tuple[bytes, str | None], ...] = (),
    **more: Any,
) -> StreamFacts:
    """The ``StreamFacts`` of a stream whose text is in ``output`` keys, whose finish reason
    is the ``finish`` key and whose usage is the ``tokens`` (prompt, completion) keys."""
    key = b'"' + finish.encode() + b'"' if finish else b""
    return StreamFacts(
        strings(*output), word_re(finish) if finish else None, key, key + b":null" if finish else b"",
        int_re(tokens[0]), int_re(tokens[1]), usage_key, terminals, **more,
    )  # fmt: skip


#: ``read(reader, parsed)``: sets facts on an ``AnswerReader`` or an ``AnswerTools``.
Read = Callable[[Any, Any], None]


@dataclass(frozen=True, slots=True)
class Dialect:
    """One wire format (the ``api`` metadata value) and everything cvdiag reads of it."""

    #: The ``api`` value written on the lines of a call in this format.
    api: str
    #: The provider family an unknown host is named after (``<family>-compatible``).
    family: str
    #: How its answers stream (None: read as chat completions would be).
    stream: StreamFacts | None = None
    #: Path suffixes that name this format on any host (most specific wins).
    path_suffixes: tuple[str, ...] = ()
    #: A format whose path names the model: a cheap marker, then ``path_route`` -> (model, stream).
    path_marker: str | None = None
    path_route: Callable[[str], tuple[str, bool] | None] | None = None
    #: Host suffix -> provider name, for the hosts that speak this format.
    hosts: tuple[tuple[str, str], ...] = ()
    #: Facts of a whole JSON answer (``read(AnswerReader, body)``).
    read_json: Read | None = None
    #: Tool calls asked: markers worth a parse, one stream event, one JSON answer (``AnswerTools``).
    tool_markers: tuple[bytes, ...] = ()
    tool_event: Read | None = None
    tool_body: Read | None = None
    #: Tool results answered: the request's growing array, its elements' results, its turns.
    tool_array: bytes | None = None
    tool_results: Callable[[dict, list[ToolResult]], None] | None = None
    turn_boundary: Callable[[dict], bool] | None = None

    @classmethod
    def of(cls, module: ModuleType) -> Dialect:
        """The dialect a module declares: ``API``, ``FAMILY`` and ``STREAM`` always; the
        rest (``PATH_SUFFIXES``, ``HOSTS``, ``read_json``, ``tool_event``...) when it has them."""
        found = {name: getattr(module, name.upper(), None) for name in _DECLARED}
        found.update((name, getattr(module, name, None)) for name in _FUNCTIONS)
        return cls(**{name: value for name, value in found.items() if value is not None})


#: What a dialect module declares: constants (upper case) and functions.
_DECLARED = ("api", "family", "stream", "path_suffixes", "path_marker", "hosts", "tool_markers", "tool_array")
_FUNCTIONS = ("path_route", "read_json", "tool_event", "tool_body", "tool_results", "turn_boundary")


# -- tool results ---------------------------------------------------------------------------


class ToolResult:
    """A tool result found in a request: whose it is, how big, and whether it failed."""

    __slots__ = ("call_id", "error_kind", "excerpt", "name", "result_chars")

    def __init__(self, call_id: Any, name: Any, content: Any, *, is_error: bool = False) -> None:
        self.call_id = call_id if isinstance(call_id, str) and call_id else None
        self.name = clip(name)
        text = _content_text(content)
        self.result_chars = len(text)
        self.error_kind: str | None = None
        self.excerpt: str | None = None
        failure = is_failure(text)
        if failure is not None:
            self.error_kind = failure.kind
        elif is_error:  # the format's own flag on an error the app handed back (Anthropic is_error)
            self.error_kind = "reported"
        if self.error_kind is not None:
            self.excerpt = text[:HEAD_CHARS].strip()

    def failed_as(self, kind: str, excerpt: Any) -> None:
        self.error_kind = kind
        self.excerpt = dumped(excerpt)[:HEAD_CHARS].strip()


def _content_text(content: Any) -> str:
    """The text of a result: a string, text parts joined, or the JSON of anything else."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        texts = [p.get("text") for p in dicts(content) if isinstance(p.get("text"), str)]
        if texts:
            return "\n".join(texts)
    if content is None:
        return ""
    return dumped(content)


def role_turn(role: str) -> Callable[[dict], bool]:
    """A ``turn_boundary``: an element of this role starts a new turn."""

    def starts_turn(element: dict) -> bool:
        return element.get("role") == role

    return starts_turn
