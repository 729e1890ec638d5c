"""``--follow`` on a live log that is appended, rotated, recreated and truncated.

A real ``cvdiag grep --follow`` subprocess reads the file while this test plays the
application (which keeps its file open across a rename, as a process writing a log does)
and logrotate. Every envelope must show up exactly once, in order.
"""

from __future__ import annotations

import json
import os
import queue
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from cvdiag_cli import command
from logkit import compact, envelope
from test_cli_split_lines import big, docker_records, line_of

TID = "0190a9c0-1a2b-7c3d-8e4f-5a6b7c8d9e77"
QUIET_S = 1.5  # six polls of the follower: long enough for a duplicate to show up


def env(k: int) -> dict[str, Any]:
    return envelope(TID, "backend.llm.call.start", k, metadata={"seq": k})


def lines(*ks: int) -> str:
    return "".join(f"noise {k}\nCVDIAG {compact(env(k))}\n" for k in ks)


class Follower:
    """``cvdiag grep --follow`` on ``path``, its stdout read by a thread."""

    def __init__(self, path: Path) -> None:
        self.proc = subprocess.Popen(
            [*command(), "grep", "--follow", "--test-id", TID, str(path)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env={**os.environ, "CVDIAG_TRACEBACK": "1"},
        )
        self.lines: queue.Queue[bytes] = queue.Queue()
        self.seen: list[dict[str, Any]] = []
        threading.Thread(target=self._pump, daemon=True).start()

    def _pump(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.put(line)

    def wait_for(self, n: int, timeout: float = 30) -> list[dict[str, Any]]:
        """The envelopes printed so far, once there are ``n`` of them."""
        deadline = time.monotonic() + timeout
        while len(self.seen) < n:
            try:
                self.seen.append(json.loads(self.lines.get(timeout=max(0.01, deadline - time.monotonic()))))
            except queue.Empty:
                break
        assert self.proc.poll() is None, self.proc.stderr.read().decode() if self.proc.stderr else ""
        return self.seen

    def settled(self, n: int) -> list[dict[str, Any]]:
        """Exactly what was printed once ``n`` envelopes came and then nothing for a while."""
        self.wait_for(n)
        time.sleep(QUIET_S)
        return self.wait_for(len(self.seen) + self.lines.qsize(), timeout=0.1)

    def stop(self) -> str:
        self.proc.terminate()
        try:
            _, err = self.proc.communicate(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            _, err = self.proc.communicate()
        return err.decode()


@pytest.fixture
def follow() -> Iterator[Any]:
    followers: list[Follower] = []

    def start(path: Path) -> Follower:
        followers.append(Follower(path))
        return followers[-1]

    yield start
    for f in followers:
        err = f.stop()
        assert "Traceback" not in err, err


def seqs(found: list[dict[str, Any]]) -> list[int]:
    return [e["metadata"]["seq"] for e in found]


def test_a_rotated_log_is_followed_by_name_losing_nothing_and_repeating_nothing(tmp_path: Path, follow: Any) -> None:
    path = tmp_path / "app.log"
    app = path.open("a", buffering=1)  # the application's own handle, kept across the rename
    app.write(lines(0, 1, 2))
    f = follow(path)
    assert seqs(f.wait_for(3)) == [0, 1, 2]
    app.write(lines(3))
    assert seqs(f.wait_for(4)) == [0, 1, 2, 3]
    os.rename(path, tmp_path / "app.log.1")  # logrotate: rename ...
    app.write(lines(4))  # ... the app writes on to the old file until it reopens ...
    new = tmp_path / "app.log.tmp"
    new.write_text(lines(*range(5, 40)))  # ... and the new file is already bigger than the old
    os.replace(new, path)
    app.close()
    app = path.open("a", buffering=1)
    app.write(lines(40))
    assert seqs(f.settled(41)) == list(range(41))
    app.close()


def test_a_deleted_and_recreated_log_is_read_from_its_start(tmp_path: Path, follow: Any) -> None:
    path = tmp_path / "app.log"
    path.write_text(lines(0, 1))
    f = follow(path)
    assert seqs(f.wait_for(2)) == [0, 1]
    path.unlink()
    time.sleep(0.6)  # the follower polls a missing file
    path.write_text(lines(*range(2, 30)))
    assert seqs(f.settled(30)) == list(range(30))


def test_a_truncated_log_is_read_again_from_its_start(tmp_path: Path, follow: Any) -> None:
    path = tmp_path / "app.log"
    path.write_text(lines(*range(10)))
    f = follow(path)
    assert seqs(f.wait_for(10)) == list(range(10))
    with path.open("r+") as fh:  # copytruncate: same file, cut to nothing, written again
        fh.truncate(0)
    time.sleep(0.6)
    with path.open("a") as fh:
        fh.write(lines(10, 11))
    assert seqs(f.settled(12)) == list(range(12))


def test_a_docker_line_split_at_16k_is_rejoined_while_following(tmp_path: Path, follow: Any) -> None:
    path = tmp_path / "app.log"
    path.write_text(lines(0))
    f = follow(path)
    f.wait_for(1)
    whole = big(TID, 1.0)
    first, second = docker_records(line_of(whole))
    with path.open("ab") as fh:  # the runtime writes the first record, the second comes later
        fh.write(first + b"\n")
    time.sleep(0.8)
    with path.open("ab") as fh:
        fh.write(second + b"\n")
        fh.write(lines(2).encode())
    found = f.settled(3)
    assert [e["boundary"] for e in found] == [
        "backend.llm.call.start",
        "backend.debug.snapshot",
        "backend.llm.call.start",
    ]
    assert found[1]["metadata"]["blob"] == whole["metadata"]["blob"]


def test_a_line_being_written_when_the_follow_starts_is_printed_once_whole(tmp_path: Path, follow: Any) -> None:
    path = tmp_path / "app.log"
    last = f"CVDIAG {compact(env(1))}\n"
    path.write_text(lines(0) + last[:100])  # the app is in the middle of writing line 1
    f = follow(path)
    assert seqs(f.wait_for(1)) == [0]
    time.sleep(0.6)
    with path.open("a") as fh:
        fh.write(last[100:] + lines(2))
    assert seqs(f.settled(3)) == [0, 1, 2]
