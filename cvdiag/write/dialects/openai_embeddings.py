"""OpenAI Embeddings: no text produced, only the prompt's token usage."""

from __future__ import annotations

from typing import Any

from cvdiag.write.dialects import openai_chat
from cvdiag.write.dialects._json import as_int, get

__all__ = ["API", "read_json"]

API = "embeddings"
FAMILY = "openai"
PATH_SUFFIXES = ("/embeddings",)
#: Embeddings never stream; an event stream there is read as chat would be.
STREAM = openai_chat.STREAM


def read_json(r: Any, body: Any) -> None:
    r.prompt_tokens = as_int(get(body, "usage", "prompt_tokens"))
