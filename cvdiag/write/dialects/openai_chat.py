"""OpenAI Chat Completions.

Spoken by OpenAI and every OpenAI-compatible server (Azure, OpenRouter, Groq, vLLM,
Ollama, LiteLLM...). Streams end with ``data: [DONE]``; an answer asks for tools in
``tool_calls`` (or the legacy ``function_call``); a request answers them with
``role: tool`` (or ``role: function``) messages.
"""

from __future__ import annotations

from typing import Any

from cvdiag.write.dialects._base import StreamFacts, ToolResult, role_turn, stream_facts
from cvdiag.write.dialects._json import as_int, as_str, dicts, dumped, dumped_len, get, mapping

__all__ = ["API", "HOSTS", "STREAM", "openai_stream", "read_json", "tool_event", "tool_results", "usage"]

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


def openai_stream(*output: str) -> StreamFacts:
    """The event stream of the OpenAI-style formats whose text is in the ``output`` keys."""
    tokens = ("prompt_tokens", "completion_tokens")
    return stream_facts(output, "finish_reason", tokens, terminals=((b"data: [DONE]", None), (b"data:[DONE]", None)))


API = "chat.completions"
FAMILY = "openai"
PATH_SUFFIXES = ("/chat/completions",)
STREAM = openai_stream("content", "arguments", "refusal")


def usage(r: Any, body: Any) -> None:
    """Token usage of a whole OpenAI-style answer."""
    r.prompt_tokens = as_int(get(body, "usage", "prompt_tokens"))
    r.completion_tokens = as_int(get(body, "usage", "completion_tokens"))


def read_json(r: Any, body: Any) -> None:
    chars = 0
    for choice in dicts(get(body, "choices")):
        message = choice.get("message") or {}
        if isinstance(message, dict):
            chars += len(message.get("content") or "") + len(message.get("refusal") or "")
            for call in dicts(message.get("tool_calls")):
                chars += dumped_len(get(call, "function", "arguments") or "")
        r.finish_reason = as_str(choice.get("finish_reason")) or r.finish_reason
    r.output_chars = chars
    usage(r, body)


TOOL_MARKERS = (b'"tool_calls"', b'"function_call"')


def tool_event(t: Any, event: dict) -> None:
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


def tool_body(t: Any, body: dict) -> None:
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


TOOL_ARRAY = b"messages"
turn_boundary = role_turn("assistant")


def tool_results(element: dict, out: list[ToolResult]) -> None:
    role = element.get("role")
    if role == "tool":
        out.append(ToolResult(element.get("tool_call_id"), element.get("name"), element.get("content")))
    elif role == "function":
        out.append(ToolResult(None, element.get("name"), element.get("content")))
