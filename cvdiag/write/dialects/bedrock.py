"""AWS Bedrock Runtime: Converse / ConverseStream and InvokeModel(WithResponseStream).

The route names the operation and the model (``POST /model/{modelId}/converse``,
``converse-stream``, ``invoke``, ``invoke-with-response-stream``); botocore's
``amz-sdk-request: attempt=N`` header gives the attempt. An answer is a JSON body
(Converse, or InvokeModel with the model's own JSON) or event-stream frames whose events
are read here once decoded (``_bedrock.BedrockReader`` does the framing): the text
produced, the stop reason, the token usage and the error code. Bedrock calls are seen
at urllib3 (botocore's transport), so their route is recognised by ``recognise`` there,
not by the path table of the httpx-seen formats.
"""

from __future__ import annotations

import base64
import binascii
import json
import re
from typing import Any
from urllib.parse import unquote

from cvdiag.write.dialects._json import as_int, dumped_len

__all__ = ["API", "PROVIDER", "STREAMS", "attempt_of", "error_code", "read_answer", "read_event", "recognise"]

PROVIDER = "aws-bedrock"
#: Bedrock writes ``api: other`` (its operations are none of the shared formats); its
#: stream is event-stream frames, not SSE (``STREAM`` stays chat's, unused), and its
#: tool calls are not paired yet.
API = "other"
FAMILY = PROVIDER
_ROUTE = re.compile(r"/model/([^/]{1,256})/(converse|converse-stream|invoke|invoke-with-response-stream)$")
_ATTEMPT = re.compile(r"attempt=(\d+)")
STREAMS = frozenset({"converse-stream", "invoke-with-response-stream"})
#: Text-bearing keys of the models' own JSON (InvokeModel): Anthropic, Titan, Llama, Cohere, Mistral.
_TEXT_KEYS = ("text", "outputText", "generation", "completion")
_STOP_KEYS = ("stop_reason", "stopReason", "completionReason", "finish_reason")
_METRICS = "amazon-bedrock-invocationMetrics"


def recognise(method: str, path: str) -> tuple[str, str, bool] | None:
    """(model, operation, streamed) of a Bedrock Runtime call, or None."""
    if method != "POST" or "/model/" not in path:
        return None
    found = _ROUTE.search(path)
    if found is None:
        return None
    operation = found.group(2)
    return unquote(found.group(1))[:128], operation, operation in STREAMS


def attempt_of(header: str | None) -> int | None:
    """botocore's ``amz-sdk-request: attempt=2; max=3`` as a 0-based attempt, or None."""
    found = _ATTEMPT.search(header) if header else None
    return max(0, int(found.group(1)) - 1) if found else None


def error_code(value: Any) -> str | None:
    """``ThrottlingException:http://internal.amazon.com/...`` -> ``ThrottlingException``."""
    if not isinstance(value, str) or not value:
        return None
    return value.split(":", 1)[0].strip() or None


# -- event-stream events (decoded frames) ----------------------------------------------------


def read_event(r: Any, event: Any, body: dict) -> None:
    """One decoded event: a ``chunk`` (InvokeModel's model JSON in base64) or a Converse event."""
    if event == "chunk":
        _model_chunk(r, body)
    elif event == "contentBlockDelta":
        delta = body.get("delta")
        if isinstance(delta, dict):
            text = delta.get("text")
            tool = delta.get("toolUse")
            chars = len(text) if isinstance(text, str) else 0
            if isinstance(tool, dict):
                chars += dumped_len(tool.get("input") or "")
            r.output_chars = (r.output_chars or 0) + chars
    elif event == "messageStop":
        reason = body.get("stopReason")
        r.finish_reason = reason[:512] if isinstance(reason, str) else r.finish_reason
        r.terminal = True
    elif event == "metadata":
        _usage(r, body.get("usage"), "inputTokens", "outputTokens")


def _model_chunk(r: Any, body: dict) -> None:
    """An InvokeModelWithResponseStream chunk: the model's own JSON, in base64."""
    try:
        inner = json.loads(base64.b64decode(body.get("bytes") or b"", validate=True))
    except (ValueError, TypeError, binascii.Error):
        return
    if isinstance(inner, dict):
        _model_json(r, inner, streamed=True)


def _model_json(r: Any, body: dict, *, streamed: bool) -> None:
    delta = body.get("delta") if isinstance(body.get("delta"), dict) else {}
    chars = 0
    for key in _TEXT_KEYS:
        for source in (delta, body):
            value = source.get(key)
            if isinstance(value, str):
                chars += len(value)
    for block in body.get("content") or () if isinstance(body.get("content"), list) else ():
        if isinstance(block, dict):
            chars += len(block["text"]) if isinstance(block.get("text"), str) else dumped_len(block.get("input") or "")
    for result in body.get("results") or () if isinstance(body.get("results"), list) else ():
        if isinstance(result, dict) and isinstance(result.get("outputText"), str):
            chars += len(result["outputText"])
            _stop(r, result)
    r.output_chars = (r.output_chars or 0) + chars
    _stop(r, delta)
    _stop(r, body)
    message = body.get("message")
    usage = body.get("usage") or (message.get("usage") if isinstance(message, dict) else None)
    if isinstance(usage, dict):
        _usage(r, usage, "input_tokens", "output_tokens")
    metrics = body.get(_METRICS)
    if isinstance(metrics, dict):
        _usage(r, metrics, "inputTokenCount", "outputTokenCount")
        r.terminal = True
    if streamed and body.get("type") == "message_stop":
        r.terminal = True


def _stop(r: Any, source: Any) -> None:
    if not isinstance(source, dict):
        return
    for key in _STOP_KEYS:
        value = source.get(key)
        if isinstance(value, str) and value:
            r.finish_reason = value[:512]


def _usage(r: Any, usage: Any, prompt_key: str, completion_key: str) -> None:
    if isinstance(usage, dict):
        r.prompt_tokens = as_int(usage.get(prompt_key)) if prompt_key in usage else r.prompt_tokens
        r.completion_tokens = as_int(usage.get(completion_key)) if completion_key in usage else r.completion_tokens


# -- JSON bodies ---------------------------------------------------------------------------


def read_answer(r: Any, operation: str, body: Any) -> None:
    """A whole JSON answer of ``operation`` (an error body gives its code only)."""
    if not isinstance(body, dict):
        return
    if http_error_body(r, body):
        return
    if operation == "converse":
        _converse_json(r, body)
    else:
        r.output_chars = 0
        _model_json(r, body, streamed=False)


def http_error_body(r: Any, body: dict) -> bool:
    """An error body (``{"message": ...}``, perhaps with ``__type``): its code, if any."""
    code = error_code(body.get("__type") or body.get("code"))
    if code is not None and r.error_type is None:
        r.error_type = code
    return r.error_type is not None or (set(body) <= {"message", "Message", "__type"} and bool(body))


def _converse_json(r: Any, body: dict) -> None:
    chars = 0
    message = (body.get("output") or {}).get("message") if isinstance(body.get("output"), dict) else None
    content = message.get("content") if isinstance(message, dict) else None
    for block in content if isinstance(content, list) else ():
        if isinstance(block, dict):
            if isinstance(block.get("text"), str):
                chars += len(block["text"])
            elif isinstance(block.get("toolUse"), dict):
                chars += dumped_len(block["toolUse"].get("input") or "")
    r.output_chars = chars
    _stop(r, body)
    _usage(r, body.get("usage"), "inputTokens", "outputTokens")
