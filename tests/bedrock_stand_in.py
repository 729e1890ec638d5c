"""A local stand-in for AWS Bedrock Runtime: Starlette under uvicorn on a free loopback
port, speaking Bedrock's routes, its error headers and its event-stream encoding.

aimock has no Bedrock, so this plays its part for boto3 ``bedrock-runtime``: Converse,
ConverseStream, InvokeModel and InvokeModelWithResponseStream, each scenario picked by
the user's message as aimock's fixtures are (the same messages: ``where is my parcel``,
``the provider is down``, ``a flaky provider``, ``too many requests``, ``the provider
cuts me off``, ``take your time``, ``say nothing``, ``tell me a very long tale``).
Frames are encoded here (botocore only decodes them; the tests check this encoder
against botocore's decoder). ``calls`` records (operation, attempt header, status).
"""

from __future__ import annotations

import asyncio
import base64
import json
import socket
import struct
import threading
import time
import zlib
from collections.abc import AsyncIterator, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

EVENTSTREAM = "application/vnd.amazon.eventstream"
HAPPY = "Your parcel shipped yesterday and arrives on Friday."
LONG_TALE = (
    "Once upon a time a model streamed a very long tale, one small piece after another, "
    "to a client that stopped listening halfway through."
)
SLOW_TTFT_S = 1.2


def frame(headers: dict[str, str], payload: bytes) -> bytes:
    """One event-stream frame with string headers (type 7), CRCs and all."""
    raw_headers = b""
    for name, value in headers.items():
        key, raw = name.encode(), value.encode()
        raw_headers += bytes([len(key)]) + key + b"\x07" + struct.pack(">H", len(raw)) + raw
    total = 12 + len(raw_headers) + len(payload) + 4
    prelude = struct.pack(">II", total, len(raw_headers))
    prelude += struct.pack(">I", zlib.crc32(prelude))
    message = prelude + raw_headers + payload
    return message + struct.pack(">I", zlib.crc32(message))


def event(event_type: str, body: dict) -> bytes:
    headers = {":event-type": event_type, ":content-type": "application/json", ":message-type": "event"}
    return frame(headers, json.dumps(body).encode())


def exception(exception_type: str, message: str) -> bytes:
    headers = {":exception-type": exception_type, ":content-type": "application/json", ":message-type": "exception"}
    return frame(headers, json.dumps({"message": message}).encode())


def converse_stream(
    text: str, *, piece: int = 10, stop: str = "end_turn", tokens: tuple[int, int] = (21, 13)
) -> list[bytes]:
    frames = [event("messageStart", {"role": "assistant"})]
    frames += [
        event("contentBlockDelta", {"contentBlockIndex": 0, "delta": {"text": text[i : i + piece]}})
        for i in range(0, len(text), piece)
    ]
    frames += [
        event("contentBlockStop", {"contentBlockIndex": 0}),
        event("messageStop", {"stopReason": stop}),
        event(
            "metadata", {"usage": {"inputTokens": tokens[0], "outputTokens": tokens[1]}, "metrics": {"latencyMs": 5}}
        ),
    ]
    return frames


def converse_json(text: str, *, stop: str = "end_turn", tokens: tuple[int, int] = (21, 13)) -> dict:
    return {
        "output": {"message": {"role": "assistant", "content": [{"text": text}]}},
        "stopReason": stop,
        "usage": {"inputTokens": tokens[0], "outputTokens": tokens[1], "totalTokens": sum(tokens)},
        "metrics": {"latencyMs": 5},
    }


def invoke_stream(text: str, *, piece: int = 10, tokens: tuple[int, int] = (21, 13)) -> list[bytes]:
    """InvokeModelWithResponseStream for an Anthropic model: Messages events in base64 chunks."""

    def chunk(body: dict) -> bytes:
        return event("chunk", {"bytes": base64.b64encode(json.dumps(body).encode()).decode()})

    frames = [chunk({"type": "message_start", "message": {"usage": {"input_tokens": tokens[0], "output_tokens": 1}}})]
    frames += [
        chunk({"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": text[i : i + piece]}})
        for i in range(0, len(text), piece)
    ]
    frames += [
        chunk({"type": "message_delta", "delta": {"stop_reason": "end_turn"}, "usage": {"output_tokens": tokens[1]}}),
        chunk(
            {
                "type": "message_stop",
                "amazon-bedrock-invocationMetrics": {"inputTokenCount": tokens[0], "outputTokenCount": tokens[1]},
            }
        ),
    ]
    return frames


def invoke_json(text: str, *, tokens: tuple[int, int] = (21, 13)) -> dict:
    return {
        "type": "message",
        "role": "assistant",
        "content": [{"type": "text", "text": text}],
        "stop_reason": "end_turn",
        "usage": {"input_tokens": tokens[0], "output_tokens": tokens[1]},
    }


