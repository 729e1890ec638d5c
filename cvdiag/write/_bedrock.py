"""AWS Bedrock Runtime calls: which requests they are, and what their answers say.

botocore sends Bedrock calls through urllib3, so ``_urllib3_capture`` sees them; this
module adds what is Bedrock's own. The route names the operation and the model
(``POST /model/{modelId}/converse``, ``converse-stream``, ``invoke``,
``invoke-with-response-stream``), botocore's ``amz-sdk-request: attempt=N`` header gives
the attempt, and ``BedrockReader`` reads the answer: a JSON body (Converse, InvokeModel
with the model's own JSON) or event-stream frames (ConverseStream,
InvokeModelWithResponseStream, whose ``chunk`` events carry the model's JSON in base64),
for the text produced, the stop reason, the token usage and the error code, which
Bedrock sends in ``x-amzn-errortype`` or, mid-stream, as an exception frame.
"""

from __future__ import annotations

import base64
import binascii
import json
import re
from typing import Any
from urllib.parse import unquote

from cvdiag.write._eventstream import FrameDecoder
from cvdiag.write._llm_stream import AnswerReader
from cvdiag.write.dialects._base import dumped_len as _dumped
from cvdiag.write.llm_routes import LLMRoute

__all__ = ["PROVIDER", "BedrockReader", "attempt_of", "error_code", "recognise_bedrock"]

PROVIDER = "aws-bedrock"
_ROUTE = re.compile(r"/model/([^/]{1,256})/(converse|converse-stream|invoke|invoke-with-response-stream)$")
_ATTEMPT = re.compile(r"attempt=(\d+)")
_STREAMS = frozenset({"converse-stream", "invoke-with-response-stream"})
#: Text-bearing keys of the models' own JSON (InvokeModel): Anthropic, Titan, Llama, Cohere, Mistral.
_TEXT_KEYS = ("text", "outputText", "generation", "completion")
_STOP_KEYS = ("stop_reason", "stopReason", "completionReason", "finish_reason")
_METRICS = "amazon-bedrock-invocationMetrics"


def recognise_bedrock(method: str, path: str) -> tuple[LLMRoute, str] | None:
    """(route, operation path) of a Bedrock Runtime call, or None."""
    if method != "POST" or "/model/" not in path:
        return None
    found = _ROUTE.search(path)
    if found is None:
        return None
    operation = found.group(2)
    route = LLMRoute(PROVIDER, "other", unquote(found.group(1))[:128], operation in _STREAMS)
    return route, operation


def attempt_of(header: str | None) -> int | None:
    """botocore's ``amz-sdk-request: attempt=2; max=3`` as a 0-based attempt, or None."""
    found = _ATTEMPT.search(header) if header else None
    return max(0, int(found.group(1)) - 1) if found else None


def error_code(value: Any) -> str | None:
    """``ThrottlingException:http://internal.amazon.com/...`` -> ``ThrottlingException``."""
    if not isinstance(value, str) or not value:
        return None
    return value.split(":", 1)[0].strip() or None


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


