"""Streams under load on uvicorn, a share of the clients hanging up (issue 35).

A real uvicorn serves an instrumented Starlette app in one process: each request a
server-sent stream of ``--seconds`` (a chunk every 0.1 s, as an agent streams tokens).
Clients in another process open ``--streams`` of them, ``--at-once`` at a time; a
``--hangups`` share closes its socket after the first chunk, the rest read to the end.
Then the server's log is read: every hang-up must end in ``backend.sse.aborted``, every
whole read in ``backend.response.complete``, however busy the loop was.

    python tools/load_hangups.py                          # the issue's size: 5,000 x 2 s, 1,000 at a time
    python tools/load_hangups.py --streams 300 --at-once 100

Prints one line of counts and exits 1 when a stream ended in the wrong terminal.
``tests/test_load_hangups.py`` runs it at a size for a two-core machine.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

CHUNK_EVERY_S = 0.1
TERMINALS = ("backend.response.complete", "backend.sse.aborted")


# -- the server (its own process) ------------------------------------------------------


def _burn(ms: float) -> None:
    """Keep the loop busy for ``ms`` milliseconds of CPU (parsing, tokenizing, ...)."""
    end = time.perf_counter() + ms / 1000
    while time.perf_counter() < end:
        pass


def serve(port: int, seconds: float, busy_ms: float) -> None:
    """uvicorn with the instrumented app until SIGINT; the log goes where CVDIAG_FILE says."""
    import uvicorn
    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import PlainTextResponse, StreamingResponse
    from starlette.routing import Route

    import cvdiag

    async def stream(request: Request) -> StreamingResponse:
        async def body():  # type: ignore[no-untyped-def]
            for i in range(max(1, round(seconds / CHUNK_EVERY_S))):
                yield f"event: token\ndata: {i}\n\n".encode()
                _burn(busy_ms)  # what an agent does between tokens, holding the loop
                await asyncio.sleep(CHUNK_EVERY_S)

        return StreamingResponse(body(), media_type="text/event-stream")

    async def ready(request: Request) -> PlainTextResponse:
        return PlainTextResponse("ok")

    app = Starlette(routes=[Route("/stream", stream), Route("/ready", ready)])
    app.add_middleware(cvdiag.CvdiagMiddleware, slug="load", exclude_paths=["/ready"])
    with open(os.environ["LOAD_TRUTH"], "a", buffering=1) as truth:
        uvicorn.run(
            ServerRecord(app, truth), host="127.0.0.1", port=port, log_level="warning", lifespan="off", backlog=4096
        )


class ServerRecord:
    """Outside cvdiag: what uvicorn itself says of each response once the app returned,
    ``complete`` (its last byte handed to the socket) or ``gone`` (the client left first,
    and uvicorn dropped the rest). The truth cvdiag's terminal must agree with."""

    def __init__(self, app, out) -> None:  # type: ignore[no-untyped-def]
        self.app, self.out = app, out

    async def __call__(self, scope, receive, send) -> None:  # type: ignore[no-untyped-def]
        await self.app(scope, receive, send)
        cycle = getattr(send, "__self__", None)  # uvicorn's RequestResponseCycle
        test_id = dict(scope.get("headers") or ()).get(b"x-test-id")
        if test_id and cycle is not None:
            self.out.write(f"{test_id.decode()} {'complete' if cycle.response_complete else 'gone'}\n")


# -- the clients (another process) ------------------------------------------------------


async def _one(port: int, test_id: str, hang_up: bool, lag: float) -> str:
    """One stream: ``hung-up`` after its first chunk (and ``lag`` seconds: a busy client
    acts late), ``read`` to its end, or what failed."""
    try:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
    except OSError as exc:
        return f"connect: {type(exc).__name__}"
    try:
        writer.write(
            f"GET /stream HTTP/1.1\r\nhost: load\r\nx-test-id: {test_id}\r\nconnection: close\r\n\r\n".encode()
        )
        head = await reader.readuntil(b"\r\n\r\n")
        if b" 200 " not in head.split(b"\r\n", 1)[0]:
            return "status"
        first = await reader.readuntil(b"\n\n")  # the first chunk (chunked framing around it)
        if hang_up:
            await asyncio.sleep(lag)
            return "hung-up" if first else "no chunk"
        while await reader.read(65536):
            pass
        return "read"
    except (OSError, asyncio.IncompleteReadError, asyncio.LimitOverrunError) as exc:
        return f"client: {type(exc).__name__}"
    finally:
        writer.close()  # a hang-up: the socket closed with the stream still running


async def _clients(port: int, ids: list[tuple[str, bool, float]], at_once: int) -> Counter[str]:
    gate = asyncio.Semaphore(at_once)

    async def limited(test_id: str, hang_up: bool, lag: float) -> str:
        async with gate:
            return await _one(port, test_id, hang_up, lag)

    return Counter(await asyncio.gather(*(limited(*one) for one in ids)))


def clients(port: int, plan: Path, at_once: int) -> None:
    ids = [(t, h, lag) for t, h, lag in json.loads(plan.read_text())]
    print(json.dumps(asyncio.run(_clients(port, ids, at_once))), flush=True)


# -- the run ---------------------------------------------------------------------------


