"""An error body that trickles never holds up the SDK's retry (issue 18 item 1).

SDKs close a 4xx/5xx response unread before they retry; cvdiag reads that body for the
provider's error type only as far as it is already there. A local server sends a 503
head at once and its body a byte at a time; the real openai SDK (sync and async) must
retry about as fast with cvdiag as without it, and the first attempt is still written.
"""

from __future__ import annotations

import asyncio
import socket
import threading
import time
from collections.abc import Iterator

import openai
import pytest
from emitkit import capture
from llm_server import DATA, llm_capture_on_fixture  # noqa: F401 (fixture)

import cvdiag
from cvdiag.write.propagation import is_instrumented, uninstrument_httpx

ERROR_BODY = b'{"error": {"message": "overloaded", "type": "server_overloaded", "code": null}}'
STREAM = (DATA / "openai_chat_stream.sse").read_bytes()
#: Seconds between the bytes of the trickling error body (the whole body takes ~20 s).
TRICKLE_S = 0.25
#: The extra wait cvdiag may add to a retry: far under the old 1 s (async) or the body's length (sync).
ALLOWED_EXTRA_S = 0.6


class TricklingProvider:
    """First request: a 503 head at once, its body a byte every TRICKLE_S; later ones: a stream."""

    def __init__(self, *, trickle: bool = True) -> None:
        self.trickle = trickle
        self._sock = socket.create_server(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self._sock.getsockname()[1]}/v1"
        self.error_head_at: float | None = None
        self.retry_at: float | None = None
        self._served = 0
        self._stop = threading.Event()
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while not self._stop.is_set():
            try:
                conn, _ = self._sock.accept()
            except OSError:
                return
            threading.Thread(target=self._serve, args=(conn,), daemon=True).start()

    def _serve(self, conn: socket.socket) -> None:
        with conn:
            try:
                while self._read_request(conn):
                    self._served += 1
                    if self._served == 1:
                        self._error(conn)
                        return
                    self.retry_at = self.retry_at or time.monotonic()
                    head = b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n"
                    conn.sendall(head + b"content-length: %d\r\n\r\n" % len(STREAM) + STREAM)
            except OSError:
                return

    def _error(self, conn: socket.socket) -> None:
        head = b"HTTP/1.1 503 Service Unavailable\r\ncontent-type: application/json\r\nretry-after-ms: 1\r\n"
        conn.sendall(head + b"content-length: %d\r\n\r\n" % len(ERROR_BODY))
        self.error_head_at = time.monotonic()
        if not self.trickle:
            conn.sendall(ERROR_BODY)
            return
        for i in range(len(ERROR_BODY)):
            if self._stop.wait(TRICKLE_S):
                return
            conn.sendall(ERROR_BODY[i : i + 1])

    @staticmethod
    def _read_request(conn: socket.socket) -> bool:
        data = b""
        while b"\r\n\r\n" not in data:
            piece = conn.recv(65536)
            if not piece:
                return False
            data += piece
        head, _, body = data.partition(b"\r\n\r\n")
        length = next(
            (int(line.split(b":")[1]) for line in head.split(b"\r\n") if line.lower().startswith(b"content-length:")), 0
        )
        while len(body) < length:
            body += conn.recv(65536)
        return True

    @property
    def gap_s(self) -> float:
        """From the error head to the retry's arrival: what the retry waited."""
        assert self.error_head_at is not None and self.retry_at is not None
        return self.retry_at - self.error_head_at

    def close(self) -> None:
        self._stop.set()
        self._sock.close()


@pytest.fixture
def cvdiag_off() -> Iterator[None]:
    was = is_instrumented()
    uninstrument_httpx()
    try:
        yield
    finally:
        if was:
            from cvdiag.write.propagation import instrument_httpx

            instrument_httpx(llm=True, heartbeat_s=10.0)


def _stream_sync(provider: TricklingProvider) -> str:
    client = openai.OpenAI(base_url=provider.url, api_key="sk-test-1", max_retries=1)
    stream = client.chat.completions.create(model="gpt-4o-mini", messages=[], stream=True)
    return "".join(chunk.choices[0].delta.content or "" for chunk in stream if chunk.choices)


def _stream_async(provider: TricklingProvider) -> str:
    async def run() -> str:
        client = openai.AsyncOpenAI(base_url=provider.url, api_key="sk-test-1", max_retries=1)
        stream = await client.chat.completions.create(model="gpt-4o-mini", messages=[], stream=True)
        return "".join([chunk.choices[0].delta.content or "" async for chunk in stream if chunk.choices])

    return asyncio.run(run())


CALLS = pytest.mark.parametrize("call", [_stream_sync, _stream_async], ids=["sync", "async"])


def _gap(call, **kwargs) -> tuple[float, str]:
    provider = TricklingProvider(**kwargs)
    try:
        text = call(provider)
        return provider.gap_s, text
    finally:
        provider.close()


@CALLS
def test_a_trickling_error_body_does_not_hold_up_the_retry(call, llm_capture_on, request):
    with capture("verbose") as cap:
        before = cvdiag.stats()["internal_errors"]
        gap_with, text = _gap(call)
        calls = cap.of("backend.llm.call.response")
        assert cvdiag.stats()["internal_errors"] == before  # a body given up is no failure of cvdiag's
    assert text == 'Hello, wörld!\n Say "hi".'
    assert [(c["outcome"], c["metadata"]["attempt"], c["metadata"]["http_status"]) for c in calls] == [
        ("err", 0, 503),
        ("ok", 1, 200),
    ]
    uninstrument_httpx()
    gap_without, _ = _gap(call)
    assert gap_with < gap_without + ALLOWED_EXTRA_S, (gap_with, gap_without)


@CALLS
def test_an_error_body_already_there_still_gives_the_error_type(call, llm_capture_on):
    with capture("verbose") as cap:
        _gap(call, trickle=False)
        calls = cap.of("backend.llm.call.response")
    assert [(c["metadata"]["http_status"], c["metadata"]["error_type"]) for c in calls] == [
        (503, "server_overloaded"),
        (200, None),
    ]
