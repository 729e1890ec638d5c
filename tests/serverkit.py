"""A real uvicorn server on a loopback port, in a thread, for tests that need real sockets."""

from __future__ import annotations

import socket
import subprocess
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

import httpx
import pytest
import uvicorn
from starlette.types import ASGIApp


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextmanager
def running_server(app: ASGIApp, **options: object) -> Iterator[str]:
    """Serve ``app`` with uvicorn until the block ends; yields the base URL."""
    port = free_port()
    options = {"log_level": "warning", "lifespan": "off", **options}
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, **options))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while not server.started and time.monotonic() < deadline:
        time.sleep(0.01)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(10)


def wait_until_serving(base: str, proc: subprocess.Popen, timeout: float = 30) -> None:
    """Block until the server process ``proc`` answers HTTP at ``base``; fail if it died."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            httpx.get(f"{base}/nothing", timeout=1)
            return
        except httpx.TransportError:
            if time.monotonic() > deadline or proc.poll() is not None:
                pytest.fail("uvicorn did not start")
            time.sleep(0.05)
