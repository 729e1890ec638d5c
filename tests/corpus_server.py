"""The diagnosis corpus's server: a Starlette app with one endpoint per backend scenario,
the real middleware and scopes, run under uvicorn in a subprocess whose NDJSON file sink
is the log, and the clients that drive it (including one that hangs up mid-stream and one
that ``kill -9``s the server mid-request).

``tools/make_diagnose_corpus.py backend`` runs every scenario through it; the live tests
in ``test_diagnose.py`` run a few, so an emitter change that breaks diagnosis fails there.

    python tests/corpus_server.py --app outer --tier verbose --port 8000 --log /tmp/log.ndjson
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import corpus_agents
import httpx
import uvicorn
from serverkit import free_port, wait_until_serving
from starlette.applications import Starlette
from starlette.responses import JSONResponse, PlainTextResponse, StreamingResponse
from starlette.routing import Route

import cvdiag

#: The slow threshold the backend scenarios are labelled with, so "slow" takes a second.
SLOW_S = 2.0
HEARTBEAT_S = 0.1
SLUG = "diag-corpus"


class RateLimitError(Exception):
    """Stands in for a provider client's rate-limit error (no network needed)."""


class APITimeoutError(Exception):
    """Stands in for a provider client's timeout error."""


def build_app(wrap: str = "inner") -> Any:
    """A Starlette app with one endpoint per scenario (``/chat/<name>``).

    ``wrap="inner"`` adds the middleware with ``add_middleware`` (inside Starlette's
    ServerErrorMiddleware); ``"outer"`` wraps the whole app, so it sees the 500 page.
    """

    async def llm(seconds: float, tokens: int, fail: BaseException | None = None) -> int:
        async with cvdiag.llm_call("openai", "gpt-4o-mini", heartbeat_s=HEARTBEAT_S) as call:
            await asyncio.sleep(seconds)
            if fail is not None:
                raise fail
            call.record(tokens, prompt_tokens=12, completion_tokens=tokens, finish_reason="stop")
        return tokens

    def sse(body: Any) -> StreamingResponse:
        return StreamingResponse(body, media_type="text/event-stream")

    async def happy(request: Any) -> Any:
        async def body() -> Any:
            async with cvdiag.agent_scope("shopper", model_id="gpt-4o-mini"):
                n = await llm(0.05, 5)
            for i in range(n):
                yield f"data: token {i}\n\n"

        return sse(body())

    def happy_json(request: Any) -> Any:  # sync: runs in the threadpool, heartbeats from a thread
        with (
            cvdiag.agent_scope("shopper", model_id="gpt-4o-mini"),
            cvdiag.llm_call("openai", "gpt-4o-mini", heartbeat_s=HEARTBEAT_S) as call,
        ):
            time.sleep(0.05)
            call.record(7, completion_tokens=7)
        return JSONResponse({"answer": "Here are three shoes you might like."})

    async def slow_stream(request: Any) -> Any:
        async def body() -> Any:
            async with cvdiag.agent_scope("shopper"):
                await llm(0.02, 40)
            for i in range(400):
                yield f"event: token\ndata: {i}\n\n"
                await asyncio.sleep(0.05)

        return sse(body())

    async def wait_first(request: Any) -> Any:
        async def body() -> Any:
            async with cvdiag.agent_scope("shopper"):
                await llm(5.0, 5)  # the client gives up long before this answers
            yield "data: too late\n\n"

        return sse(body())

    async def raise_before(request: Any) -> Any:
        raise KeyError("cart_id")

    async def raise_mid(request: Any) -> Any:
        async def body() -> Any:
            yield "data: one\n\n"
            await asyncio.sleep(0.01)
            yield "data: two\n\n"
            raise RuntimeError("tool failed mid-stream")

        return sse(body())

    async def llm_raise(request: Any) -> Any:
        async with cvdiag.agent_scope("shopper"):
            await llm(0.02, 0, RateLimitError("429 Too Many Requests"))
        return PlainTextResponse("unreachable")

    async def llm_raise_handled(request: Any) -> Any:
        async def body() -> Any:
            try:
                await llm(0.02, 0, APITimeoutError("provider timed out"))
            except APITimeoutError:
                yield "data: sorry, please try again\n\n"

        return sse(body())

    async def llm_hang(request: Any) -> Any:
        async def body() -> Any:
            async with cvdiag.agent_scope("shopper"):
                await llm(3600, 0)
            yield "data: never\n\n"

        return sse(body())

    async def llm_block(request: Any) -> Any:
        async with (
            cvdiag.agent_scope("shopper"),
            cvdiag.llm_call("openai", "gpt-4o-mini", heartbeat_s=HEARTBEAT_S),
        ):
            await asyncio.sleep(0.25)
            time.sleep(3600)  # a sync client on the event loop: heartbeats stop too
        return PlainTextResponse("never")

    async def llm_slow(request: Any) -> Any:
        async def body() -> Any:
            async with cvdiag.agent_scope("shopper"):
                n = await llm(SLOW_S * 1.3, 3)
            for i in range(n):
                yield f"data: token {i}\n\n"

        return sse(body())

    async def empty(request: Any) -> Any:
        async def body() -> Any:
            async with cvdiag.agent_scope("shopper"):
                n = await llm(0.02, 0)
            for i in range(n):
                yield f"data: token {i}\n\n"

        return sse(body())

    async def agent_error(request: Any) -> Any:
        try:
            async with cvdiag.agent_scope("planner"):
                raise ValueError("planner produced no plan")
        except ValueError:
            return JSONResponse({"error": "the planner failed, showing defaults"})

    async def agent_error_stream(request: Any) -> Any:
        async def body() -> Any:
            with contextlib.suppress(LookupError):
                async with cvdiag.agent_scope("planner"):
                    raise LookupError("no such product")
            for i in range(3):
                yield f"data: fallback {i}\n\n"

        return sse(body())

    async def unavailable(request: Any) -> Any:
        return JSONResponse({"error": "maintenance"}, status_code=503)

    async def health(request: Any) -> Any:
        return PlainTextResponse("ok")

    endpoints = {
        "happy": happy,
        "happy-json": happy_json,
        "slow-stream": slow_stream,
        "wait-first": wait_first,
        "raise-before": raise_before,
        "raise-mid": raise_mid,
        "llm-raise": llm_raise,
        "llm-raise-handled": llm_raise_handled,
        "llm-hang": llm_hang,
        "llm-block": llm_block,
        "llm-slow": llm_slow,
        "empty": empty,
        "agent-error": agent_error,
        "agent-error-stream": agent_error_stream,
        "unavailable": unavailable,
        **corpus_agents.endpoints(),
    }
    routes = [Route(f"/chat/{name}", fn) for name, fn in endpoints.items()]
    routes.append(Route("/health", health))

    @contextlib.asynccontextmanager
    async def lifespan(app: Any) -> Any:
        yield
        cvdiag.flush()

    app = Starlette(routes=routes, lifespan=lifespan)
    if wrap == "outer":
        return cvdiag.CvdiagMiddleware(app, slug=SLUG, exclude_paths=("/health",))
    app.add_middleware(cvdiag.CvdiagMiddleware, slug=SLUG, exclude_paths=("/health",))
    return app


