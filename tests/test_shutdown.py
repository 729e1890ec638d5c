"""Server shutdown: a real uvicorn process stopped by a signal while ten streams are in
flight. Every one of them gets its terminal in the log, and the diagnosis says the
server stopped (``incomplete``), not that the LLM stalled."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import httpx
import pytest
from cvdiag_cli import run
from serverkit import free_port, wait_until_serving

from cvdiag.contract.schema import BACKEND_TERMINALS

STREAMS = 10

APP = """
import asyncio

from starlette.applications import Starlette
from starlette.responses import StreamingResponse
from starlette.routing import Route

import cvdiag


async def chat(request):
    async def body():
        async with cvdiag.agent_scope("writer"), cvdiag.llm_call("openai", "gpt-4o-mini", heartbeat_s=0.1):
            for i in range(600):
                yield f"data: token {i}\\n\\n".encode()
                await asyncio.sleep(0.05)

    return StreamingResponse(body(), media_type="text/event-stream")


app = Starlette(routes=[Route("/chat", chat)])
app.add_middleware(cvdiag.CvdiagMiddleware, slug="chat")
"""


def _stream(base: str, test_id: str, first_chunk: threading.Semaphore) -> None:
    """Read until the server goes away; never hang up first (that would be a client ``rst``)."""
    try:
        with httpx.stream("GET", f"{base}/chat", headers={"x-test-id": test_id}, timeout=30) as response:
            chunks = response.iter_bytes()
            next(chunks)
            first_chunk.release()
            for _ in chunks:
                pass
    except httpx.HTTPError:
        pass


def _serve_and_stop(tmp: Path, sig: signal.Signals, lifespan: str) -> Path:
    """Start uvicorn, put STREAMS streams in flight, send ``sig``; the NDJSON log."""
    (tmp / "app.py").write_text(APP)
    log = tmp / "cvdiag.ndjson"
    port = free_port()
    env = {
        **os.environ,
        "CVDIAG_ENABLED": "1",
        "CVDIAG_TIER": "verbose",
        "CVDIAG_ENV": "test",
        "CVDIAG_STDOUT": "0",
        "CVDIAG_FILE": str(log),
    }
    command = [sys.executable, "-m", "uvicorn", "app:app", "--port", str(port), "--log-level", "warning"]
    command += ["--timeout-graceful-shutdown", "1", "--lifespan", lifespan]
    proc = subprocess.Popen(command, cwd=tmp, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        base = f"http://127.0.0.1:{port}"
        wait_until_serving(base, proc)
        first_chunk = threading.Semaphore(0)
        clients = [
            threading.Thread(target=_stream, args=(base, f"shutdown-{i}", first_chunk), daemon=True)
            for i in range(STREAMS)
        ]
        for client in clients:
            client.start()
        for _ in clients:
            assert first_chunk.acquire(timeout=20), "a stream never started"
        time.sleep(0.3)  # a few heartbeats
        proc.send_signal(sig)
        proc.wait(20)
        for client in clients:
            client.join(10)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    return log


def _by_test(log: Path) -> dict[str, list[dict]]:
    envelopes = [json.loads(line) for line in log.read_bytes().splitlines()]
    return {f"shutdown-{i}": [e for e in envelopes if e["test_id"] == f"shutdown-{i}"] for i in range(STREAMS)}


def _terminal_of(test_id: str, events: list[dict]) -> dict:
    terminals = [e for e in events if e["boundary"] in BACKEND_TERMINALS]
    assert [t["boundary"] for t in terminals] == ["backend.sse.aborted"], (test_id, [e["boundary"] for e in events])
    assert any(e["boundary"] == "backend.llm.call.heartbeat" for e in events)
    return terminals[0]


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_streams_in_flight_at_shutdown_each_get_a_shutdown_terminal(tmp_path, sig):
    log = _serve_and_stop(tmp_path, sig, lifespan="on")
    for test_id, events in _by_test(log).items():
        aborted = _terminal_of(test_id, events)
        assert aborted["metadata"]["termination_kind"] == "shutdown"
        assert aborted["metadata"]["bytes_before_abort"] > 0
        # Cancelled by the server, the request ended on its own path: its LLM call and
        # agent were written too, before the process went.
        outcomes = {e["boundary"]: e["outcome"] for e in events}
        assert outcomes["backend.llm.call.response"] == "timeout"
        assert outcomes["backend.agent.exit"] == "err"

    result = run("diagnose", "--all", "--json", log)
    assert result.code == 0, result.err
    verdicts = {d["test_id"]: d for d in json.loads(result.out)}
    for i in range(STREAMS):
        verdict = verdicts[f"shutdown-{i}"]
        assert verdict["class"] == "incomplete", verdict
        assert verdict["reason"].startswith("The server stopped (shutdown) with a request in flight"), verdict
        assert verdict["evidence"]["termination_kind"] == "shutdown"


def test_without_lifespan_an_interrupted_server_still_writes_every_terminal(tmp_path):
    """No lifespan: uvicorn's cancellation message is lost when the loop cancels the tasks
    again at exit, so the kind is ``timeout``; but no request goes without its terminal."""
    log = _serve_and_stop(tmp_path, signal.SIGINT, lifespan="off")
    for test_id, events in _by_test(log).items():
        assert _terminal_of(test_id, events)["metadata"]["termination_kind"] in ("shutdown", "timeout")


EXITING = """
import sys, threading, time

