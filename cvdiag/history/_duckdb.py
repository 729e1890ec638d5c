"""The DuckDB backend: one file, nothing to set up (extra ``cvdiag[history]``).

DuckDB lets one process write a file at a time (others wait a while, then get one
line). A run's results go in through a CSV file that DuckDB's own reader loads in one
statement: handing it Python lists converts value by value, ten times slower. The CSV
cannot tell an empty string from NULL, so ``store.text`` makes every empty string NULL
(in both backends, so that both give the same answers).
"""

from __future__ import annotations

import csv
import os
import re
import sys
import time
from collections.abc import Iterator, Sequence
from typing import Any

from cvdiag.history.places import scratch, sweep
from cvdiag.history.store import (
    RESULT_COLUMNS,
    RESULT_TYPES,
    RUN_COLUMNS,
    HistoryError,
    LastingError,
    MissingExtra,
    Result,
    Run,
    migrate,
    must_migrate,
    one_line,
    recorded_version,
    result_rows,
)

try:
    import duckdb
except ImportError:  # pragma: no cover - depends on the install
    duckdb = None  # type: ignore[assignment]

if sys.platform != "win32":
    import fcntl
else:  # pragma: no cover - no flock on Windows: DuckDB's own lock only
    fcntl = None  # type: ignore[assignment]

LOCK_WAIT_ENV = "CVDIAG_HISTORY_LOCK_WAIT_S"
_DUCK_TYPES = {"TEXT": "VARCHAR", "DOUBLE PRECISION": "DOUBLE", "BIGINT": "BIGINT"}
_CSV_COLUMNS = ", ".join(f"'{c}': '{_DUCK_TYPES[RESULT_TYPES[c]]}'" for c in RESULT_COLUMNS)
_INSERT_RESULTS = (
    f"INSERT INTO results ({', '.join(RESULT_COLUMNS)}) SELECT * FROM read_csv(?, auto_detect=false,"
    f" header=false, delim=',', quote='\"', escape='\"', columns={{{_CSV_COLUMNS}}})"
)
_INSERT_RUN = (
    f"INSERT INTO runs ({', '.join(RUN_COLUMNS)}) VALUES ({', '.join('?' * len(RUN_COLUMNS))})"
    " ON CONFLICT DO NOTHING RETURNING run_id"
)


