"""The last lines an MCP stdio server wrote to its standard error, kept as evidence.

The ``mcp`` SDK hands the server its ``errlog`` (the app's ``sys.stderr`` by default); a
failed tool often reads only "Error executing tool …" on the client, the real exception
being on the server's stderr. ``Tee`` puts a pipe between the two: a daemon thread copies
every byte on to the app's ``errlog`` unchanged and keeps the last ``KEEP`` bytes, which
``tail()`` turns into a short text (the exception lines first, then the last lines).

POSIX only, and only for an ``errlog`` with a file descriptor (the SDK needs one too):
anything else is left exactly as the app gave it.
"""

from __future__ import annotations

import os
import re
import select
import threading
from typing import Any

from cvdiag.contract.schema import STDERR_TAIL_MAX_CHARS
from cvdiag.contract.scrubber import scrub_clipped

__all__ = ["Tee", "tail_text"]

#: Bytes of a server's stderr kept (the end of it).
KEEP = 8192
_READ = 65536
#: One line of the tail, at most (a line of 10 MB must not push the exception out).
LINE_MAX = 200
#: Box drawing and block characters of rich tracebacks (FastMCP logs through rich).
_BOX = re.compile(r"[\u2500-\u259f\u2770-\u277f]")
_SPACES = re.compile(r"[ \t]+")
#: ``ValueError: no weather station near Paris``: a Python exception's last line.
_EXCEPTION = re.compile(r"^(?:[A-Za-z_][\w.]*\.)?[A-Z]\w*(?:Error|Exception|Exit|Interrupt|Group)\b.*")


def tail_text(data: bytes) -> str | None:
    """A server's last stderr lines, scrubbed, at most ``STDERR_TAIL_MAX_CHARS``: the last two
    exception lines (each with the short line it wraps onto), then as many of the last
    lines as fit, each scrubbed and cut to ``LINE_MAX`` characters."""
    text = _SPACES.sub(" ", _BOX.sub(" ", data.decode("utf-8", "replace")))
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    if not lines:
        return None
    found = []
    for i, line in enumerate(lines):
        if _EXCEPTION.match(line):
            follow = lines[i + 1] if i + 1 < len(lines) and not _EXCEPTION.match(lines[i + 1]) else ""
            found.append(f"{line} {follow}".strip() if 0 < len(follow) <= 40 else line)
    last = lines[-4:]
    head = [scrub_clipped(line, LINE_MAX) for line in found[-2:] if line not in last]
    tail = [scrub_clipped(line, LINE_MAX) for line in last]
    while tail and len("\n".join(head + tail)) > STDERR_TAIL_MAX_CHARS:
        tail.pop(0)  # the exception lines stay; the oldest of the last lines goes first
    joined = "\n".join(head + tail)
    return joined[:STDERR_TAIL_MAX_CHARS] or None


class Tee:
    """A pipe standing for the app's ``errlog``: ``errlog`` is what to give the spawn,
    ``started()`` closes the parent's end once the child has its own."""

    __slots__ = ("_closed", "_kept", "_lock", "_out", "_read", "_thread", "errlog")

    def __init__(self, errlog: Any) -> None:
        self._out = errlog.fileno()  # raises for an errlog without one: no tee
        self._read, write = os.pipe()
        os.set_blocking(self._read, False)
        self.errlog = os.fdopen(write, "w")
        self._kept = bytearray()
        self._closed = False
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self._copy, name="cvdiag-mcp-stderr", daemon=True)
        self._thread.start()

    def started(self) -> None:
        """The child holds the write end now: the parent's goes, so its exit ends the copy."""
        self.errlog.close()

    def _copy(self) -> None:
        try:
            while True:
                select.select([self._read], [], [], 1.0)
                if not self.catch_up():
                    break
        finally:
            with self._lock:  # closed under the lock: its number may be reused at once
                self._closed = True
                os.close(self._read)

    def catch_up(self) -> bool:
        """Read what the pipe holds now (never waits); False once the server's stderr ended."""
        with self._lock:
            while not self._closed:
                try:
                    data = os.read(self._read, _READ)
                except BlockingIOError:
                    return True
                except OSError:
                    return False
                if not data:
                    return False
                self._forward(data)
                self._kept += data
                del self._kept[:-KEEP]
            return False

    def _forward(self, data: bytes) -> None:
        view = memoryview(data)
        while view:
            try:
                view = view[os.write(self._out, view) :]
            except OSError:  # the app's stderr is gone: keep reading, forward nothing
                return

    def tail(self) -> str | None:
        """The server's last stderr lines so far (what it wrote before its answer is in)."""
        self.catch_up()
        with self._lock:
            data = bytes(self._kept)
        return tail_text(data)
