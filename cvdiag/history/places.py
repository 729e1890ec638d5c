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
import shutil

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


def scratch(db: str | None, kind: str) -> str:
    """A path for this process's scratch file (or folder) of ``kind`` beside the history."""
    folder, stem = _home(location(db))
    os.makedirs(folder, exist_ok=True)
    return os.path.join(folder, f".{stem}.{kind}-{os.getpid()}")


def sweep(db: str | None) -> None:
    """Removes the scratch files and folders of writers that are gone (killed)."""
    folder, stem = _home(location(db))
    try:
        names = os.listdir(folder)
    except OSError:
        return
    for name in names:
        if not name.startswith(f".{stem}."):
            continue
        pid = name.rpartition("-")[2].partition(".")[0]
        if pid.isdigit() and int(pid) != os.getpid() and not _alive(int(pid)):
            path = os.path.join(folder, name)
            if os.path.isdir(path):
                shutil.rmtree(path, ignore_errors=True)
            else:
                unlink(path)


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
