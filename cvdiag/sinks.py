"""Where rendered envelopes go: stdout (with the prefix), an NDJSON file, memory.

A sink receives a batch of rendered JSON lines (bytes, no newline) on the writer
thread. Sinks may raise; the writer counts and swallows it (spec section 8).
"""

from __future__ import annotations

import contextlib
import os
import sys
import threading
from typing import Any, Protocol

import orjson

from .schema import PREFIX


class Sink(Protocol):
    def write(self, lines: list[bytes]) -> None: ...

    def close(self) -> None: ...


class StdoutSink:
    """``CVDIAG {json}`` lines on whatever ``sys.stdout`` is at write time, so that
    test capture (pytest's capsys, redirect_stdout) sees them."""

    def write(self, lines: list[bytes]) -> None:
        out = sys.stdout
        if out is None:  # pythonw, or a closed stdout: nothing to write to
            return
        out.write("".join(f"{PREFIX}{line.decode()}\n" for line in lines))
        out.flush()

    def close(self) -> None:
        pass


class FileSink:
    """Bare NDJSON appended to ``path``; opened on first write, reopened after a failure."""

    def __init__(self, path: str) -> None:
        self.path = path
        self._fh: Any = None

    def write(self, lines: list[bytes]) -> None:
        if self._fh is None:
            directory = os.path.dirname(self.path)
            if directory:
                os.makedirs(directory, exist_ok=True)
            self._fh = open(self.path, "ab")  # noqa: SIM115 - kept open across batches
        try:
            self._fh.write(b"".join(line + b"\n" for line in lines))
            self._fh.flush()
        except BaseException:
            self.close()
            raise

    def close(self) -> None:
        fh, self._fh = self._fh, None
        if fh is not None:
            with contextlib.suppress(OSError):
                fh.close()


class MemorySink:
    """Keeps every line in memory, for tests and the pytest plugin."""

    def __init__(self) -> None:
        self._lines: list[bytes] = []
        self._lock = threading.Lock()

    def write(self, lines: list[bytes]) -> None:
        with self._lock:
            self._lines.extend(lines)

    def close(self) -> None:
        pass

    @property
    def lines(self) -> list[bytes]:
        with self._lock:
            return list(self._lines)

    def envelopes(self) -> list[dict[str, Any]]:
        return [orjson.loads(line) for line in self.lines]

    def clear(self) -> None:
        with self._lock:
            self._lines.clear()
