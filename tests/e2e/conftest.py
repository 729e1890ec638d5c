"""The end-to-end rig: aimock (the LLM) and the example app under uvicorn, both real
processes on loopback ports, started once per session.

Without node or ``e2e/node_modules`` (``cd e2e && npm ci``) the tests skip, saying why;
with ``CVDIAG_REQUIRE_E2E=1`` (CI) that is a failure instead.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import httpx2
import pytest

from cvdiag.contract.schema import BACKEND_TERMINALS
from cvdiag.pytest_plugin.plugin import add_log

REPO = Path(__file__).resolve().parents[2]
E2E = REPO / "e2e"
LLMOCK = E2E / "node_modules" / ".bin" / "llmock"
FIXTURES = E2E / "fixtures"
#: Heartbeats every 0.2 s, so aimock's injected latency shows several of them.
HEARTBEAT_S = "0.2"
_START_TIMEOUT_S = 60.0  # a framework app imports for seconds, more on a busy CI machine
_LOG_TIMEOUT_S = 15.0


def _unavailable(reason: str) -> None:
    if os.environ.get("CVDIAG_REQUIRE_E2E", "").strip().lower() in ("1", "true", "yes", "on"):
        pytest.fail(f"end-to-end tests required (CVDIAG_REQUIRE_E2E=1) but {reason}", pytrace=False)
    pytest.skip(f"end-to-end tests skipped: {reason} (CVDIAG_REQUIRE_E2E=1 makes this a failure)")


def _wait_ready(url: str, proc: subprocess.Popen, what: str, output: Path) -> None:
    deadline = time.monotonic() + _START_TIMEOUT_S
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"{what} exited with {proc.returncode}:\n{output.read_text(errors='replace')[-2000:]}")
        try:
            if httpx2.get(url, timeout=1.0).status_code == 200:
                return
        except httpx2.TransportError:
            pass
        time.sleep(0.05)
    raise RuntimeError(f"{what} did not answer {url} within {_START_TIMEOUT_S:.0f} s")


def _stop(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=5)


@dataclass(frozen=True)
class Aimock:
    url: str

    def chaos(self, test_id: str, **config: float) -> None:
        """Install chaos for one test id only (aimock scopes it by x-test-id)."""
        response = httpx2.post(f"{self.url}/__aimock/chaos", json=config, headers={"x-test-id": test_id})
        response.raise_for_status()

    def journal(self, test_id: str) -> list[dict]:
        response = httpx2.get(f"{self.url}/__aimock/journal", params={"testId": test_id})
        response.raise_for_status()
        return response.json()


@pytest.fixture(scope="session")
def aimock(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Aimock]:
    if shutil.which("node") is None:
        _unavailable("node is not installed")
    if not LLMOCK.exists():
        _unavailable(f"{LLMOCK.relative_to(REPO)} is missing; run `cd e2e && npm ci`")
    out = tmp_path_factory.mktemp("aimock") / "aimock.log"
    with out.open("wb") as fh:
        # Port 0: the mock binds a free port and says which; no race with other suites.
        proc = subprocess.Popen(
            [str(LLMOCK), "--port", "0", "--host", "127.0.0.1", "--fixtures", str(FIXTURES), "--log-level", "info"],
            stdout=fh,
            stderr=subprocess.STDOUT,
            cwd=E2E,
        )
    try:
        deadline = time.monotonic() + _START_TIMEOUT_S
        while not (found := re.search(r"listening on (http://127\.0\.0\.1:\d+)", out.read_text(errors="replace"))):
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"aimock did not start:\n{out.read_text(errors='replace')[-2000:]}")
            time.sleep(0.05)
        url = found.group(1)
        _wait_ready(f"{url}/__aimock/health", proc, "aimock", out)
        yield Aimock(url)
    finally:
        _stop(proc)


@dataclass(frozen=True)
class ExampleServer:
    url: str
    log: Path

    def envelopes(self, test_id: str) -> list[dict]:
        """This test id's envelopes, once the server has written its terminal one.

        The server's writer thread flushes asynchronously, so this waits for the line
        that ends the request rather than reading whatever has arrived so far.
        """
        deadline = time.monotonic() + _LOG_TIMEOUT_S
        needle = f'"test_id":"{test_id}"'
        while True:
            mine = [json.loads(line[line.index("{") :]) for line in self._lines() if needle in line]
            if any(e["boundary"] in BACKEND_TERMINALS for e in mine) or time.monotonic() > deadline:
                return mine
            time.sleep(0.05)

    def _lines(self) -> list[str]:
        """Whole lines only: the server may be half-way through writing the last one."""
        complete = self.log.read_text(errors="replace").split("\n")[:-1]
        return [line for line in complete if line.startswith("CVDIAG {")]


class ServedApp:
    """An example app under uvicorn (``self.server``): its LLM lines and the CLI's verdict."""

    server: ExampleServer

    def llm_envelopes(self, test_id: str) -> tuple[list[dict], list[dict]]:
        """This test's envelopes (once its request has ended) and its LLM call responses."""
        events = self.server.envelopes(test_id)
        return events, [e for e in events if e["boundary"] == "backend.llm.call.response"]

    def diagnose(self, test_id: str, *extra: str) -> dict:
        """``cvdiag diagnose TEST_ID --json`` on the server's log, run as a user runs it."""
        result = _cvdiag_cli("diagnose", test_id, str(self.server.log), "--json", *extra)
        assert result.returncode == 0, result.stderr
        (verdict,) = json.loads(result.stdout)
        assert verdict["test_id"] == test_id
        return verdict


