"""The sinks where a user meets them: a pipe shared by gunicorn workers, a stdout that
cannot encode, a log file that is rotated, removed or runs out of space."""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import io
import os
import signal
import socket
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import httpx
import orjson
import pytest
from emitkit import capture
from serverkit import free_port

import cvdiag

APP = textwrap.dedent(
    """
    from starlette.applications import Starlette
    from starlette.responses import JSONResponse
    from starlette.routing import Route

    import cvdiag

    async def chat(request):
        for step in range(10):  # a burst of 20 lines of about 1.6 KiB per request
            async with cvdiag.agent_scope(f"planner-{request.query_params['n']}-{step}-" + "-" * 1500):
                pass
        return JSONResponse({"ok": True})

    app = cvdiag.CvdiagMiddleware(Starlette(routes=[Route("/chat", chat)]), slug="gw")
    """
)


def _clean_env(**extra: str) -> dict[str, str]:
    return {**{k: v for k, v in os.environ.items() if not k.startswith("CVDIAG")}, **extra}


class SlowReader(threading.Thread):
    """Drains a pipe a few KiB at a time, so that writers find it full and block."""

    def __init__(self, fd: int, chunk: int = 1024, pause: float = 0.0005) -> None:
        super().__init__(daemon=True)
        self.fd, self.chunk, self.pause = fd, chunk, pause
        self.data = bytearray()

    def wait_for(self, needle: bytes, count: int, timeout: float = 60) -> None:
        """Until ``needle`` was read ``count`` times: the workers' queues have drained."""
        deadline = time.monotonic() + timeout
        while bytes(self.data).count(needle) < count and time.monotonic() < deadline:
            time.sleep(0.05)

    def run(self) -> None:
        while block := os.read(self.fd, self.chunk):
            self.data += block
            time.sleep(self.pause)


async def _hammer(base: str, test_ids: list[str], concurrency: int) -> None:
    limits = httpx.Limits(max_connections=concurrency)
    async with httpx.AsyncClient(base_url=base, limits=limits, timeout=30) as client:
        gate = asyncio.Semaphore(concurrency)

        async def one(i: int, test_id: str) -> None:
            # connection: close makes every request a new accept, so both workers serve (and write) at once
            headers = {"x-test-id": test_id, "via": "1.1 " + "v" * 200, "connection": "close"}
            async with gate:
                response = await client.get(f"/chat?n={i}", headers=headers)
                assert response.status_code == 200

        await asyncio.gather(*(one(i, t) for i, t in enumerate(test_ids)))


def _wait_until_listening(port: int, proc: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        assert proc.poll() is None, "gunicorn exited early"
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.05)
    raise AssertionError("gunicorn did not start")


def test_two_gunicorn_workers_on_one_slow_pipe_never_tear_a_line(tmp_path: Path):
    (tmp_path / "pipeapp.py").write_text(APP)
    port = free_port()
    read_fd, write_fd = os.pipe()
    fcntl.fcntl(write_fd, fcntl.F_SETPIPE_SZ, 4096)  # one page: a slow reader keeps it full
    workers = ["-w", "2", "-k", "uvicorn.workers.UvicornWorker", "-b", f"127.0.0.1:{port}", "--keep-alive", "60"]
    proc = subprocess.Popen(
        [sys.executable, "-m", "gunicorn", "pipeapp:app", *workers, "--chdir", str(tmp_path), "--log-level", "warning"],
        stdout=write_fd,
        stderr=subprocess.PIPE,
        env=_clean_env(CVDIAG_ENABLED="1", CVDIAG_TIER="verbose", PYTHONWARNINGS="ignore::DeprecationWarning"),
    )
    os.close(write_fd)
    reader = SlowReader(read_fd)
    reader.start()
    try:
        _wait_until_listening(port, proc)
        test_ids = [f"pipe-{i}" for i in range(100)]
        asyncio.run(_hammer(f"http://127.0.0.1:{port}", test_ids, concurrency=64))
        reader.wait_for(b'"boundary":"backend.response.complete"', len(test_ids))
    finally:
        proc.send_signal(signal.SIGTERM)
        _, stderr = proc.communicate(timeout=60)
        reader.join(60)
        os.close(read_fd)
    lines = bytes(reader.data).splitlines()
    torn = [line[:120] for line in lines if not line.startswith(b"CVDIAG {") or not _parses(line[7:])]
    assert torn == [], f"{len(torn)} torn lines of {len(lines)}; stderr: {stderr.decode()[-2000:]}"
    envelopes = [orjson.loads(line[7:]) for line in lines]
    completed = {e["test_id"] for e in envelopes if e["boundary"] == "backend.response.complete"}
    missing = sorted(set(test_ids) - completed)
    by_id = {t: [e["boundary"] for e in envelopes if e["test_id"] == t] for t in missing[:3]}
    accounting = [e for e in envelopes if e["boundary"].startswith("cvdiag.")]
    assert missing == [], f"{len(missing)} requests without a terminal, e.g. {by_id}; {accounting}"
    assert len({e["test_id"] for e in envelopes if e["boundary"] == "backend.agent.enter"}) == len(test_ids)


