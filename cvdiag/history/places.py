"""Where a history's own files live, beside it: the runs kept for the next writer
(``<history>.pending/``) and each writer's scratch files (the CSV DuckDB loads, a pytest
session's spool), named by the writer's process id, so the next writer removes what a
killed one left (SIGKILL cannot clean up), and nothing is ever left in TMPDIR.

For a PostgreSQL history "beside it" is ``.cvdiag/`` in the current directory, the
files named by a digest of its location (without its password).
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
import shutil
import socket
import time

from cvdiag.history.credentials import is_postgres, redacted
from cvdiag.history.store import location


def _home(db: str) -> tuple[str, str]:
    """The folder beside the history, and the stem its files are named by."""
    if is_postgres(db):
        digest = hashlib.sha256(redacted(db).encode()).hexdigest()[:12]
        return os.path.abspath(".cvdiag"), f"postgres-{digest}"
    path = os.path.abspath(db)
    return os.path.dirname(path), os.path.basename(path)


def kept_folder(db: str | None) -> str:
    """Where the runs that could not be written to this history wait."""
    folder, stem = _home(location(db))
    return os.path.join(folder, f"{stem}.pending")


#: What scratch files are for: DuckDB's staged CSV, a pytest session's spool, a run
#: being kept. Only these are ever removed.
KINDS = ("staged", "session", "keeping")
#: Scratch files of another machine (a folder shared between CI containers) are removed
#: once this old: whether their writer lives cannot be asked from here.
FOREIGN_AGE_S = 24 * 3600


def _host() -> str:
    """This machine (or container), in a few characters: process ids are its own."""
    return hashlib.sha256(socket.gethostname().encode()).hexdigest()[:8]


def scratch(db: str | None, kind: str) -> str:
    """A path for this process's scratch file (or folder) of ``kind`` (one of ``KINDS``)
    beside the history."""
    folder, stem = _home(location(db))
    os.makedirs(folder, exist_ok=True)
    return os.path.join(folder, f".{stem}.{kind}-{_host()}-{os.getpid()}")


def sweep(db: str | None) -> None:
    """Removes the scratch files and folders of writers that are gone (killed): of this
    machine when their process is, of another when a day old."""
    folder, stem = _home(location(db))
    try:
        names = os.listdir(folder)
    except OSError:
        return
    here, now = _host(), time.time()
    ours = re.compile(rf"\.{re.escape(stem)}\.(?:{'|'.join(KINDS)})-([0-9a-f]{{8}})-([0-9]+)(?:\.csv)?")
    for name in names:
        m = ours.fullmatch(name)
        if m is None:
            continue
        path = os.path.join(folder, name)
        if m[1] == here:
            gone = int(m[2]) != os.getpid() and not _alive(int(m[2]))
        else:
            gone = now - _mtime(path) > FOREIGN_AGE_S
        if gone:
            if os.path.isdir(path):
                shutil.rmtree(path, ignore_errors=True)
            else:
                unlink(path)


def _mtime(path: str) -> float:
    try:
        return os.stat(path).st_mtime
    except OSError:
        return time.time()


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:  # someone else's process: alive
        return True
    return True


def unlink(path: str) -> None:
    with contextlib.suppress(OSError):
        os.unlink(path)
