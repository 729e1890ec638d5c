"""Anthropic Messages: ``content_block_*`` events ending with ``message_stop``,
``tool_use`` blocks asked, ``tool_result`` blocks (with ``is_error``) answered."""

from __future__ import annotations

from typing import Any

from cvdiag.write.dialects._base import (
    Dialect,
    StreamFacts,
    ToolResult,
    as_int,
    as_str,
    dicts,
    dumped,
    dumped_len,
    get,
    int_re,
    mapping,
    strings,
    word_re,
)

__all__ = ["DIALECTS"]

_STREAM = StreamFacts(
    output=strings("text", "partial_json", "thinking"),
    finish=word_re("stop_reason"),
    finish_key=b'"stop_reason"',
    finish_null=b'"stop_reason":null',
    prompt_tokens=int_re("input_tokens"),
    completion_tokens=int_re("output_tokens"),
    usage_key=b"_tokens",
    terminals=((b"event: message_stop", None), (b'"type":"message_stop"', None)),
)


def _read_json(r: Any, body: Any) -> None:
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


def _tool_event(t: Any, event: dict) -> None:
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


def _tool_body(t: Any, body: dict) -> None:
    for n, block in enumerate(dicts(body.get("content"))):
        if block.get("type") == "tool_use":
            asked = t.ask(n, block.get("id"), block.get("name"))
            if asked is not None:
                asked.add_args(dumped(block.get("input") or {}), whole=True)
        elif block.get("type") == "text":
            t.said(block.get("text"))


def _tool_results(element: dict, out: list[ToolResult]) -> None:
    for block in dicts(element.get("content")):
        if block.get("type") == "tool_result":
            out.append(
                ToolResult(block.get("tool_use_id"), None, block.get("content"), is_error=block.get("is_error") is True)
            )


def _assistant_turn(element: dict) -> bool:
    return element.get("role") == "assistant"


DIALECTS = (
    Dialect(
        api="messages",
        family="anthropic",
        stream=_STREAM,
        path_suffixes=("/v1/messages",),
        hosts=(("api.anthropic.com", "anthropic"),),
        read_json=_read_json,
        tool_markers=(b'"tool_use"', b'"input_json_delta"'),
        tool_event=_tool_event,
        tool_body=_tool_body,
        tool_array=b"messages",
        tool_results=_tool_results,
        turn_boundary=_assistant_turn,
    ),
)