@contextmanager
def serve_app(app: str, env: dict[str, str], workdir: Path, config: pytest.Config) -> Iterator[ExampleServer]:
    """Run ``app`` (``module:attribute``) under real uvicorn with cvdiag on at the
    verbose tier and ``env`` added; its stdout is the log the tests read."""
    log, err = workdir / "server.log", workdir / "server.err"
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    sock.listen(64)
    port = sock.getsockname()[1]
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith("CVDIAG_")},  # only ours apply
        "CVDIAG_ENABLED": "1",
        "CVDIAG_TIER": "verbose",
        "CVDIAG_ENV": "test",
        "PYTHONUNBUFFERED": "1",
        **env,
    }
    with log.open("wb") as out, err.open("wb") as errors:
        # The socket is bound here and handed over (--fd), so the port is known and
        # nobody can take it between choosing and binding.
        proc = subprocess.Popen(
            [sys.executable, "-m", "uvicorn", app, "--fd", str(sock.fileno()), "--no-access-log"],
            stdout=out,
            stderr=errors,
            cwd=REPO,
            env=env,
            pass_fds=(sock.fileno(),),
        )
    sock.close()
    add_log(config, log)  # failure reports read the server's log, like --cvdiag-log
    try:
        url = f"http://127.0.0.1:{port}"
        _wait_ready(f"{url}/health", proc, app, err)
        yield ExampleServer(url, log)
    finally:
        _stop(proc)


@pytest.fixture(scope="session")
def example_server(aimock: Aimock, tmp_path_factory: pytest.TempPathFactory, request: pytest.FixtureRequest):
    env = {
        "OPENAI_BASE_URL": f"{aimock.url}/v1",
        "OPENAI_API_KEY": "sk-test-e2e-placeholder",
        "EXAMPLE_HEARTBEAT_S": HEARTBEAT_S,
    }
    with serve_app("examples.app:app", env, tmp_path_factory.mktemp("example"), request.config) as server:
        yield server


def _cvdiag_cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "cvdiag", *args],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=REPO,
        env={**os.environ, "NO_COLOR": "1"},
    )


@pytest.fixture(scope="session")
def cvdiag_cli():
    """Run the ``cvdiag`` command as a user would (``python -m cvdiag ARGS...``)."""
    return _cvdiag_cli
