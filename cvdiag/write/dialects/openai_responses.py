"""OpenAI Responses: typed events (``response.output_text.delta``...), ``function_call``
output items asked, ``function_call_output`` input items answered."""

from __future__ import annotations

from typing import Any

from cvdiag.write.dialects._base import ToolResult, stream_facts, word_re
from cvdiag.write.dialects._json import as_int, as_str, dicts, dumped, dumped_len, get, mapping

__all__ = ["API", "read_json", "tool_event", "tool_results"]

API = "responses"
FAMILY = "openai"
PATH_SUFFIXES = ("/responses",)
_TERMINALS = (
    (b"response.completed", "completed"),
    (b"response.incomplete", "incomplete"),
    (b"response.failed", "failed"),
)
STREAM = stream_facts(("delta",), None, terminals=_TERMINALS, incomplete_reason=word_re("reason"))


def read_json(r: Any, body: Any) -> None:
    chars = 0
    for item in dicts(get(body, "output")):
        if item.get("type") == "function_call":
            chars += dumped_len(item.get("arguments") or "")
        for part in dicts(item.get("content")):
            chars += len(part.get("text") or "") + len(part.get("refusal") or "")
    r.output_chars = chars
    status = as_str(get(body, "status"))
    r.finish_reason = as_str(get(body, "incomplete_details", "reason")) if status == "incomplete" else status
    r.prompt_tokens = as_int(get(body, "usage", "input_tokens"))
    r.completion_tokens = as_int(get(body, "usage", "output_tokens"))


def _item(t: Any, item: dict, *, whole: bool) -> None:
    kind = item.get("type")
    if kind == "function_call" or kind == "custom_tool_call":
        key = item.get("call_id") or item.get("id")
        asked = t.ask(key, item.get("call_id"), item.get("name"))
        if asked is not None:
            args = item.get("arguments") if kind == "function_call" else item.get("input")
            if whole or args:
                asked.add_args(dumped(args or ""), whole=True)
    elif whole and kind == "message":
        for part in dicts(item.get("content")):
            t.said(part.get("text"))


TOOL_MARKERS = (b'"function_call"',)


def tool_event(t: Any, event: dict) -> None:
    kind = event.get("type")
    if kind == "response.output_item.added":
        _item(t, mapping(event.get("item")), whole=False)
    elif kind == "response.output_item.done":
        item = mapping(event.get("item"))
        if item.get("type") != "message":  # message text comes from the deltas
            _item(t, item, whole=True)
    elif kind == "response.output_text.delta":
        t.said(event.get("delta"))
    elif kind in ("response.completed", "response.incomplete"):
        for item in dicts(mapping(event.get("response")).get("output")):
            if item.get("type") != "message" and not t.seen(item.get("call_id") or item.get("id")):
                _item(t, item, whole=True)


def tool_body(t: Any, body: dict) -> None:
    for item in dicts(body.get("output")):
        _item(t, item, whole=True)


TOOL_ARRAY = b"input"


def tool_results(element: dict, out: list[ToolResult]) -> None:
    if element.get("type") in ("function_call_output", "custom_tool_call_output"):
        out.append(ToolResult(element.get("call_id"), None, element.get("output")))


def turn_boundary(element: dict) -> bool:
    return element.get("type", "message") == "message"
