"""Anthropic Messages: ``content_block_*`` events ending with ``message_stop``,
``tool_use`` blocks asked, ``tool_result`` blocks (with ``is_error``) answered."""

from __future__ import annotations

from typing import Any

from cvdiag.write.dialects._base import ToolResult, role_turn, stream_facts
from cvdiag.write.dialects._json import as_int, as_str, dicts, dumped, dumped_len, get, mapping

__all__ = ["API", "read_json", "tool_event", "tool_results"]

API = "messages"
FAMILY = "anthropic"
PATH_SUFFIXES = ("/v1/messages",)
HOSTS = (("api.anthropic.com", "anthropic"),)
STREAM = stream_facts(
    ("text", "partial_json", "thinking"),
    "stop_reason",
    terminals=((b"event: message_stop", None), (b'"type":"message_stop"', None)),
)


def read_json(r: Any, body: Any) -> None:
    chars = 0
    for block in dicts(get(body, "content")):
        if block.get("type") == "tool_use":
            chars += dumped_len(block.get("input"))
        else:
            chars += len(block.get("text") or "")
    r.output_chars = chars
    r.finish_reason = as_str(get(body, "stop_reason"))
    r.prompt_tokens = as_int(get(body, "usage", "input_tokens"))
    r.completion_tokens = as_int(get(body, "usage", "output_tokens"))


#: Answer markers worth a parse for tool calls.
TOOL_MARKERS = (b'"tool_use"', b'"input_json_delta"')


def tool_event(t: Any, event: dict) -> None:
    kind = event.get("type")
    if kind == "content_block_start":
        block = mapping(event.get("content_block"))
        if block.get("type") == "tool_use":  # not server_tool_use: Anthropic runs those itself
            asked = t.ask(event.get("index"), block.get("id"), block.get("name"))
            if asked is not None and block.get("input"):
                asked.add_args(dumped(block["input"]), whole=True)
    elif kind == "content_block_delta":
        delta = mapping(event.get("delta"))
        if delta.get("type") == "input_json_delta":
            asked = t.asked_under(event.get("index"))
            if asked is not None and isinstance(delta.get("partial_json"), str):
                asked.add_args(delta["partial_json"])
        elif delta.get("type") == "text_delta":
            t.said(delta.get("text"))


def tool_body(t: Any, body: dict) -> None:
    for n, block in enumerate(dicts(body.get("content"))):
        if block.get("type") == "tool_use":
            asked = t.ask(n, block.get("id"), block.get("name"))
            if asked is not None:
                asked.add_args(dumped(block.get("input") or {}), whole=True)
        elif block.get("type") == "text":
            t.said(block.get("text"))


#: The request body's growing array, and the element that starts a new turn.
TOOL_ARRAY = b"messages"
turn_boundary = role_turn("assistant")


def tool_results(element: dict, out: list[ToolResult]) -> None:
    for block in dicts(element.get("content")):
        if block.get("type") == "tool_result":
            out.append(
                ToolResult(block.get("tool_use_id"), None, block.get("content"), is_error=block.get("is_error") is True)
            )
