"""``cvdiag demo``: run the bundled example backend under a real uvicorn, drive four
scenarios at it over HTTP, and read the log it wrote with the CLI.

Offline, no API key, well under a minute. The HTTP client is the standard library's,
so the demo needs nothing beyond ``pip install 'cvdiag[demo]'`` (uvicorn).
"""

from __future__ import annotations

import argparse
import http.client
import os
import secrets
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from cvdiag.face.render import Out, counted

#: The LLM's slow threshold for the demo: its slow call takes ~2.5 s, not minutes.
DEMO_SLOW_S = 2.0
_START_TIMEOUT_S = 20.0


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _request(port: int, path: str, test_id: str, read_events: int | None = None) -> str:
    """GET ``path``; with ``read_events`` hang up after that many SSE events."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    try:
        conn.request("GET", path, headers={"x-test-id": test_id})
        response = conn.getresponse()
        if read_events is None:
            response.read()
            return f"HTTP {response.status}"
        seen = 0
        while seen < read_events:
            line = response.fp.readline()
            if not line:
                break
            seen += line.startswith(b"data:")
        return f"hung up after {counted(seen, 'event')}"
    finally:
        conn.close()


def _wait_until_up(port: int, server: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + _START_TIMEOUT_S
    while time.monotonic() < deadline:
        if server.poll() is not None:
            raise RuntimeError(f"the demo server exited with code {server.returncode}")
        try:
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=1)
            conn.request("GET", "/health")
            if conn.getresponse().status == 200:
                return
        except OSError:
            time.sleep(0.1)
    raise RuntimeError("the demo server did not start in time")


def _scenarios(run: str) -> list[tuple[str, str, str, int | None]]:
    """(name, test id, path, events to read before hanging up)."""
    return [
        ("a happy stream", f"demo-happy-{run}", "/chat?q=hello&tokens=5", None),
        ("a client that hangs up mid-stream", f"demo-hangup-{run}", "/chat?tokens=200&delay=0.05", 3),
        ("a server error", f"demo-error-{run}", "/chat?fail=tool&tool=calendar", None),
        ("a slow LLM call", f"demo-slow-{run}", "/chat?latency=2.5&tokens=3", None),
    ]


def _serve(log: Path, port: int) -> subprocess.Popen[bytes]:
    env = {
        **os.environ,
        "CVDIAG_ENABLED": "1",
        "CVDIAG_TIER": "verbose",
        "CVDIAG_ENV": "local",
        "CVDIAG_DEMO_HEARTBEAT_S": "0.5",
        "PYTHONUNBUFFERED": "1",
    }
    cmd = [sys.executable, "-m", "uvicorn", "cvdiag.face._demo_app:app", "--host", "127.0.0.1", "--port", str(port)]
    with log.open("wb") as out:
        return subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, env=env)


def main(argv: list[str], *, cli: Callable[[list[str]], int]) -> int:
    """Run the demo; ``cli`` is ``cvdiag.face.cli.main``, handed in so control flows one way."""
    parser = argparse.ArgumentParser(prog="cvdiag demo", description=__doc__.splitlines()[0])
    parser.add_argument("--log", type=Path, help="where to write the backend log (default: a new temp dir)")
    args = parser.parse_args(argv)
    try:
        import uvicorn  # noqa: F401
    except ImportError:
        print("cvdiag demo needs uvicorn: pip install 'cvdiag[demo]'", file=sys.stderr)
        return 1
    log = args.log or Path(tempfile.mkdtemp(prefix="cvdiag-demo-")) / "backend.log"
    log.parent.mkdir(parents=True, exist_ok=True)
    port = _free_port()
    run = secrets.token_hex(2)
    out = Out()  # every line fits the terminal: prose wraps, commands break with a backslash

    def say(text: str, indent: str = "") -> None:
        out.prose(text, indent=indent)
        out.stream.flush()

    say(f"Starting the example backend (Starlette + CvdiagMiddleware) under uvicorn on 127.0.0.1:{port}")
    server = _serve(log, port)
    try:
        _wait_until_up(port, server)
        say("Four requests, each with its own x-test-id:")
        for name, test_id, path, read_events in _scenarios(run):
            say(f"{name:<34} {test_id:<17} {_request(port, path, test_id, read_events)}", indent="  ")
        time.sleep(0.3)  # let the server notice the hang-up before it stops
    except (RuntimeError, OSError) as exc:
        print(f"cvdiag demo: {exc}; server log: {log}", file=sys.stderr)
        return 1
    finally:
        server.terminate()
        try:
            server.wait(10)
        except subprocess.TimeoutExpired:
            server.kill()
    out.line()
    say(f"The backend's log (uvicorn's lines and CVDIAG lines mixed) is {log}")
    out.line()

    hangup = f"demo-hangup-{run}"
    path, slow = str(log), str(DEMO_SLOW_S)
    out.command(["cvdiag", "tests", "--slow-s", slow, path], indent="", prompt="$")
    out.stream.flush()
    cli(["tests", "--slow-s", slow, path])
    out.line()
    out.command(["cvdiag", "timeline", hangup, path], indent="", prompt="$")
    out.stream.flush()
    cli(["timeline", hangup, path])
    out.line()
    out.line("Next, try:")
    for command, note in (
        (["cvdiag", "diagnose", "--all", "--slow-s", slow, path], ""),
        (["cvdiag", "report", "--slow-s", slow, path, "-o", "cvdiag-demo-report.html"], "open it in a browser"),
        (["cvdiag", "compare", f"demo-happy-{run}", f"demo-hangup-{run}", path], ""),
        (["cvdiag", "timeline", f"demo-error-{run}", path], ""),
        (["cvdiag", "grep", "--boundary", "backend.llm.*", path], "NDJSON: pipe it to jq"),
        (["cvdiag", "stats", path], ""),
        (["cvdiag", "validate", path], ""),
    ):
        out.command(command, note=note)
    return 0
