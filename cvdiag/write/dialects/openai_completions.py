"""OpenAI Completions (the legacy text API): ``choices[].text``, no tool calls."""

from __future__ import annotations

from typing import Any

from cvdiag.write.dialects._json import as_str, dicts, get
from cvdiag.write.dialects.openai_chat import openai_stream, usage

__all__ = ["API", "read_json"]

API = "completions"
FAMILY = "openai"
PATH_SUFFIXES = ("/completions",)
STREAM = openai_stream("text")


def read_json(r: Any, body: Any) -> None:
    chars = 0
    for choice in dicts(get(body, "choices")):
        chars += len(choice.get("text") or "")
        r.finish_reason = as_str(choice.get("finish_reason")) or r.finish_reason
    r.output_chars = chars
    usage(r, body)
