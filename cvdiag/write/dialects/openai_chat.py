"""OpenAI Chat Completions, and its older siblings Completions and Embeddings.

Spoken by OpenAI and every OpenAI-compatible server (Azure, OpenRouter, Groq, vLLM,
Ollama, LiteLLM...). Streams end with ``data: [DONE]``; an answer asks for tools in
``tool_calls`` (or the legacy ``function_call``); a request answers them with
``role: tool`` (or ``role: function``) messages.
"""

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

#: Hosts that speak the OpenAI formats (Chat Completions and Responses alike).
HOSTS: tuple[tuple[str, str], ...] = (
    ("api.openai.com", "openai"),
    (".openai.azure.com", "azure-openai"),
    (".services.ai.azure.com", "azure-ai"),
    ("openrouter.ai", "openrouter"),
    ("api.groq.com", "groq"),
    ("api.together.xyz", "together"),
    ("api.together.ai", "together"),
    ("api.fireworks.ai", "fireworks"),
    ("api.mistral.ai", "mistral"),
    ("api.deepseek.com", "deepseek"),
    ("api.x.ai", "xai"),
    ("api.perplexity.ai", "perplexity"),
)


def _stream(*output: str) -> StreamFacts:
    return StreamFacts(
        output=strings(*output),
        finish=word_re("finish_reason"),
        finish_key=b'"finish_reason"',
        finish_null=b'"finish_reason":null',
        prompt_tokens=int_re("prompt_tokens"),
        completion_tokens=int_re("completion_tokens"),
        usage_key=b"_tokens",
        terminals=((b"data: [DONE]", None), (b"data:[DONE]", None)),
    )


_CHAT_STREAM = _stream("content", "arguments", "refusal")


def _usage(r: Any, body: Any) -> None:
    r.prompt_tokens = as_int(get(body, "usage", "prompt_tokens"))
    r.completion_tokens = as_int(get(body, "usage", "completion_tokens"))


def _chat_json(r: Any, body: Any) -> None:
    chars = 0
    for choice in dicts(get(body, "choices")):
        message = choice.get("message") or {}
        if isinstance(message, dict):
            chars += len(message.get("content") or "") + len(message.get("refusal") or "")
            for call in dicts(message.get("tool_calls")):
                chars += dumped_len(get(call, "function", "arguments") or "")
        r.finish_reason = as_str(choice.get("finish_reason")) or r.finish_reason
    r.output_chars = chars
    _usage(r, body)


def _completions_json(r: Any, body: Any) -> None:
    chars = 0
    for choice in dicts(get(body, "choices")):
        chars += len(choice.get("text") or "")
        r.finish_reason = as_str(choice.get("finish_reason")) or r.finish_reason
    r.output_chars = chars
    _usage(r, body)


def _embeddings_json(r: Any, body: Any) -> None:
    r.prompt_tokens = as_int(get(body, "usage", "prompt_tokens"))


def _tool_event(t: Any, event: dict) -> None:
    for choice in dicts(event.get("choices")):
        delta = mapping(choice.get("delta"))
        t.said(delta.get("content"))
        index = choice.get("index", 0)
        for call in dicts(delta.get("tool_calls")):
            function = mapping(call.get("function"))
            asked = t.ask((index, call.get("index", 0)), call.get("id"), function.get("name"))
            if asked is not None:
                piece = function.get("arguments")
                asked.add_args(piece if isinstance(piece, str) else "")
        legacy = mapping(delta.get("function_call"))
        if legacy:
            asked = t.ask((index, "function_call"), None, legacy.get("name"))
            if asked is not None and isinstance(legacy.get("arguments"), str):
                asked.add_args(legacy["arguments"])


def _tool_body(t: Any, body: dict) -> None:
    for choice in dicts(body.get("choices")):
        message = mapping(choice.get("message"))
        t.said(message.get("content"))
        for n, call in enumerate(dicts(message.get("tool_calls"))):
            function = mapping(call.get("function"))
            asked = t.ask((choice.get("index", 0), n), call.get("id"), function.get("name"))
            if asked is not None:
                asked.add_args(dumped(function.get("arguments") or ""))
        legacy = mapping(message.get("function_call"))
        if legacy:
            asked = t.ask((choice.get("index", 0), "function_call"), None, legacy.get("name"))
            if asked is not None:
                asked.add_args(dumped(legacy.get("arguments") or ""))


def _tool_results(element: dict, out: list[ToolResult]) -> None:
    role = element.get("role")
    if role == "tool":
        out.append(ToolResult(element.get("tool_call_id"), element.get("name"), element.get("content")))
    elif role == "function":
        out.append(ToolResult(None, element.get("name"), element.get("content")))


def _assistant_turn(element: dict) -> bool:
    return element.get("role") == "assistant"


DIALECTS = (
    Dialect(
        api="chat.completions",
        family="openai",
        stream=_CHAT_STREAM,
        path_suffixes=("/chat/completions",),
        hosts=HOSTS,
        read_json=_chat_json,
        tool_markers=(b'"tool_calls"', b'"function_call"'),
        tool_event=_tool_event,
        tool_body=_tool_body,
        tool_array=b"messages",
        tool_results=_tool_results,
        turn_boundary=_assistant_turn,
    ),
    Dialect(
        api="completions",
        family="openai",
        stream=_stream("text"),
        path_suffixes=("/completions",),
        read_json=_completions_json,
    ),
    # Embeddings never stream; an event stream there is read as chat would be.
    Dialect(
        api="embeddings",
        family="openai",
        stream=_CHAT_STREAM,
        path_suffixes=("/embeddings",),
        read_json=_embeddings_json,
    ),
)