@dataclass
class Result:
    """cvdiag's terminal against uvicorn's own record of each response, and the clients."""

    #: (uvicorn's record, cvdiag's terminal) -> streams
    pairs: Counter[tuple[str, str]] = field(default_factory=Counter)
    clients: dict[str, int] = field(default_factory=dict)
    seconds: float = 0.0

    @property
    def wrong(self) -> int:
        """Streams whose terminal says the opposite of what the server did: a response
        uvicorn dropped written as complete, or one it completed written as aborted."""
        right = {("gone", "backend.sse.aborted"), ("complete", "backend.response.complete")}
        return sum(n for pair, n in self.pairs.items() if pair not in right)

    @property
    def gone_as_complete(self) -> int:
        return self.pairs[("gone", "backend.response.complete")]

    @property
    def gone(self) -> int:
        return sum(n for (record, _), n in self.pairs.items() if record == "gone")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _wait_ready(port: int, proc: subprocess.Popen[bytes], timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError("the server exited")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1) as s:
                s.sendall(b"GET /ready HTTP/1.1\r\nhost: load\r\nconnection: close\r\n\r\n")
                if s.recv(64).startswith(b"HTTP/1.1 200"):
                    return
        except OSError:
            time.sleep(0.05)
    raise RuntimeError("the server did not start")


def _terminals(log: Path) -> dict[str, str]:
    """test id -> its terminal boundary, from the server's log."""
    found: dict[str, str] = {}
    for line in log.read_text(errors="replace").splitlines():
        at = line.find("{")  # the file sink writes the bare JSON, stdout after "CVDIAG "
        if at < 0:
            continue
        env = json.loads(line[at:])
        if env.get("boundary") in TERMINALS:
            found[env["test_id"]] = env["boundary"]
    return found


def run(
    streams: int,
    at_once: int,
    hangups: float,
    seconds: float,
    busy_ms: float = 0.0,
    lag: tuple[float, float] = (0.0, 0.0),
    seed: int = 35,
) -> Result:
    """Serve, drive the clients, stop the server, and read what it wrote."""
    rng = random.Random(seed)
    plan = [(f"load-{i:05d}", rng.random() < hangups, rng.uniform(*lag)) for i in range(streams)]
    port = _free_port()
    with tempfile.TemporaryDirectory() as tmp:
        log, plan_file, truth = Path(tmp) / "server.log", Path(tmp) / "plan.json", Path(tmp) / "truth.txt"
        plan_file.write_text(json.dumps(plan))
        env = {
            **os.environ, "CVDIAG_ENABLED": "1", "CVDIAG_STDOUT": "0", "CVDIAG_FILE": str(log), "LOAD_TRUTH": str(truth)
        }  # fmt: skip
        me = str(Path(__file__).resolve())
        server = subprocess.Popen([sys.executable, me, "serve", str(port), str(seconds), str(busy_ms)], env=env)
        try:
            _wait_ready(port, server)
            start = time.monotonic()
            out = subprocess.run(
                [sys.executable, me, "clients", str(port), str(plan_file), str(at_once)],
                capture_output=True, text=True, check=True, timeout=900,
            ).stdout  # fmt: skip
            took = time.monotonic() - start
            time.sleep(seconds + 1)  # streams whose client left run to their end, then write their terminal
        finally:
            server.send_signal(signal.SIGINT)
            try:
                server.wait(30)
            except subprocess.TimeoutExpired:
                server.kill()
                server.wait()
        terminals = _terminals(log)
        records = dict(line.split() for line in truth.read_text().splitlines())
    result = Result(clients=json.loads(out.strip().splitlines()[-1]), seconds=took)
    for test_id, _, _ in plan:
        result.pairs[(records.get(test_id, "none"), terminals.get(test_id, "none"))] += 1
    return result


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="mode")
    s = sub.add_parser("serve")
    s.add_argument("port", type=int)
    s.add_argument("seconds", type=float)
    s.add_argument("busy_ms", type=float)
    c = sub.add_parser("clients")
    c.add_argument("port", type=int)
    c.add_argument("plan", type=Path)
    c.add_argument("at_once", type=int)
    p.add_argument("--streams", type=int, default=5000)
    p.add_argument("--at-once", type=int, default=1000)
    p.add_argument("--hangups", type=float, default=0.3, help="share of clients that hang up after the first chunk")
    p.add_argument("--seconds", type=float, default=2.0, help="how long each stream runs")
    p.add_argument("--busy-ms", type=float, default=0.0, help="CPU the app spends per chunk, holding the loop")
    p.add_argument(
        "--lag", type=float, nargs=2, default=None, metavar=("FROM", "TO"),
        help="a hang-up comes this many seconds after the first chunk, spread evenly (default: 0 to --seconds)",
    )  # fmt: skip
    a = p.parse_args()
    if a.mode == "serve":
        serve(a.port, a.seconds, a.busy_ms)
        return
    if a.mode == "clients":
        clients(a.port, a.plan, a.at_once)
        return
    lag = (0.0, a.seconds) if a.lag is None else tuple(a.lag)
    r = run(a.streams, a.at_once, a.hangups, a.seconds, a.busy_ms, lag)
    pairs = ", ".join(f"{rec} -> {term.removeprefix('backend.')}: {n}" for (rec, term), n in sorted(r.pairs.items()))
    print(
        f"{a.streams} streams of {a.seconds:g} s, {a.at_once} at a time, {a.hangups:.0%} hanging up "
        f"(after the first chunk and {lag[0]:g} to {lag[1]:g} s), {a.busy_ms:g} ms of CPU a chunk, {r.seconds:.1f} s; "
        f"uvicorn's record -> cvdiag's terminal: {pairs}; clients {r.clients}; "
        f"hang-ups written as complete: {r.gone_as_complete} of {r.gone}; wrong terminal: {r.wrong}"
    )
    sys.exit(1 if r.wrong else 0)


if __name__ == "__main__":
    main()
