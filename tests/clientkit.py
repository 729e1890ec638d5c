"""HTTP clients after ``cvdiag.instrument()``, for their tests: the recorded chat request,
what its happy end looks like, and the fixture that instruments around each test."""

from __future__ import annotations

import pytest
from llm_server import DATA

import cvdiag
from cvdiag.testing import reset

CHAT = "/v1/chat/completions"
BODY = {"model": "gpt-4o-mini", "stream": True, "messages": [{"role": "user", "content": "hi"}]}
RECORDED = (DATA / "openai_chat_stream.sse").read_bytes()
#: ``happy(end)`` of the recorded stream read whole.
HAPPY = ("ok", 200, "stop", 19, 7, 24, 7)


@pytest.fixture(autouse=True, name="instrumented")
def instrumented_fixture():
    """Every client instrumented for the test, the capture reset, all undone after."""
    states = cvdiag.instrument(heartbeat_s=10.0)
    reset()
    try:
        yield states
    finally:
        cvdiag.uninstrument()


def happy(env: dict) -> tuple:
    """An LLM call's end as the outcome and the metadata a happy stream sets."""
    keys = ("http_status", "finish_reason", "prompt_tokens", "completion_tokens", "output_chars", "chunks")
    return (env["outcome"], *(env["metadata"].get(k) for k in keys))
