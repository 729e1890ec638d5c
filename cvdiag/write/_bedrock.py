"""AWS Bedrock Runtime calls seen at urllib3: their route, and the reader of their answers.

botocore sends Bedrock calls through urllib3, so ``_urllib3_capture`` sees them. What the
format says lives in ``dialects.bedrock``; this module turns its route into an
``LLMRoute`` and gives ``BedrockReader``: an ``AnswerReader`` that reads a JSON body or
event-stream frames (ConverseStream, InvokeModelWithResponseStream) and hands each
decoded event to the dialect. The error code comes in ``x-amzn-errortype`` or,
mid-stream, as an exception frame.
"""

from __future__ import annotations

import json
from typing import Any

from cvdiag.write._eventstream import FrameDecoder
from cvdiag.write._llm_stream import AnswerReader
from cvdiag.write.dialects.bedrock import (
    PROVIDER,
    STREAMS,
    attempt_of,
    error_code,
    read_answer,
    read_event,
    recognise,
)
from cvdiag.write.llm_routes import LLMRoute

__all__ = ["PROVIDER", "BedrockReader", "attempt_of", "error_code", "recognise_bedrock"]


def recognise_bedrock(method: str, path: str) -> tuple[LLMRoute, str] | None:
    """(route, operation path) of a Bedrock Runtime call, or None."""
    found = recognise(method, path)
    if found is None:
        return None
    model, operation, streamed = found
    return LLMRoute(PROVIDER, "other", model, streamed), operation


class BedrockReader(AnswerReader):
    """An ``AnswerReader`` for Bedrock's answers (same facts, same attributes)."""

    __slots__ = ("_frames", "_operation", "_seen_frames", "final")

    def __init__(self, operation: str, headers: Any, *, encoding: str | None = None) -> None:
        streamed = operation in STREAMS
        super().__init__("other", event_stream=streamed, encoding=encoding)
        self._operation = operation
        self._frames = FrameDecoder() if streamed else None
        self._seen_frames = False
        #: An exception frame ended the stream: botocore raises it and reads no further.
        self.final = False
        self.error_type = error_code(headers.get("x-amzn-errortype"))
        if not streamed:
            self.output_chars = None
        self.prompt_tokens = _int_header(headers, "x-amzn-bedrock-input-token-count")
        self.completion_tokens = _int_header(headers, "x-amzn-bedrock-output-token-count")

    # -- event streams -----------------------------------------------------------------

    def _take(self, data: bytes) -> None:
        frames = self._frames
        if frames is None:
            super()._take(data)
            return
        if not data:
            return
        self._seen_frames = True
        for headers, payload in frames.feed(data):
            self._frame(headers, payload)
        if frames.broken:
            self.readable = False

    def _frame(self, headers: dict[str, Any], payload: bytes) -> None:
        kind = headers.get(":message-type")
        if kind == "exception" or kind == "error":
            self.error_type = str(headers.get(":exception-type") or headers.get(":error-code") or "error")[:512]
            self.final = True
            return
        self.chunks += 1
        try:
            body = json.loads(payload) if payload else {}
        except ValueError:
            return
        if not isinstance(body, dict):
            return
        read_event(self, headers.get(":event-type"), body)

    def end(self) -> None:
        if self._frames is None:
            super().end()
            return
        if self._inflate is not None and self.readable:
            try:
                self._take(self._inflate.flush())
            except Exception:
                self.readable = False

    def flush(self) -> None:
        if self._frames is None:
            super().flush()

    @property
    def untouched(self) -> bool:
        return super().untouched if self._frames is None else not self._seen_frames

    @property
    def complete(self) -> bool:
        if self._frames is None:
            return super().complete
        return self.terminal and self.readable

    # -- JSON bodies ---------------------------------------------------------------------

    def _read_json(self, body: Any) -> None:
        read_answer(self, self._operation, body)


def _int_header(headers: Any, name: str) -> int | None:
    raw = headers.get(name)
    try:
        return int(raw) if raw is not None else None
    except ValueError:
        return None
