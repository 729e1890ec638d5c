"""Gemini ``generateContent`` / ``streamGenerateContent`` (google-genai, Vertex AI).

The path names the model and whether it streams; a stream has no terminal event of its
own (a finish reason ends it); tool calls are ``functionCall`` parts whose arguments are
objects, answered by ``functionResponse`` parts, paired by name in order (no call id).
"""

from __future__ import annotations

import re
from typing import Any

from cvdiag.write.dialects._base import ToolResult, role_turn, stream_facts
from cvdiag.write.dialects._json import as_int, as_str, dicts, dumped, dumped_len, get, mapping

__all__ = ["API", "path_route", "read_json", "tool_event", "tool_results"]

API = "generate_content"
FAMILY = "gemini"
HOSTS = (("generativelanguage.googleapis.com", "gemini"), ("aiplatform.googleapis.com", "vertex-ai"))
#: The path names the model and whether it streams (``path_route``), after a cheap marker.
PATH_MARKER = ":"
_PATH = re.compile(r"/models/([^/:]{1,128}):(generateContent|streamGenerateContent)$")


def path_route(path: str) -> tuple[str, bool] | None:
    found = _PATH.search(path)
    return (found.group(1), found.group(2).startswith("s")) if found is not None else None


def call_chars(event: Any) -> int:
    """Characters of the arguments of the ``functionCall`` parts of one answer object."""
    chars = 0
    for candidate in dicts(get(event, "candidates")):
        for part in dicts(get(candidate, "content", "parts")):
            if "functionCall" in part:
                chars += dumped_len(get(part, "functionCall", "args") or {})
    return chars


STREAM = stream_facts(
    ("text",), "finishReason", ("promptTokenCount", "candidatesTokenCount"), b"TokenCount",
    finish_ends=True, object_calls=b'"functionCall"', object_call_chars=call_chars,
)  # fmt: skip


def read_json(r: Any, body: Any) -> None:
    # A non-SSE streamGenerateContent answers a JSON array of the same objects.
    chars = 0
    for event in body if isinstance(body, list) else [body]:
        for candidate in dicts(get(event, "candidates")):
            for part in dicts(get(candidate, "content", "parts")):
                chars += len(part.get("text") or "") if isinstance(part.get("text"), str) else 0
            r.finish_reason = as_str(candidate.get("finishReason")) or r.finish_reason
        chars += call_chars(event)
        r.prompt_tokens = as_int(get(event, "usageMetadata", "promptTokenCount")) or r.prompt_tokens
        r.completion_tokens = as_int(get(event, "usageMetadata", "candidatesTokenCount")) or r.completion_tokens
    r.output_chars = chars


TOOL_MARKERS = (b'"functionCall"',)


def tool_event(t: Any, event: dict) -> None:
    for candidate in dicts(event.get("candidates")):
        for part in dicts(mapping(candidate.get("content")).get("parts")):
            call = part.get("functionCall")
            if isinstance(call, dict):
                asked = t.ask(("gemini", t.count()), call.get("id"), call.get("name"))
                if asked is not None:
                    asked.add_args(dumped(call.get("args") or {}), whole=True)
            elif not part.get("thought"):
                t.said(part.get("text"))


#: A JSON body holds the same objects as the events.
tool_body = tool_event
TOOL_ARRAY = b"contents"
turn_boundary = role_turn("model")


def tool_results(element: dict, out: list[ToolResult]) -> None:
    for part in dicts(element.get("parts")):
        response = part.get("functionResponse")
        if not isinstance(response, dict):
            continue
        body = mapping(response.get("response"))
        result = ToolResult(response.get("id"), response.get("name"), body)
        if body.get("error") is not None and result.error_kind is None:
            result.failed_as("reported", body["error"])  # google-genai: "error" holds a failure
        out.append(result)