def serve(wrap: str, tier: str, port: int, log: str) -> None:
    """The server side of a scenario run: cvdiag writes to ``log`` (NDJSON)."""
    cvdiag.configure(enabled=True, tier=tier, environ={"CVDIAG_ENV": "test"}, stdout=False, file=log)
    cvdiag.instrument_httpx(llm=True, heartbeat_s=HEARTBEAT_S)  # the agent scenarios' provider calls
    uvicorn.run(build_app(wrap), host="127.0.0.1", port=port, log_level="critical", lifespan="on")


class Server:
    """``serve`` in a subprocess on a free loopback port, its log in ``log``."""

    def __init__(self, wrap: str, tier: str, log: Path) -> None:
        self.port = free_port()
        self.log = log
        self.base = f"http://127.0.0.1:{self.port}"
        cmd = [sys.executable, __file__, "--app", wrap, "--tier", tier, "--port", str(self.port), "--log", str(log)]
        self.proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        # The probe asks for /health/nothing: under the excluded /health, so it writes no envelope.
        wait_until_serving(f"{self.base}/health", self.proc)

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)  # graceful: lifespan shutdown flushes the log
            try:
                self.proc.wait(timeout=15)
            except Exception:
                self.proc.kill()
                self.proc.wait()

    def kill(self) -> None:
        """``kill -9``: nothing is flushed, no terminal is written."""
        os.kill(self.proc.pid, signal.SIGKILL)
        self.proc.wait()