def _error(status: int, code: str, message: str, **headers: str) -> Response:
    return JSONResponse(
        {"message": message},
        status_code=status,
        headers={"x-amzn-errortype": f"{code}:http://internal.amazon.com/coral/com.amazon.bedrock/", **headers},
    )


def _message(body: dict) -> str:
    """The user's text, in Converse's shape or in an Anthropic InvokeModel body."""
    for message in body.get("messages") or ():
        content = message.get("content")
        if isinstance(content, str):
            return content
        for block in content or ():
            if isinstance(block, dict) and isinstance(block.get("text"), str):
                return block["text"]
    return ""


@dataclass
class BedrockStandIn:
    url: str = ""
    calls: list[tuple[str, str, int]] = field(default_factory=list)
    seen: dict[str, int] = field(default_factory=dict)  # invocation id -> attempts so far

    def app(self) -> Starlette:
        return Starlette(routes=[Route("/model/{model}/{operation}", self._answer, methods=["POST"])])

    async def _answer(self, request: Request) -> Response:
        operation = request.path_params["operation"]
        body = json.loads(await request.body() or b"{}")
        message = _message(body)
        invocation = request.headers.get("amz-sdk-invocation-id", "")
        self.seen[invocation] = self.seen.get(invocation, 0) + 1
        response = self._scenario(operation, message, self.seen[invocation])
        self.calls.append((operation, request.headers.get("amz-sdk-request", ""), response.status_code))
        return response

    def _scenario(self, operation: str, message: str, attempt: int) -> Response:
        streamed = operation.endswith("stream")
        if "provider is down" in message or ("flaky" in message and attempt == 1):
            return _error(500, "InternalServerException", "The server had an error processing your request.")
        if "too many requests" in message:
            return _error(429, "ThrottlingException", "Too many requests, please wait.", **{"retry-after": "1"})
        if "invalid" in message:
            return _error(400, "ValidationException", "The model id is invalid.")
        text, tokens = HAPPY, (21, 13)
        delay, first_delay, cut = 0.0, 0.0, None
        if "flaky" in message:
            text, tokens = "Answered on the second try.", (10, 6)
        elif "take your time" in message:
            text, tokens, first_delay = "A slow answer, but a whole one.", (12, 8), SLOW_TTFT_S
        elif "say nothing" in message:
            text, tokens = "", (9, 4)
        elif "cuts me off" in message:
            text, cut, delay = "This answer is cut off by the provider after a few small chunks.", 4, 0.02
        elif "long tale" in message:
            text, delay = LONG_TALE, 0.1
        elif "throttled mid-stream" in message:
            return self._stream(
                [event("messageStart", {"role": "assistant"}), exception("throttlingException", "slow down")],
                0,
                0,
                None,
            )
        if not streamed:
            answer = converse_json(text, tokens=tokens) if operation == "converse" else invoke_json(text, tokens=tokens)
            return JSONResponse(answer, headers={"x-amzn-requestid": "req-bedrock-1"})
        frames = (
            converse_stream(text, piece=4 if cut or delay else 10, tokens=tokens)
            if operation == "converse-stream"
            else invoke_stream(text, tokens=tokens)
        )
        return self._stream(frames, delay, first_delay, cut)

    def _stream(self, frames: list[bytes], delay: float, first_delay: float, cut: int | None) -> Response:
        async def body() -> AsyncIterator[bytes]:
            if first_delay:
                await asyncio.sleep(first_delay)
            for i, piece in enumerate(frames):
                if cut is not None and i == cut:
                    yield piece[: len(piece) // 2]
                    raise ConnectionError("the stand-in cuts the stream on purpose")
                if delay:
                    await asyncio.sleep(delay)
                yield piece

        return StreamingResponse(body(), media_type=EVENTSTREAM, headers={"x-amzn-requestid": "req-bedrock-2"})


@contextmanager
def running() -> Iterator[BedrockStandIn]:
    """The stand-in under uvicorn in a thread, on a free loopback port."""
    stand_in = BedrockStandIn()
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    stand_in.url = f"http://127.0.0.1:{sock.getsockname()[1]}"
    server = uvicorn.Server(
        uvicorn.Config(stand_in.app(), log_level="critical", lifespan="off", timeout_graceful_shutdown=1)
    )
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while not server.started:
        if time.monotonic() > deadline:
            raise RuntimeError("the Bedrock stand-in did not start")
        time.sleep(0.01)
    try:
        yield stand_in
    finally:
        server.should_exit = True
        thread.join(timeout=10)
        sock.close()
