"""Lines per second through the writer thread into each sink, end to end.

    python tools/bench_sinks.py [--lines 100000] [--rounds 5]

Emits ``--lines`` verbose envelopes (about 600 bytes each) and times emit + flush,
with the lines going to: stdout as a pipe drained by ``cat > /dev/null`` (the shared
pipe of gunicorn workers), stdout as a regular file, and the NDJSON file sink; then
the sinks' own work alone (``write`` of 512-line batches, no emit, CPU time). As a
yardstick from the same run, the floor: the same lines joined and written with one
``os.write`` per 512 (what an unbounded coalescing writer would do). Prints the
median lines/s of each (to stderr: stdout is the thing measured). Compare the
sinks' rows across commits; emit's own cost dominates every row but the floor.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable

import cvdiag

META = {"method": "POST", "path": "/api/chat/completions", "content_length": 512, "inbound_test_id_adopted": True}


def _emit_all(lines: int) -> float:
    start = time.perf_counter()
    with cvdiag.request_context(test_id="bench-sinks", slug="bench"):
        for i in range(lines):
            cvdiag.emit("backend.request.ingress", META)
            if i % 5000 == 4999:
                cvdiag.flush(60)
    cvdiag.flush(60)
    return time.perf_counter() - start


def _with_stdout_on(fd: int, lines: int) -> float:
    """Point fd 1 at ``fd`` for one run (the sink writes whatever stdout is)."""
    sys.stdout.flush()
    saved = os.dup(1)
    os.dup2(fd, 1)
    try:
        return _emit_all(lines)
    finally:
        sys.stdout.flush()
        os.dup2(saved, 1)
        os.close(saved)


def stdout_pipe(lines: int) -> float:
    cvdiag.configure(enabled=True, tier="verbose", environ={}, stdout=True)
    drain = subprocess.Popen(["cat"], stdin=subprocess.PIPE, stdout=subprocess.DEVNULL)
    try:
        return _with_stdout_on(drain.stdin.fileno(), lines)  # type: ignore[union-attr]
    finally:
        drain.stdin.close()  # type: ignore[union-attr]
        drain.wait()


def stdout_file(lines: int) -> float:
    cvdiag.configure(enabled=True, tier="verbose", environ={}, stdout=True)
    with tempfile.TemporaryFile() as fh:
        return _with_stdout_on(fh.fileno(), lines)


def file_sink(lines: int) -> float:
    with tempfile.TemporaryDirectory() as tmp:
        cvdiag.configure(enabled=True, tier="verbose", environ={}, stdout=False, file=os.path.join(tmp, "c.ndjson"))
        return _emit_all(lines)


def _batch() -> list[bytes]:
    from cvdiag.write.emitter import add_sink, remove_sink
    from cvdiag.write.sinks import MemorySink

    memory = MemorySink()
    add_sink(memory)
    cvdiag.configure(enabled=True, tier="verbose", environ={}, stdout=False)
    with cvdiag.request_context(test_id="bench-sinks", slug="bench"):
        for _ in range(512):
            cvdiag.emit("backend.request.ingress", META)
    cvdiag.flush()
    remove_sink(memory)
    return memory.lines


def sink_only_pipe(lines: int) -> float:
    """Only the sink's own work: StdoutSink.write of 512-line batches into a drained pipe."""
    from cvdiag.write.sinks import StdoutSink

    batch, sink = _batch(), StdoutSink()
    drain = subprocess.Popen(["cat"], stdin=subprocess.PIPE, stdout=subprocess.DEVNULL)
    sys.stdout.flush()
    saved = os.dup(1)
    os.dup2(drain.stdin.fileno(), 1)  # type: ignore[union-attr]
    try:
        start = time.process_time()  # CPU seconds: steadier than wall time on a busy machine
        for _ in range(lines // len(batch)):
            sink.write(batch)
        return time.process_time() - start
    finally:
        os.dup2(saved, 1)
        os.close(saved)
        drain.stdin.close()  # type: ignore[union-attr]
        drain.wait()


def sink_only_file(lines: int) -> float:
    """Only the sink's own work: FileSink.write of 512-line batches into a file."""
    from cvdiag.write.sinks import FileSink

    batch = _batch()
    with tempfile.TemporaryDirectory() as tmp:
        sink = FileSink(os.path.join(tmp, "c.ndjson"))
        start = time.process_time()
        for _ in range(lines // len(batch)):
            sink.write(batch)
        took = time.process_time() - start
        sink.close()
        return took


def floor(lines: int) -> float:
    """Render nothing, queue nothing: 512 prefixed ~600-byte lines per os.write."""
    line = b"CVDIAG " + b"x" * 600 + b"\n"
    drain = subprocess.Popen(["cat"], stdin=subprocess.PIPE, stdout=subprocess.DEVNULL)
    fd = drain.stdin.fileno()  # type: ignore[union-attr]
    start = time.perf_counter()
    for _ in range(lines // 512):
        os.write(fd, b"".join([line] * 512))
    took = time.perf_counter() - start
    drain.stdin.close()  # type: ignore[union-attr]
    drain.wait()
    return took


CASES: dict[str, Callable[[int], float]] = {
    "stdout → pipe": stdout_pipe,
    "stdout → file": stdout_file,
    "file sink": file_sink,
    "StdoutSink.write alone → pipe": sink_only_pipe,
    "FileSink.write alone": sink_only_file,
    "floor: os.write of 512 lines to a pipe": floor,
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lines", type=int, default=100_000)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    rates = {
        name: statistics.median(args.lines / fn(args.lines) for _ in range(args.rounds)) for name, fn in CASES.items()
    }
    print("| sink | lines/s (median) |", file=sys.stderr)
    print("|---|---|", file=sys.stderr)
    for name, rate in rates.items():
        print(f"| {name} | {rate:,.0f} |", file=sys.stderr)
    print(f"stats: {cvdiag.stats()}", file=sys.stderr)


if __name__ == "__main__":
    main()
