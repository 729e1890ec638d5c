"""Stdin or a FIFO copied to a temporary file, for the commands that read their input twice.

The copy is bounded twice over: it goes through the reader's line bounds (an endless
line costs one placeholder line, not disk), and it stops at ``CVDIAG_SPOOL_MAX_BYTES``
(default: half the free space of ``$TMPDIR``, at most 8 GiB) with a plain error rather
than fill the disk. Where ``/proc`` lets a file be reopened by descriptor, the file is
unlinked as soon as it is created, so no signal (not even SIGKILL) can leave it
behind; elsewhere it is removed at exit, which the CLI makes SIGTERM reach.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import tempfile

from cvdiag.read.sources import InputError, Source

MAX_ENV = "CVDIAG_SPOOL_MAX_BYTES"
_MAX_DEFAULT = 8 << 30
_READ = 1 << 20  # small reads: the copy needs no big buffer


def limit(directory: str) -> int:
    """How many bytes may be copied into ``directory``."""
    configured = os.environ.get(MAX_ENV, "").strip()
    if configured.isdigit():
        return int(configured)
    try:
        st = os.statvfs(directory)
    except OSError:
        return _MAX_DEFAULT
    return min(_MAX_DEFAULT, st.f_bavail * st.f_frsize // 2)


def spooled(src: Source) -> Source:
    """``src`` (a stream) as a regular file the readers can open as often as they need."""
    fd, name = tempfile.mkstemp(prefix="cvdiag-stdin-")
    path = _anonymous(fd, name)
    cap = limit(os.path.dirname(name))
    written = 0
    try:
        with os.fdopen(fd, "wb", closefd=False) as out:
            for block in src.blocks(_READ):
                written += len(block)
                if written > cap:
                    raise InputError(
                        f"{src.name} is bigger than the {cap} bytes cvdiag may copy to $TMPDIR ({MAX_ENV}): "
                        "save it to a file and give its path"
                    )
                out.write(block)
    except BaseException:
        _remove(fd, name)
        raise
    return Source(src.name, path)


def _anonymous(fd: int, name: str) -> str:
    """The path the readers open: the descriptor's, once the name is gone, where possible."""
    by_fd = f"/proc/self/fd/{fd}"
    if os.path.exists(by_fd):
        os.unlink(name)
        return by_fd  # the descriptor stays open for the life of the process
    atexit.register(_remove, fd, name)
    return name


def _remove(fd: int, name: str) -> None:
    with contextlib.suppress(OSError):
        os.close(fd)
    with contextlib.suppress(OSError):
        os.unlink(name)