import httpx
import uvicorn

sys.path.insert(0, {tests!r})
from serverkit import free_port, wait_until_serving

from app import app

port = free_port()
server = uvicorn.Server(uvicorn.Config(app, port=port, log_level="warning", lifespan="off"))
threading.Thread(target=server.run, daemon=True).start()
while not server.started:
    time.sleep(0.01)


started = threading.Semaphore(0)


def stream(i):
    with httpx.stream("GET", f"http://127.0.0.1:{{port}}/chat", headers={{"x-test-id": f"shutdown-{{i}}"}}) as r:
        chunks = r.iter_bytes()
        next(chunks)
        started.release()
        for _ in chunks:
            pass


for i in range({streams}):
    threading.Thread(target=stream, args=(i,), daemon=True).start()
for _ in range({streams}):
    assert started.acquire(timeout=30)
time.sleep(0.3)  # a few heartbeats
sys.exit(0)  # the process ends with every stream still in flight
"""


def test_process_exit_with_streams_in_flight_writes_their_terminals(tmp_path):
    (tmp_path / "app.py").write_text(APP)
    (tmp_path / "main.py").write_text(EXITING.format(tests=str(Path(__file__).parent), streams=STREAMS))
    log = tmp_path / "cvdiag.ndjson"
    env = {**os.environ, "CVDIAG_ENABLED": "1", "CVDIAG_TIER": "verbose", "CVDIAG_ENV": "test"}
    env.update({"CVDIAG_STDOUT": "0", "CVDIAG_FILE": str(log)})
    subprocess.run([sys.executable, "main.py"], cwd=tmp_path, env=env, timeout=60, check=True)
    for test_id, events in _by_test(log).items():
        assert _terminal_of(test_id, events)["metadata"]["termination_kind"] == "shutdown"


def test_lifespan_shutdown_ends_a_request_the_server_never_cancelled_exactly_once():
    """A server that stops without cancelling: the middleware ends the request itself,
    and the request's own end later writes no second terminal."""
    from emitkit import capture
    from starlette.applications import Starlette
    from starlette.responses import StreamingResponse
    from starlette.routing import Route

    import cvdiag

    async def forever(request):
        async def body():
            while True:
                yield b"data: tick\n\n"
                await asyncio.sleep(0.01)

        return StreamingResponse(body(), media_type="text/event-stream")

    app = Starlette(routes=[Route("/forever", forever)])
    app.add_middleware(cvdiag.CvdiagMiddleware, slug="svc")

    async def serve() -> None:
        lifespan_in: asyncio.Queue[dict] = asyncio.Queue()
        lifespan_out: list[dict] = []
        for message in ({"type": "lifespan.startup"}, {"type": "lifespan.shutdown"}):
            lifespan_in.put_nowait(message)

        async def lifespan_send(message: dict) -> None:
            lifespan_out.append(message)

        async def receive() -> dict:
            await asyncio.sleep(3600)
            return {"type": "http.disconnect"}

        async def send(message: dict) -> None:
            await asyncio.sleep(0)

        scope = {"type": "http", "method": "GET", "path": "/forever", "headers": [(b"x-test-id", b"never-cancelled")]}
        request = asyncio.create_task(app(scope, receive, send))
        await asyncio.sleep(0.05)
        await app({"type": "lifespan"}, lifespan_in.get, lifespan_send)
        assert lifespan_out[-1]["type"] == "lifespan.shutdown.complete"
        request.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await request

    with capture("default") as cap:
        asyncio.run(serve())
    [aborted] = cap.events()
    assert aborted["boundary"] == "backend.sse.aborted" and aborted["test_id"] == "never-cancelled"
    assert aborted["metadata"]["termination_kind"] == "shutdown"