class BedrockReader(AnswerReader):
    """An ``AnswerReader`` for Bedrock's answers (same facts, same attributes)."""

    __slots__ = ("_frames", "_operation", "_seen_frames", "final")

    def __init__(self, operation: str, headers: Any, *, encoding: str | None = None) -> None:
        streamed = operation in _STREAMS
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
        event = headers.get(":event-type")
        if event == "chunk":
            self._model_chunk(body)
        else:
            self._converse_event(event, body)

    def _converse_event(self, event: Any, body: dict) -> None:
        if event == "contentBlockDelta":
            delta = body.get("delta")
            if isinstance(delta, dict):
                text = delta.get("text")
                tool = delta.get("toolUse")
                chars = len(text) if isinstance(text, str) else 0
                if isinstance(tool, dict):
                    chars += _dumped(tool.get("input") or "")
                self.output_chars = (self.output_chars or 0) + chars
        elif event == "messageStop":
            reason = body.get("stopReason")
            self.finish_reason = reason[:512] if isinstance(reason, str) else self.finish_reason
            self.terminal = True
        elif event == "metadata":
            self._usage(body.get("usage"), "inputTokens", "outputTokens")

    def _model_chunk(self, body: dict) -> None:
        """An InvokeModelWithResponseStream chunk: the model's own JSON, in base64."""
        try:
            inner = json.loads(base64.b64decode(body.get("bytes") or b"", validate=True))
        except (ValueError, TypeError, binascii.Error):
            return
        if isinstance(inner, dict):
            self._model_json(inner, streamed=True)

    def _model_json(self, body: dict, *, streamed: bool) -> None:
        delta = body.get("delta") if isinstance(body.get("delta"), dict) else {}
        chars = 0
        for key in _TEXT_KEYS:
            for source in (delta, body):
                value = source.get(key)
                if isinstance(value, str):
                    chars += len(value)
        for block in body.get("content") or () if isinstance(body.get("content"), list) else ():
            if isinstance(block, dict):
                chars += len(block["text"]) if isinstance(block.get("text"), str) else _dumped(block.get("input") or "")
        for result in body.get("results") or () if isinstance(body.get("results"), list) else ():
            if isinstance(result, dict) and isinstance(result.get("outputText"), str):
                chars += len(result["outputText"])
                self._stop(result)
        self.output_chars = (self.output_chars or 0) + chars
        self._stop(delta)
        self._stop(body)
        message = body.get("message")
        usage = body.get("usage") or (message.get("usage") if isinstance(message, dict) else None)
        if isinstance(usage, dict):
            self._usage(usage, "input_tokens", "output_tokens")
        metrics = body.get(_METRICS)
        if isinstance(metrics, dict):
            self._usage(metrics, "inputTokenCount", "outputTokenCount")
            self.terminal = True
        if streamed and body.get("type") == "message_stop":
            self.terminal = True

    def _stop(self, source: Any) -> None:
        if not isinstance(source, dict):
            return
        for key in _STOP_KEYS:
            value = source.get(key)
            if isinstance(value, str) and value:
                self.finish_reason = value[:512]

    def _usage(self, usage: Any, prompt_key: str, completion_key: str) -> None:
        if isinstance(usage, dict):
            self.prompt_tokens = _int(usage.get(prompt_key)) if prompt_key in usage else self.prompt_tokens
            self.completion_tokens = (
                _int(usage.get(completion_key)) if completion_key in usage else self.completion_tokens
            )

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
        if not isinstance(body, dict):
            return
        if self.http_error_body(body):
            return
        if self._operation == "converse":
            self._converse_json(body)
        else:
            self.output_chars = 0
            self._model_json(body, streamed=False)

    def http_error_body(self, body: dict) -> bool:
        """An error body (``{"message": ...}``, perhaps with ``__type``): its code, if any."""
        code = error_code(body.get("__type") or body.get("code"))
        if code is not None and self.error_type is None:
            self.error_type = code
        return self.error_type is not None or (set(body) <= {"message", "Message", "__type"} and bool(body))

    def _converse_json(self, body: dict) -> None:
        chars = 0
        message = (body.get("output") or {}).get("message") if isinstance(body.get("output"), dict) else None
        content = message.get("content") if isinstance(message, dict) else None
        for block in content if isinstance(content, list) else ():
            if isinstance(block, dict):
                if isinstance(block.get("text"), str):
                    chars += len(block["text"])
                elif isinstance(block.get("toolUse"), dict):
                    chars += _dumped(block["toolUse"].get("input") or "")
        self.output_chars = chars
        self._stop(body)
        self._usage(body.get("usage"), "inputTokens", "outputTokens")


def _int_header(headers: Any, name: str) -> int | None:
    raw = headers.get(name)
    try:
        return int(raw) if raw is not None else None
    except ValueError:
        return None