def _parses(raw: bytes) -> bool:
    try:
        orjson.loads(raw)
    except orjson.JSONDecodeError:
        return False
    return True


ENCODING_PROBE = textwrap.dedent(
    """
    import sys
    import cvdiag
    for test_id, agent in [("enc-1", "plain"), ("enc-2", "café ☕ 😀 Zürich"), ("enc-3", "plain")]:
        with cvdiag.request_context(test_id=test_id), cvdiag.agent_scope(agent):
            pass
    cvdiag.flush()
    stats = cvdiag.stats()
    print("written", stats["written"], "failed", stats.get("write_failed"), file=sys.stderr)
    """
)


@pytest.mark.parametrize("encoding", ["ascii", "cp1252"])
def test_a_stdout_that_cannot_encode_loses_no_line(encoding: str):
    env = _clean_env(CVDIAG_ENABLED="1", PYTHONIOENCODING=encoding)
    result = subprocess.run([sys.executable, "-c", ENCODING_PROBE], env=env, capture_output=True, timeout=60)
    envelopes = [orjson.loads(line.removeprefix(b"CVDIAG ")) for line in result.stdout.splitlines()]
    agents = [(e["test_id"], e["metadata"]["agent_name"]) for e in envelopes if e["boundary"] == "backend.agent.enter"]
    assert agents == [("enc-1", "plain"), ("enc-2", "café ☕ 😀 Zürich"), ("enc-3", "plain")], result.stderr
    assert len(envelopes) == 6
    assert result.stderr.decode().split() == ["written", "6", "failed", "0"]


def test_a_text_stdout_without_a_descriptor_gets_ascii_escapes_not_lost_lines():
    out = io.TextIOWrapper(io.BytesIO(), encoding="ascii")
    with capture("default") as cap, contextlib.redirect_stdout(out):
        cvdiag.configure(enabled=True, environ={}, stdout=True)
        for agent in ("plain", "café ☕ 😀", "plain"):
            with cvdiag.agent_scope(agent):
                pass
        cvdiag.flush()
        out.flush()
    lines = out.buffer.getvalue().splitlines()
    names = [orjson.loads(line[7:])["metadata"]["agent_name"] for line in lines if b"agent.enter" in line]
    assert names == ["plain", "café ☕ 😀", "plain"]
    assert len(lines) == len(cap.all()) == 6


def _agent_lines(path: Path) -> list[str]:
    return [orjson.loads(line)["metadata"]["agent_name"] for line in path.read_bytes().splitlines()]


def _emit_agents(*names: str) -> None:
    for name in names:
        cvdiag.emit("backend.agent.enter", {"agent_name": name})
    cvdiag.flush()


@pytest.mark.parametrize("rotate", ["rename", "rm"])
def test_file_sink_follows_its_path_after_rotation(tmp_path: Path, rotate: str):
    log = tmp_path / "cvdiag.ndjson"
    with capture("default", file=str(log)):
        _emit_agents("before")
        if rotate == "rename":
            log.rename(tmp_path / "cvdiag.ndjson.1")  # what logrotate does (without copytruncate)
        else:
            log.unlink()
        _emit_agents("after-1", "after-2")
    assert _agent_lines(log) == ["after-1", "after-2"]
    if rotate == "rename":
        assert _agent_lines(tmp_path / "cvdiag.ndjson.1") == ["before"]


