"""Where rendered envelopes go: stdout (with the prefix), an NDJSON file, memory.

A sink receives a batch of rendered JSON lines (bytes, no newline) on the writer
thread. Sinks may raise; the writer counts and swallows it (spec section 8). A sink
that wrote part of a batch raises ``LinesLost`` to say which lines did not make it.

Bytes go to the file descriptor in writes of at most ``PIPE_BUF`` that never split a
line: a pipe shared by several processes (gunicorn workers on one stdout) writes each
of them whole, so lines from two workers can never interleave mid-line.
"""

from __future__ import annotations

import contextlib
import os
import re
import select
import stat
import sys
import threading
from collections.abc import Callable, Iterable, Iterator
from typing import Any, Protocol

import orjson

from cvdiag.contract.schema import PREFIX

#: Bytes a pipe writes atomically (POSIX guarantees 512; Linux has 4096).
PIPE_BUF: int = getattr(select, "PIPE_BUF", 512)
#: Bytes per write to a regular file (bounds the memory of one join).
_FILE_WRITE = 1 << 20
_PREFIX = PREFIX.encode()
_NON_ASCII = re.compile("[^\x00-\x7f]")


class Sink(Protocol):
    def write(self, lines: list[bytes]) -> None: ...

    def close(self) -> None: ...


class LinesLost(Exception):
    """A sink wrote what it could of a batch; ``lost`` are the positions of the lines
    it could not write whole."""

    def __init__(self, lost: Iterable[int], cause: BaseException) -> None:
        self.lost = list(lost)
        super().__init__(f"{len(self.lost)} line(s) not written: {type(cause).__name__}: {cause}")
        self.__cause__ = cause


def whole_line_writes(lines: list[bytes], prefix: bytes = b"", limit: int = PIPE_BUF) -> Iterator[tuple[int, bytes]]:
    """Group lines into writes of at most ``limit`` bytes that never split a line (a
    longer line gets a write of its own); yields (index of the first line, bytes)."""
    extra = len(prefix) + 1
    glue = b"\n" + prefix
    start = size = 0
    for i, line in enumerate(lines):
        n = len(line) + extra
        if size + n > limit and i > start:
            yield start, prefix + glue.join(lines[start:i]) + b"\n"
            start, size = i, 0
        size += n
    if start < len(lines):
        yield start, prefix + glue.join(lines[start:]) + b"\n"


class WholeLines:
    """Writes batches of lines to a file descriptor so that no line is ever split.

    A short write is resumed; a non-blocking fd is waited on. When an error leaves part
    of a line behind, ``cut_back(fd, n)`` may remove those ``n`` bytes; if it cannot,
    the next write starts with a newline, so the partial line stays a line of its own.
    Lines not written whole are named in ``LinesLost``.
    """

    __slots__ = ("_cut_back", "_prefix", "_torn")

    def __init__(self, prefix: bytes = b"", cut_back: Callable[[int, int], None] | None = None) -> None:
        self._prefix = prefix
        self._cut_back = cut_back
        self._torn = False

    def write(self, fd: int, lines: list[bytes]) -> None:
        lost: list[int] = []
        error: OSError | None = None
        # Appends to a regular file are whole at any size; pipes, sockets, ttys only up to PIPE_BUF.
        limit = _FILE_WRITE if stat.S_ISREG(os.fstat(fd).st_mode) else PIPE_BUF
        for first, data in whole_line_writes(lines, self._prefix, limit):
            if self._torn:
                data = b"\n" + data
            done = 0
            try:
                while done < len(data):
                    try:
                        done += os.write(fd, data[done:] if done else data)
                    except BlockingIOError:  # a non-blocking stdout: wait until it drains
                        _wait_writable(fd)
            except OSError as exc:
                error = error or exc
                whole = data.rfind(b"\n", 0, done) + 1
                if done:  # a partial line from before is ended now; is there a new one?
                    self._torn = whole < done and not self._cut(fd, done - whole)
                lost.extend(range(first + data.count(b"\n", 1, whole), first + data.count(b"\n", 1)))
            else:
                self._torn = False
        if error is not None:
            raise LinesLost(lost, error)

    def start_fresh(self) -> None:
        """The fd ends mid-line (another writer died mid-write): begin with a newline."""
        self._torn = True

    def _cut(self, fd: int, n: int) -> bool:
        if self._cut_back is None:
            return False
        try:
            self._cut_back(fd, n)
        except OSError:
            return False
        return True


