"""Structured output: did a request ask for a schema, and did the answer hold it?

A request asks for structured output with Chat Completions ``response_format``
(``json_schema`` or ``json_object``), Responses ``text.format``, Anthropic
``output_format`` / ``output_config.format``, Gemini ``generationConfig``
(``responseSchema``, ``responseJsonSchema`` or ``responseMimeType: application/json``),
or a framework's final-result tool (pydantic-ai's ``final_result``). ``requested`` finds
that with bounded byte searches and parses only the schema object itself. ``Schema.check``
says whether the answer's text (or the final-result tool's arguments) parsed as a JSON
object holding the schema's required top-level keys; None when it was not checked
(too long, or nothing to check).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

__all__ = ["ANSWER_CAP", "SCAN_MAX", "Schema", "requested"]

#: A request body is searched for a schema only up to this size.
SCAN_MAX = 1 << 20
#: An answer is checked only when its text is at most this long.
ANSWER_CAP = 1 << 16
#: A schema object is parsed only when it is at most this long.
_SCHEMA_MAX = 1 << 16
_DECODER = json.JSONDecoder()

# Markers of a schema, each followed (within _NEAR bytes) by the object to parse.
_NEAR = 4096
_JSON_SCHEMA = re.compile(rb'"type"\s*:\s*"json_schema"')
_SCHEMA_OBJECT = re.compile(rb'"schema"\s*:\s*\{')
_JSON_OBJECT = re.compile(rb'"response_format"\s*:\s*\{\s*"type"\s*:\s*"json_object"')
_GEMINI_SCHEMA = re.compile(rb'"(?:responseSchema|responseJsonSchema|response_schema|response_json_schema)"\s*:\s*\{')
_GEMINI_JSON = re.compile(rb'"(?:responseMimeType|response_mime_type)"\s*:\s*"application/json"')
_FINAL_TOOL = re.compile(rb'"name"\s*:\s*"(final_result[A-Za-z0-9_]{0,64})"')
_TOOL_PARAMS = re.compile(rb'"(?:parameters|input_schema|parametersJsonSchema|parameters_json_schema)"\s*:\s*\{')


@dataclass(frozen=True, slots=True)
class Schema:
    """What a request asked the answer to hold."""

    #: The schema's required top-level keys (empty: any JSON object will do).
    required: tuple[str, ...] = ()
    #: The final-result tool whose arguments are the answer, when the schema came as a tool.
    tool: str | None = None

    def check(self, text: str | None, tool_args: dict[str, str]) -> bool | None:
        """True/False for an answer that was checked; None when there was nothing to check."""
        if self.tool is not None and self.tool in tool_args:
            text = tool_args[self.tool]
        if text is None or not text.strip() or len(text) > ANSWER_CAP:
            return None
        try:
            value = json.loads(_unfenced(text))
        except (ValueError, RecursionError):
            return False
        return isinstance(value, dict) and all(key in value for key in self.required)


def _unfenced(text: str) -> str:
    """The JSON inside a Markdown code fence, as models often wrap it."""
    stripped = text.strip()
    if stripped.startswith("```"):
        stripped = stripped.split("\n", 1)[-1].rsplit("```", 1)[0]
    return stripped


def _object_at(body: bytes, at: int) -> Any:
    """The JSON object starting at ``at`` (a ``{``), parsed on its own; None if unreadable."""
    window = body[at : at + _SCHEMA_MAX]
    try:
        value, _ = _DECODER.raw_decode(window.decode("utf-8", "replace"))
    except (ValueError, RecursionError):
        return None
    return value


def _required(schema: Any) -> tuple[str, ...]:
    if not isinstance(schema, dict):
        return ()
    required = schema.get("required")
    if isinstance(required, list):
        return tuple(k for k in required if isinstance(k, str))[:64]
    return ()


def requested(body: bytes | None) -> Schema | None:
    """The structured output a request body asks for, or None. Never raises."""
    if not body or len(body) > SCAN_MAX:
        return None
    try:
        return _requested(body)
    except Exception:
        return None


def _requested(body: bytes) -> Schema | None:
    if b"json_schema" in body:
        marker = _JSON_SCHEMA.search(body)
        if marker is not None:
            inner = _SCHEMA_OBJECT.search(body, marker.end(), marker.end() + _NEAR)
            found = _object_at(body, inner.end() - 1) if inner is not None else None
            return Schema(_required(found))
    if b"esponse" in body:  # responseSchema, response_schema, response_format, responseMimeType
        gemini = _GEMINI_SCHEMA.search(body)
        if gemini is not None:
            return Schema(_required(_object_at(body, gemini.end() - 1)))
        if _GEMINI_JSON.search(body) or _JSON_OBJECT.search(body):
            return Schema()
    if b"final_result" in body:
        tool = _FINAL_TOOL.search(body, max(0, body.rfind(b'"tools"')))
        if tool is not None:
            params = _TOOL_PARAMS.search(body, tool.end(), tool.end() + _NEAR)
            found = _object_at(body, params.end() - 1) if params is not None else None
            return Schema(_required(found), tool=tool.group(1).decode("ascii"))
    return None
