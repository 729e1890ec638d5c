"""Inputs that used to hang, grow without bound or read nothing, given to the real ``cvdiag``.

FIFOs, ``/dev/zero`` (on stdin and by name), endless lines, a cut ``.gz``, a dangling
symlink, a stdin spool killed by SIGTERM. Every run sets ``CVDIAG_TRACEBACK`` so that a
crash shows its traceback instead of passing for a clean "nothing found", and every test
asserts what a user sees (rows, envelopes, the note), never an exit code alone.
"""

from __future__ import annotations

import gzip
import json
import os
import re
import signal
import subprocess
import threading
import time
import zlib
from pathlib import Path
from typing import Any

import pytest
from cvdiag_cli import command, run
from logkit import TID_ABORT, TID_OK, aborted, compact, happy

CRASH = {"CVDIAG_TRACEBACK": "1"}
LONG_LINE = "line longer than 8 MiB"
#: Far above what the bounded reader needs (about 100 MB), far below what the
#: unbounded one reached on /dev/zero in the same time (about 900 MB in 6 s).
RSS_BOUND_MB = 250


def lines_of(*envs: dict[str, Any]) -> bytes:
    return "".join(f"CVDIAG {compact(e)}\n" for e in envs).encode()


def rows_by_id(out: str) -> dict[str, dict[str, Any]]:
    return {row["test_id"]: row for row in json.loads(out)}


def clean(err: str) -> str:
    assert "Traceback" not in err and "internal error" not in err, err
    return err


def feed_fifo(path: Path, data: bytes) -> threading.Thread:
    """A writer on the FIFO, as ``<(zcat log.gz)`` would be: opens, writes, closes."""

    def write() -> None:
        with path.open("wb") as fh:
            fh.write(data)

    t = threading.Thread(target=write, daemon=True)
    t.start()
    return t


# -- what is not a regular file ----------------------------------------------------------


def test_a_fifo_in_a_directory_is_skipped_with_a_note_and_the_rest_is_read(tmp_path: Path) -> None:
    (tmp_path / "app.log").write_bytes(lines_of(*happy()))
    os.mkfifo(tmp_path / "pipe")  # nobody writes: opening it would block forever
    for cmd in (["tests", "--json"], ["grep"]):
        r = run(*cmd, tmp_path, env=CRASH, timeout=60)
        err = clean(r.err)
        assert f"skipped {tmp_path / 'pipe'}: a FIFO, not a regular file" in err
        if cmd[0] == "tests":
            assert rows_by_id(r.out)[TID_OK]["events"] == len(happy())
        else:
            assert len(r.out.splitlines()) == len(happy())


def test_a_dangling_symlink_in_a_directory_is_skipped_and_the_other_files_are_read(tmp_path: Path) -> None:
    """As in /var/log/containers after a pod is deleted."""
    (tmp_path / "a-pod.log").symlink_to(tmp_path / "gone" / "0.log")
    (tmp_path / "b-pod.log").write_bytes(lines_of(*happy()))
    (tmp_path / "c-pod.log").write_bytes(lines_of(*aborted()))
    r = run("grep", tmp_path, env=CRASH)
    err = clean(r.err)
    assert f"skipped {tmp_path / 'a-pod.log'}: a broken symbolic link" in err
    assert sorted(json.loads(x)["test_id"] for x in r.out.splitlines()) == sorted(
        [TID_OK] * len(happy()) + [TID_ABORT] * len(aborted())
    )


@pytest.mark.parametrize(
    "cmd", [["tests", "--json"], ["tests", "--json", "--no-class"], ["grep"], ["timeline", "--json", TID_OK]]
)
def test_a_fifo_named_on_the_command_line_is_read_as_a_stream(tmp_path: Path, cmd: list[str]) -> None:
    """Process substitution (``cvdiag tests <(zcat log.gz)``) hands cvdiag a FIFO."""
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    writer = feed_fifo(fifo, lines_of(*happy(), *aborted()))
    r = run(*cmd, fifo, env=CRASH, timeout=60)
    writer.join(5)
    clean(r.err)
    if cmd[0] == "tests":
        rows = rows_by_id(r.out)
        assert (rows[TID_OK]["events"], rows[TID_ABORT]["terminal"]) == (len(happy()), "aborted")
    elif cmd[0] == "grep":
        assert len(r.out.splitlines()) == len(happy()) + len(aborted())
    else:
        assert [e["boundary"] for e in json.loads(r.out)["events"]] == [e["boundary"] for e in happy()]


def test_a_device_named_on_the_command_line_is_refused_plainly() -> None:
    r = run("grep", "/dev/zero", env=CRASH, timeout=60)
    assert clean(r.err).strip() == "cvdiag: cannot read /dev/zero: a character device, not a log file"
    assert (r.code, r.out) == (1, "")