FULL_DISK_PROBE = textwrap.dedent(
    """
    import json, resource, signal, sys
    import cvdiag
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # past the limit a write fails (EFBIG) instead of killing
    soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
    resource.setrlimit(resource.RLIMIT_FSIZE, (16_000, hard))  # the disk: 16 kB, no privilege needed

    def emit(*names):
        for name in names:
            cvdiag.emit("backend.agent.enter", {"agent_name": name})
        cvdiag.flush()

    with cvdiag.request_context(test_id="full-disk"):
        before = cvdiag.stats()
        for round_ in range(12):  # batches of lines, until the disk is full and beyond
            emit(*(f"r{round_}-{i}-" + "n" * 300 for i in range(8)))
        full = cvdiag.stats()
        resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))  # space comes back
        emit("after-space-freed")
    print(json.dumps({"before": before, "full": full}))
    """
)


def test_a_full_disk_leaves_only_whole_lines_and_counts_the_loss(tmp_path: Path):
    """A file size limit (``RLIMIT_FSIZE``) fails writes as a full disk does, with no
    privilege: the sink counts the loss, leaves no partial line, and writes again once
    space comes back."""
    log = tmp_path / "cvdiag.ndjson"
    proc = subprocess.run(
        [sys.executable, "-c", FULL_DISK_PROBE],
        env=_clean_env(CVDIAG_ENABLED="1", CVDIAG_STDOUT="0", CVDIAG_FILE=str(log), CVDIAG_TIER="default"),
        capture_output=True,
        timeout=60,
    )
    assert proc.returncode == 0, proc.stderr.decode()
    stats = orjson.loads(proc.stdout.splitlines()[-1])
    before, full = stats["before"], stats["full"]
    assert full["write_failed"] > before["write_failed"] and full["sink_errors"] > before["sink_errors"]
    data = log.read_bytes()
    assert data.endswith(b"\n")
    assert data.rindex(b"\n", 0, len(data) - 1) < 16_000  # what was written before space came back fit the limit
    names = _agent_lines(log)  # every line parses: no partial line glued onto the next
    assert names[-1] == "after-space-freed"
    assert names[0] == "r0-0-" + "n" * 300
    written = full["written"] - before["written"]
    assert len(names) - 1 == written < 12 * 8


NONBLOCKING_PROBE = textwrap.dedent(
    """
    import os, sys
    import cvdiag
    os.set_blocking(1, False)  # as some parents (node, asyncio tools) leave stdout
    with cvdiag.request_context(test_id="nb"):
        for i in range(2000):
            cvdiag.emit("backend.agent.enter", {"agent_name": f"a{i}-" + "x" * (i % 700)})
    cvdiag.flush(60)
    stats = cvdiag.stats()
    print("written", stats["written"], "failed", stats["write_failed"], file=sys.stderr)
    """
)


def test_a_non_blocking_stdout_pipe_is_waited_on_and_every_line_arrives_whole():
    read_fd, write_fd = os.pipe()
    proc = subprocess.Popen(
        [sys.executable, "-c", NONBLOCKING_PROBE],
        stdout=write_fd,
        stderr=subprocess.PIPE,
        env=_clean_env(CVDIAG_ENABLED="1", CVDIAG_QUEUE_SIZE="5000"),
    )
    os.close(write_fd)
    reader = SlowReader(read_fd)
    reader.start()
    _, stderr = proc.communicate(timeout=60)
    reader.join(60)
    os.close(read_fd)
    names = [orjson.loads(line[7:])["metadata"]["agent_name"] for line in bytes(reader.data).splitlines()]
    assert [n.split("-")[0] for n in names] == [f"a{i}" for i in range(2000)]
    assert stderr.decode().split() == ["written", "2000", "failed", "0"]


def test_a_file_ending_mid_line_gets_the_next_process_envelope_on_a_fresh_line(tmp_path: Path):
    """A writer killed mid-write leaves a partial line; the next process starts a new one."""
    log = tmp_path / "cvdiag.ndjson"
    log.write_bytes(b'{"schema_version":"1.0","test_id":"torn-by-a-kil')
    code = "import cvdiag; cvdiag.emit('backend.agent.enter', {'agent_name': 'next'}); cvdiag.flush()"
    env = {**os.environ, "CVDIAG_ENABLED": "1", "CVDIAG_FILE": str(log), "CVDIAG_STDOUT": "0", "CVDIAG_ENV": "test"}
    subprocess.run([sys.executable, "-c", code], env=env, check=True, timeout=60)
    lines = log.read_bytes().split(b"\n")
    assert lines[0] == b'{"schema_version":"1.0","test_id":"torn-by-a-kil'
    assert orjson.loads(lines[1])["metadata"]["agent_name"] == "next"
    assert lines[2:] == [b""]