def read_log(path: Path) -> list[dict]:
    """The envelopes of a server's log; a line cut by ``kill -9`` is skipped."""
    if not path.exists():
        return []
    out = []
    for line in path.read_text(encoding="utf-8").splitlines():
        try:
            out.append(json.loads(line))
        except ValueError:
            continue
    return out


def wait_for(server: Server, test_id: str, boundary: str, count: int = 1, timeout: float = 15.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        seen = [e for e in read_log(server.log) if e.get("test_id") == test_id and e.get("boundary") == boundary]
        if len(seen) >= count:
            return
        time.sleep(0.02)
    raise RuntimeError(f"{test_id}: no {count} x {boundary} in the log")


# Drivers: what the client does. Each takes the server, the test id and the endpoint's name.
Driver = Callable[[Server, str, str], None]


def read_whole(server: Server, test_id: str, name: str) -> None:
    # A stream that breaks off mid-body is a scenario, not a failure of the driver.
    with contextlib.suppress(httpx.HTTPError):
        httpx.get(f"{server.base}/chat/{name}", headers={"x-test-id": test_id}, timeout=30)


def hang_up_after_first_chunk(server: Server, test_id: str, name: str) -> None:
    with (
        httpx.Client(timeout=30) as client,
        client.stream("GET", f"{server.base}/chat/{name}", headers={"x-test-id": test_id}) as response,
    ):
        for _ in response.iter_raw():
            break  # closing the stream here drops the connection mid-body
    wait_for(server, test_id, "backend.sse.aborted")


def give_up_before_first_byte(server: Server, test_id: str, name: str) -> None:
    try:
        with (
            httpx.Client(timeout=httpx.Timeout(30, read=0.4)) as client,
            client.stream("GET", f"{server.base}/chat/{name}", headers={"x-test-id": test_id}) as response,
        ):
            for _ in response.iter_raw():
                break
    except httpx.ReadTimeout:
        pass
    wait_for(server, test_id, "backend.sse.aborted")


def kill_when(boundary: str, count: int = 1, settle: float = 0.0) -> Driver:
    """A driver that starts the request, waits for ``boundary`` in the log, then kill -9s."""

    def drive(server: Server, test_id: str, name: str) -> None:
        def request() -> None:
            try:
                with (
                    httpx.Client(timeout=60) as client,
                    client.stream("GET", f"{server.base}/chat/{name}", headers={"x-test-id": test_id}) as response,
                ):
                    for _ in response.iter_raw():
                        pass
            except httpx.HTTPError:
                pass  # the server died under us: that is the scenario

        thread = threading.Thread(target=request, daemon=True)
        thread.start()
        wait_for(server, test_id, boundary, count)
        time.sleep(settle)
        server.kill()
        thread.join(timeout=10)

    drive.kills = True  # type: ignore[attr-defined]
    return drive


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--app", choices=("inner", "outer"), default="inner")
    parser.add_argument("--tier", default="debug")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--log", required=True)
    args = parser.parse_args(argv)
    serve(args.app, args.tier, args.port, args.log)
    return 0


if __name__ == "__main__":
    sys.exit(main())