# -- endless input: bounded memory and disk ------------------------------------------------


def _vm_hwm_mb(pid: int) -> float:
    """Peak resident set of a running process, from the kernel's own high-water mark."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    raise AssertionError("no VmHWM")


def _open_spools(pid: int) -> list[tuple[str, int]]:
    """(link target, size) of every spool file the process holds open."""
    found = []
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            target = os.readlink(f"/proc/{pid}/fd/{fd}")
            if "cvdiag-stdin-" in target:
                found.append((target, os.stat(f"/proc/{pid}/fd/{fd}").st_size))
        except OSError:
            continue
    return found


@pytest.mark.parametrize("cmd", ["grep", "stats", "validate", "tests"])
def test_endless_zeros_on_stdin_keep_memory_and_disk_bounded(tmp_path: Path, cmd: str) -> None:
    """``cvdiag CMD < /dev/zero`` is one endless line: it is skipped as it streams by
    (a note says so at once), memory stays flat, the spool of ``tests`` stays empty, and
    SIGTERM leaves nothing in $TMPDIR."""
    spool_dir = tmp_path / "tmp"
    spool_dir.mkdir()
    env = {k: v for k, v in os.environ.items() if k != "NO_COLOR"} | CRASH | {"TMPDIR": str(spool_dir)}
    err_path = tmp_path / "err"
    with open("/dev/zero", "rb") as zeros, err_path.open("wb") as err:
        proc = subprocess.Popen([*command(), cmd], stdin=zeros, stdout=subprocess.DEVNULL, stderr=err, env=env)
    try:
        peak = spooled = 0.0
        deadline = time.monotonic() + 4
        while time.monotonic() < deadline and proc.poll() is None:
            peak = max(peak, _vm_hwm_mb(proc.pid))
            spooled = max([spooled, *(size for _, size in _open_spools(proc.pid))])
            time.sleep(0.2)
        assert proc.poll() is None, f"exited early: {err_path.read_text()}"
        peak = max(peak, _vm_hwm_mb(proc.pid))
        proc.send_signal(signal.SIGTERM)
        proc.wait(30)
    finally:
        proc.kill()
        proc.wait()
    assert peak < RSS_BOUND_MB, f"peak RSS {peak:.0f} MB"
    assert spooled < 1 << 20, f"spooled {spooled} bytes"
    assert f"cvdiag: <stdin>: a {LONG_LINE}; skipping to its end" in clean(err_path.read_text())
    assert list(spool_dir.iterdir()) == []


def test_sigterm_while_spooling_stdin_leaves_nothing_in_tmpdir(tmp_path: Path) -> None:
    spool_dir = tmp_path / "tmp"
    spool_dir.mkdir()
    env = {k: v for k, v in os.environ.items() if k != "NO_COLOR"} | CRASH | {"TMPDIR": str(spool_dir)}
    proc = subprocess.Popen(
        [*command(), "tests"], stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env
    )
    try:
        assert proc.stdin is not None
        proc.stdin.write(lines_of(*happy()) * 200)  # and the pipe stays open: still spooling
        proc.stdin.flush()
        deadline = time.monotonic() + 30
        while not _open_spools(proc.pid) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert _open_spools(proc.pid), "never spooled"
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=30)
    finally:
        proc.kill()
        proc.wait()
    clean(err.decode())
    assert list(spool_dir.iterdir()) == []


def test_a_stdin_bigger_than_the_spool_limit_is_refused_plainly(tmp_path: Path) -> None:
    spool_dir = tmp_path / "tmp"
    spool_dir.mkdir()
    data = lines_of(*happy()) * 100  # about 150 KB
    r = run("tests", stdin=data, env=CRASH | {"TMPDIR": str(spool_dir), "CVDIAG_SPOOL_MAX_BYTES": "50000"})
    assert clean(r.err).strip() == (
        "cvdiag: <stdin> is bigger than the 50000 bytes cvdiag may copy to $TMPDIR "
        "(CVDIAG_SPOOL_MAX_BYTES): save it to a file and give its path"
    )
    assert (r.code, r.out) == (1, "")
    assert list(spool_dir.iterdir()) == []
    # Under the limit it is read as before.
    ok = run("tests", "--json", stdin=data, env=CRASH | {"CVDIAG_SPOOL_MAX_BYTES": str(len(data) + 1)})
    assert rows_by_id(ok.out)[TID_OK]["events"] == 100 * len(happy())


@pytest.mark.parametrize("via", ["file", "stdin"])
def test_an_endless_line_is_one_malformed_line_and_the_rest_still_reads(tmp_path: Path, via: str) -> None:
    endless = b"CVDIAG {" + b"x" * (9 << 20)  # a marker, then 9 MiB without a newline
    data = endless + b"\n" + lines_of(*happy())
    path = tmp_path / "app.log"
    path.write_bytes(data)
    args: list[str | Path] = ["validate", "--json"]
    r = run(*args, path, env=CRASH) if via == "file" else run(*args, stdin=data, env=CRASH)
    clean(r.err)
    report = json.loads(r.out)
    assert (report["checked"], report["malformed"]) == (len(happy()), 1)
    assert [(p["line"], p["reason"]) for p in report["problems"]] == [(1, f"{LONG_LINE} (skipped to its end)")]
    rows = run("tests", "--json", *([path] if via == "file" else []), stdin=None if via == "file" else data, env=CRASH)
    assert rows_by_id(rows.out)[TID_OK]["events"] == len(happy())


# -- a cut .gz -------------------------------------------------------------------------------


def _cut_gzip(tmp_path: Path, n: int = 300) -> tuple[Path, bytes]:
    envs = [e for k in range(n) for e in happy(f"0190a9c0-1a2b-7c3d-8e4f-{k:012x}", k)]
    data = gzip.compress(lines_of(*envs))
    cut = data[: len(data) * 2 // 3]
    path = tmp_path / "app.log.gz"
    path.write_bytes(cut)
    # What `zcat app.log.gz` writes before it reports the cut: every byte it could decompress.
    return path, zlib.decompressobj(wbits=31).decompress(cut)


def test_a_cut_gzip_yields_every_line_it_held_and_says_it_was_cut(tmp_path: Path) -> None:
    path, unzipped = _cut_gzip(tmp_path)
    whole = unzipped[: unzipped.rfind(b"\n") + 1].count(b"\n")  # the last line is cut
    assert whole > 1000
    r = run("grep", path, env=CRASH)
    assert len(r.out.splitlines()) == whole
    assert f"cvdiag: {path} is cut: read what it held" in clean(r.err)
    assert run("grep", stdin=unzipped, env=CRASH).out == r.out  # as `zcat app.log.gz | cvdiag grep`
    report = json.loads(run("validate", "--json", path, env=CRASH).out)
    assert report["checked"] == whole
    reasons = [p["reason"] for p in report["problems"]]
    assert reasons == ["cut or not JSON", "the file ends early: its compressed data is cut"]
    assert report["malformed"] == 2


def test_a_cut_gzip_on_stdin_keeps_what_it_held(tmp_path: Path) -> None:
    path, unzipped = _cut_gzip(tmp_path)
    r = run("tests", "--json", stdin=path.read_bytes(), env=CRASH)
    assert "cvdiag: <stdin> is cut: read what it held" in clean(r.err)
    held = set(re.findall(rb'"test_id":"([^"]+)"', unzipped[: unzipped.rfind(b"\n")]))
    assert set(rows_by_id(r.out)) == {t.decode() for t in held}


# -- numbers no 64-bit field can hold ------------------------------------------------------


def test_numbers_past_64_bits_or_infinity_never_break_an_output(tmp_path: Path) -> None:
    """Valid JSON can hold 10**24 bytes or two durations of 1e308 (which add up to inf)."""
    ok = happy()
    cut = aborted()
    for env in cut:
        if env["boundary"] == "backend.sse.aborted":
            env["metadata"]["bytes_before_abort"] = 10**24
        if env["boundary"] == "backend.llm.call.response":
            env["duration_ms"] = 1e308
    cut.append({**cut[-1], "boundary": "backend.llm.call.response", "duration_ms": 1e308, "outcome": "ok"})
    log = tmp_path / "app.log"
    log.write_text("".join(f"CVDIAG {json.dumps(e, separators=(',', ':'))}\n" for e in (*ok, *cut)))
    page = tmp_path / "report.html"

    report = run("report", log, "-o", page, env=CRASH)
    clean(report.err)
    assert TID_ABORT in page.read_text()
    diagnosed = run("diagnose", "--all", "--json", log, env=CRASH)
    clean(diagnosed.err)
    assert {d["test_id"] for d in json.loads(diagnosed.out)} == {TID_OK, TID_ABORT}
    compared = run("compare", TID_OK, TID_ABORT, log, "--json", env=CRASH)
    clean(compared.err)
    assert json.loads(compared.out)["first_divergence"]
    junit = run("tests", "--format", "junit", log, env=CRASH)
    clean(junit.err)
    assert junit.out.count("<testcase") == 2
    timeline = run("timeline", "--json", TID_ABORT, log, env=CRASH)
    clean(timeline.err)
    assert any(e.get("metadata", {}).get("bytes_before_abort") == 1e24 for e in json.loads(timeline.out)["events"])