def _wait_writable(fd: int) -> None:
    poller = select.poll()  # not select(): descriptors past 1024 are common in servers
    poller.register(fd, select.POLLOUT)
    poller.poll()


def _escape_non_ascii(text: str) -> str:
    """JSON ``\\uXXXX`` escapes for non-ASCII characters: the same envelope, in ASCII
    (orjson writes non-ASCII only inside strings, where the escapes mean the same)."""
    return _NON_ASCII.sub(_u_escape, text)


def _u_escape(match: re.Match[str]) -> str:
    code = ord(match.group())
    if code > 0xFFFF:
        code -= 0x10000
        return f"\\u{0xD800 + (code >> 10):04x}\\u{0xDC00 + (code & 0x3FF):04x}"
    return f"\\u{code:04x}"


class StdoutSink:
    """``CVDIAG {json}`` lines on whatever ``sys.stdout`` is at write time, so that
    test capture (pytest's capsys, redirect_stdout) sees them.

    Bytes go to its file descriptor (UTF-8 whatever the stream's encoding, after the
    host's own buffered text); a stream without one (StringIO, capsys) gets text.
    """

    def __init__(self) -> None:
        self._lines = WholeLines(_PREFIX)

    def write(self, lines: list[bytes]) -> None:
        out = sys.stdout
        if out is None:  # pythonw, or a closed stdout: nothing to write to
            return
        try:
            fd = out.fileno()
        except (AttributeError, OSError, ValueError):  # io.UnsupportedOperation included
            self._write_text(out, lines)
            return
        out.flush()
        self._lines.write(fd, lines)

    def _write_text(self, out: Any, lines: list[bytes]) -> None:
        for _, data in whole_line_writes(lines, _PREFIX):
            text = data.decode()
            try:
                out.write(text)
            except UnicodeEncodeError:  # an ASCII or cp1252 stream: escape, lose nothing
                out.write(_escape_non_ascii(text))
        out.flush()

    def close(self) -> None:
        pass


class FileSink:
    """Bare NDJSON appended to ``path``.

    Like ``logging.handlers.WatchedFileHandler``, the path is stat'ed before each batch
    and reopened when the file was removed or renamed (logrotate) — a new device or
    inode. A write that fails half-way (ENOSPC) is cut back to the last whole line, so
    a partial line never glues onto the next one once space is freed; a file found
    ending mid-line (a writer killed mid-write) gets its next line on a fresh line.
    """

    def __init__(self, path: str) -> None:
        self.path = path
        self._fd: int | None = None
        self._id: tuple[int, int] = (0, 0)
        self._lines = WholeLines(cut_back=_cut_back)

    def write(self, lines: list[bytes]) -> None:
        fd = self._reopen_if_needed()
        try:
            self._lines.write(fd, lines)
        except LinesLost:
            raise
        except BaseException:
            self.close()
            raise

    def _reopen_if_needed(self) -> int:
        try:
            st = os.stat(self.path)
            same = (st.st_dev, st.st_ino) == self._id
        except FileNotFoundError:
            same = False
        if self._fd is not None and same:
            return self._fd
        self.close()
        directory = os.path.dirname(self.path)
        if directory:
            os.makedirs(directory, exist_ok=True)
        fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, 0o666)
        st = os.fstat(fd)
        self._fd, self._id = fd, (st.st_dev, st.st_ino)
        if st.st_size and not _ends_with_newline(self.path):
            self._lines.start_fresh()
        return fd

    def close(self) -> None:
        fd, self._fd = self._fd, None
        if fd is not None:
            with contextlib.suppress(OSError):
                os.close(fd)


def _ends_with_newline(path: str) -> bool:
    """Whether a non-empty file's last byte ends a line (True when it cannot be read)."""
    try:
        with open(path, "rb") as f:
            f.seek(-1, os.SEEK_END)
            return f.read(1) in (b"\n", b"")
    except OSError:
        return True


def _cut_back(fd: int, n: int) -> None:
    """Remove the last ``n`` bytes this fd appended, unless another writer appended since."""
    end = os.lseek(fd, 0, os.SEEK_CUR)
    if os.fstat(fd).st_size != end:
        raise OSError("another writer appended after the partial line")
    os.ftruncate(fd, end - n)


class MemorySink:
    """Keeps every line in memory: the writer measured without I/O (tools/bench_sinks.py).

    Tests capture with ``cvdiag.testing.capture``, which keeps the decoded envelopes.
    """

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