class DuckStore:
    """A history in a DuckDB file."""

    def __init__(self, path: str, *, write: bool) -> None:
        if duckdb is None:
            raise MissingExtra("DuckDB", "history")
        self.where = path
        if os.path.isdir(path):
            raise LastingError(
                f"{path} is a folder, not a history file: give a file's path, such as "
                f"{os.path.join(path, 'history.duckdb')}"
            )
        if not write and not os.path.exists(path):
            raise HistoryError(f"no history at {path} yet (record a run with: cvdiag history add LOG)")
        if write and os.path.dirname(path):
            _make_folder(os.path.dirname(path))
        deadline = time.monotonic() + _lock_wait_s()
        self._turn = _writers_turn(path, deadline) if write else None
        if write:
            sweep(path)  # what a killed writer left
        try:
            self.con = _connect(path, write, deadline)
            try:
                self._schema(write)
            except BaseException:
                self.con.close()
                raise
        except BaseException:
            _end_turn(self._turn)
            raise

    def _version(self) -> int | None:
        found = self.con.execute(
            "SELECT count(*) FROM information_schema.tables WHERE table_name = 'schema_version'"
        ).fetchone()
        if not found or not found[0]:
            return None
        row = self.con.execute("SELECT max(version) FROM schema_version").fetchone()
        return recorded_version(row)

    def _schema(self, write: bool) -> None:
        try:
            version = self._version()
            if not must_migrate(version, self.where, write=write):
                return
            self.con.execute("BEGIN TRANSACTION")
            try:
                migrate(lambda sql, params: self.con.execute(sql.replace("%s", "?"), list(params)), version or 0)
                self.con.execute("COMMIT")
            except BaseException:
                self.con.execute("ROLLBACK")
                raise
        except duckdb.Error as exc:
            raise HistoryError(_explain(exc, self.where)) from None

    def add_run(self, run: Run, results: Sequence[Result]) -> bool:
        con = self.con
        staged = _staged(self.where, results) if results else None
        try:
            con.execute("BEGIN TRANSACTION")
            try:
                if not con.execute(_INSERT_RUN, list(_run_values(run))).fetchall():  # the run is there
                    con.execute("ROLLBACK")
                    return False
                if staged:
                    con.execute(_INSERT_RESULTS, [staged])
                con.execute("COMMIT")
            except BaseException:
                con.execute("ROLLBACK")
                raise
        except duckdb.Error as exc:
            raise HistoryError(_explain(exc, self.where)) from None
        finally:
            if staged:
                os.unlink(staged)
        return True

    def fetch(self, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        try:
            return self.con.execute(sql.replace("%s", "?"), list(params)).fetchall()
        except duckdb.Error as exc:
            raise HistoryError(_explain(exc, self.where)) from None

    def close(self) -> None:
        try:
            self.con.close()
        finally:
            _end_turn(self._turn)
            self._turn = None


def _make_folder(folder: str) -> None:
    """The history's folder, made when missing; a ``LastingError`` that says what is in the way."""
    try:
        os.makedirs(folder, exist_ok=True)
    except OSError as exc:
        blocker = next((p for p in _parents(folder) if os.path.isfile(p)), None)
        if blocker:
            raise LastingError(f"{blocker} is a file: the history's folder {folder} cannot be made there") from None
        raise LastingError(f"cannot make the history's folder {folder}: {exc.strerror or exc}") from None


def _parents(folder: str) -> list[str]:
    """``folder`` and the folders above it."""
    out = [folder]
    while (up := os.path.dirname(out[-1])) != out[-1]:
        out.append(up)
    return out


def _lock_wait_s() -> float:
    """How long to wait for another process's turn (``CVDIAG_HISTORY_LOCK_WAIT_S``, default 10)."""
    try:
        return max(0.0, float(os.environ.get(LOCK_WAIT_ENV, "10")))
    except ValueError:
        return 10.0


def _writers_turn(path: str, deadline: float) -> int | None:
    """An exclusive ``flock`` on the history's folder, held until ``close``.

    DuckDB decides to create a file before it opens it, and creating truncates: a
    process that found no file a moment before another created it and committed a run
    wipes that run (seen with six processes adding to a new history at once, 1 round in
    15). Writers taking turns before DuckDB looks at the file closes that window. The
    folder, not a lock file beside the history, so nothing is left behind. Where flock
    is not offered (Windows, some network file systems) DuckDB's own lock is all there is.
    """
    if fcntl is None:
        return None
    try:
        fd = os.open(os.path.dirname(os.path.abspath(path)), os.O_RDONLY)
    except OSError:
        return None
    for last in _tries(deadline):
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return fd
        except BlockingIOError:
            if last:
                os.close(fd)
                raise HistoryError(_in_use(path)) from None
        except OSError:  # flock not supported here
            os.close(fd)
            return None
    return None  # not reached: the last try returns or raises


def _end_turn(fd: int | None) -> None:
    if fd is not None:
        os.close(fd)  # closing the descriptor releases the flock


def _connect(path: str, write: bool, deadline: float) -> Any:
    """A connection, waiting until ``deadline`` for another process that holds the
    file: two CI steps of one machine take turns."""
    for last in _tries(deadline):
        try:
            return duckdb.connect(path, read_only=not write)
        except duckdb.Error as exc:
            if last or not _locked(exc):
                raise HistoryError(_explain(exc, path)) from None
    return None  # not reached: the last try returns or raises


def _tries(deadline: float) -> Iterator[bool]:
    """A try now, then more after growing pauses until ``deadline``; each says whether
    it is the last (the waits for the writers' turn and for DuckDB's lock)."""
    pause = 0.02
    while True:
        last = time.monotonic() >= deadline
        yield last
        if last:
            return
        time.sleep(pause)
        pause = min(pause * 2, 0.5)


def _staged(history: str, results: Sequence[Result]) -> str:
    """The results as a CSV file beside the history (floats as ``repr``: exact); its path."""
    path = scratch(history, "staged") + ".csv"
    try:
        with open(path, "w", newline="", encoding="utf-8") as fh:
            csv.writer(fh, lineterminator="\n").writerows(result_rows(results))
    except BaseException:
        os.unlink(path)
        raise
    return path


def _run_values(run: Run) -> tuple[Any, ...]:
    return tuple(getattr(run, c) for c in RUN_COLUMNS)


def _in_use(path: str) -> str:
    return f"{path} is in use by another process (one process at a time writes a history); try again"


#: DuckDB's words for a file another process holds ("Could not set lock on file ...:
#: Conflicting lock is held in ..."), as words: "block" says nothing of a lock.
_LOCKED = re.compile(r"\block\b|\bconflicting lock\b", re.IGNORECASE)
#: DuckDB's words for a file whose blocks it cannot read.
_DAMAGED = re.compile(r"corrupt|checksum|could not read enough bytes", re.IGNORECASE)
_NOT_DUCKDB = re.compile(r"not a valid duckdb", re.IGNORECASE)


def _locked(exc: Exception) -> bool:
    return bool(_LOCKED.search(str(exc)))


def _explain(exc: Exception, path: str) -> str:
    msg = one_line(exc)
    aside = f"move it aside (mv {path} {path}.damaged): the next run starts a new history there"
    if _DAMAGED.search(msg):
        return f"{path} is damaged: DuckDB cannot read it ({msg}); {aside}, or put back a copy from before"
    if _NOT_DUCKDB.search(msg):
        return f"{path} is not a DuckDB history file, or its start is damaged ({msg}); if it is the history, {aside}"
    if _LOCKED.search(msg):
        return _in_use(path)
    return f"{path}: {msg}"
