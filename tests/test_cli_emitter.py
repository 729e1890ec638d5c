"""The CLI on logs written by the real emitter: an app under uvicorn, hit over HTTP."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from cvdiag_cli import run
from serverkit import free_port, wait_until_serving

httpx = pytest.importorskip("httpx")
pytest.importorskip("uvicorn")

APP = """
import asyncio

from starlette.applications import Starlette
from starlette.responses import StreamingResponse
from starlette.routing import Route

import cvdiag


async def chat(request):
    async def body():
        async with cvdiag.agent_scope("planner"), cvdiag.llm_call("openai", "gpt-4o-mini"):
            for i in range(5):
                yield f"data: {i}\\n\\n".encode()
                await asyncio.sleep(0.01)

    return StreamingResponse(body(), media_type="text/event-stream")


async def slow(request):
    async def body():
        for i in range(500):
            yield f"data: {i}\\n\\n".encode()
            await asyncio.sleep(0.02)

    return StreamingResponse(body(), media_type="text/event-stream")


async def boom(request):
    raise RuntimeError("boom")


app = Starlette(routes=[Route("/chat", chat), Route("/slow", slow), Route("/boom", boom)])
app.add_middleware(cvdiag.CvdiagMiddleware, slug="e2e")
"""


@pytest.fixture(scope="module")
def logs(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, Path]]:
    """(stdout log, NDJSON file sink) of a uvicorn app that served three scenarios."""
    tmp = tmp_path_factory.mktemp("emitter")
    (tmp / "app.py").write_text(APP)
    stdout, sink = tmp / "stdout.log", tmp / "sink.ndjson"
    port = free_port()
    env = {
        **os.environ,
        "CVDIAG_ENABLED": "1",
        "CVDIAG_TIER": "verbose",
        "CVDIAG_ENV": "test",
        "CVDIAG_FILE": str(sink),
    }
    with stdout.open("wb") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "uvicorn", "app:app", "--port", str(port), "--log-level", "info"],
            cwd=tmp,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
        )
        try:
            base = f"http://127.0.0.1:{port}"
            wait_until_serving(base, proc)
            # A fresh connection per scenario: the server closes the one that served a 500.
            assert httpx.get(f"{base}/chat", headers={"x-test-id": "e2e-happy"}, timeout=10).status_code == 200
            assert httpx.get(f"{base}/boom", headers={"x-test-id": "e2e-boom"}, timeout=10).status_code == 500
            with httpx.stream("GET", f"{base}/slow", headers={"x-test-id": "e2e-hangup"}, timeout=10) as response:
                for i, _ in enumerate(response.iter_bytes()):
                    if i >= 2:
                        break
            time.sleep(0.5)
        finally:
            proc.send_signal(signal.SIGINT)  # graceful: the emitter drains its queue at exit
            try:
                proc.wait(15)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
    yield stdout, sink


def rows(*args: str | Path) -> dict[str, dict]:
    r = run("tests", "--json", *args)
    assert r.code == 0, r.err
    return {row["test_id"]: row for row in json.loads(r.out)}


def test_real_stdout_log_shows_each_scenarios_terminal_and_class(logs: tuple[Path, Path]) -> None:
    got = rows(logs[0])
    assert {t: (r["terminal"], r["status"]) for t, r in got.items() if t.startswith("e2e-")} == {
        "e2e-happy": ("complete", "ok"),
        "e2e-boom": ("error", "fail") if got["e2e-boom"]["terminal"] == "error" else ("complete", "fail"),
        "e2e-hangup": ("aborted", "fail"),
    }
    assert got["e2e-hangup"]["class"] == "client-disconnect"
    assert got["e2e-happy"]["class"] == "ok"


def test_the_ndjson_file_sink_reads_the_same_as_stdout(logs: tuple[Path, Path]) -> None:
    assert rows(logs[1]) == rows(logs[0])


def test_real_emitter_output_validates_strictly(logs: tuple[Path, Path]) -> None:
    r = run("validate", *logs)
    assert r.code == 0, r.out
    assert " 0 invalid, 0 malformed" in r.out


def test_timeline_of_a_real_hang_up(logs: tuple[Path, Path]) -> None:
    r = run("timeline", "e2e-hangup", logs[0])
    assert r.code == 0, r.err
    assert "verdict: client-disconnect" in r.out
    assert r.out.index("backend.request.ingress") < r.out.index("backend.sse.aborted")


def test_a_timeline_of_stdout_and_sink_together_shows_each_envelope_once(logs: tuple[Path, Path]) -> None:
    one = json.loads(run("timeline", "--json", "e2e-happy", logs[0]).out)["events"]
    both = json.loads(run("timeline", "--json", "e2e-happy", *logs).out)["events"]
    assert both == one
    assert [e["ts"] for e in both] == sorted(e["ts"] for e in both)
