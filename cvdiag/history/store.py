"""The one narrow interface to a history database, whichever it is: open it, add a run
in one transaction, ask it a read-only question in SQL both backends understand.

``cvdiag.history.backend.open_store(url)`` picks the backend: ``postgresql://`` (or ``postgres://``) is a
PostgreSQL server (psycopg 3, extra ``cvdiag[postgres]``), anything else the path of a
DuckDB file (extra ``cvdiag[history]``). The schema is versioned: ``schema_version``
holds the version a database was written with, older ones are migrated when opened for
writing, and a newer one is refused (an older cvdiag must not guess at it).

Every value reaches the database as a query parameter or through COPY, never inside
SQL text; text is capped and NUL-free (PostgreSQL's text cannot hold NUL) before it goes.
"""

from __future__ import annotations

import hashlib
import math
import operator
import os
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, fields
from typing import Any, Protocol

from cvdiag.read.sources import InputError

#: Where the history lives when neither ``--db`` nor ``CVDIAG_HISTORY`` says.
DEFAULT_PATH = os.path.join(".cvdiag", "history.duckdb")
HISTORY_ENV = "CVDIAG_HISTORY"

#: Text columns are cut to these many characters (a name or reason can be megabytes).
NAME_MAX, REASON_MAX, FIELD_MAX, URL_MAX = 512, 1024, 256, 1024


class HistoryError(InputError):
    """The history database cannot answer: down, refused, locked, newer, missing (exit 1)."""


class LastingError(HistoryError):
    """The history cannot be written as it is, however often one tries (a newer schema, a
    folder at its path, a missing extra): a run is not kept for a later try."""


class MissingExtra(LastingError):
    """A backend's Python package is not installed; says which extra brings it."""

    def __init__(self, backend: str, extra: str) -> None:
        super().__init__(f"the {backend} history needs the {extra} extra: pip install 'cvdiag[{extra}]'")
        self.extra = extra


@dataclass(frozen=True, slots=True)
class Run:
    """One CI job's test session: where and when it ran."""

    run_id: str
    started_at: str  # canonical UTC, 2026-11-21T10:00:00.000Z: sorts as text
    commit_sha: str | None
    branch: str | None
    job_url: str | None
    ci: str | None
    tests: int
    failed: int


@dataclass(frozen=True, slots=True)
class Result:
    """One test of one run, with what cvdiag found about it."""

    run_id: str
    name: str
    test_id: str
    status: str  # pass, fail, skip
    cls: str | None
    confidence: float | None
    reason: str | None
    duration_ms: float | None
    ttfb_ms: float | None
    llm_ms: float | None
    llm_attempts: int | None
    tokens: int | None
    tool_failures: int | None
    slug: str | None
    started_at: str | None


RUN_COLUMNS: tuple[str, ...] = tuple(f.name for f in fields(Run))
RESULT_COLUMNS: tuple[str, ...] = tuple(f.name for f in fields(Result))
#: SQL type of each result column (the same names in both backends).
RESULT_TYPES: dict[str, str] = {
    **dict.fromkeys(RESULT_COLUMNS, "TEXT"),
    **dict.fromkeys(("confidence", "duration_ms", "ttfb_ms", "llm_ms"), "DOUBLE PRECISION"),
    **dict.fromkeys(("llm_attempts", "tokens", "tool_failures"), "BIGINT"),
}

_NOT_NULL = ("run_id", "name", "status")
_RESULT_DEFS = ", ".join(f"{c} {RESULT_TYPES[c]}{' NOT NULL' * (c in _NOT_NULL)}" for c in RESULT_COLUMNS)

#: The schema, one list of statements per version; a database at version N has run
#: the lists 1..N. Append a version to change it, never edit one that shipped.
MIGRATIONS: tuple[tuple[str, ...], ...] = (
    (
        "CREATE TABLE runs (run_id TEXT PRIMARY KEY, started_at TEXT NOT NULL, commit_sha TEXT, branch TEXT,"
        " job_url TEXT, ci TEXT, tests BIGINT NOT NULL, failed BIGINT NOT NULL)",
        f"CREATE TABLE results ({_RESULT_DEFS})",
        # flaky/runs/diff order runs by time and take the newest N.
        "CREATE INDEX runs_started ON runs (started_at)",
    ),
)
SCHEMA_VERSION = len(MIGRATIONS)
#: Indexes only PostgreSQL gets: DuckDB scans columns with min-max zone maps, and an
#: index there would slow every insert without speeding these aggregations.
POSTGRES_INDEXES: tuple[str, ...] = (
    "CREATE INDEX IF NOT EXISTS results_run ON results (run_id)",  # diff, show, the recent-runs join
    "CREATE INDEX IF NOT EXISTS results_name ON results (name, run_id)",  # show NAME
)


def location(db: str | None) -> str:
    """The history to use: ``--db``, else ``CVDIAG_HISTORY``, else ``.cvdiag/history.duckdb``."""
    return db or os.environ.get(HISTORY_ENV) or DEFAULT_PATH


def text(value: Any, limit: int) -> str | None:
    """A value as text fit for any database: at most ``limit`` characters, no NUL, and
    None for nothing (an empty string is NULL: DuckDB's CSV load cannot tell them apart)."""
    if value is None or value == "":
        return None
    s = value if isinstance(value, str) else str(value)
    if len(s) > limit:
        s = s[: limit - 1] + "…"
    if "\x00" in s:
        s = s.replace("\x00", "\\x00")
    return s.encode("utf-8", "replace").decode("utf-8")  # lone surrogates cannot be stored


def keyed(value: Any, limit: int) -> str | None:
    """``text`` of a value that tells things apart (a test's name, a test id, a run id):
    cut to ``limit``, it ends with a digest of the whole value, so two long values that
    share their start stay two, and one value is cut alike in every run."""
    s = value if isinstance(value, str) or value is None else str(value)
    if s is None or len(s) <= limit:
        return text(s, limit)
    digest = hashlib.sha256(s.encode("utf-8", "surrogatepass")).hexdigest()[:16]
    return f"{text(s, limit - len(digest) - 1)}#{digest}"


def tests_digest(test_ids: Iterable[str]) -> str:
    """A digest of a run's test ids, whatever their order: what tells two runs apart."""
    digest = hashlib.sha256()
    for tid in sorted(test_ids):
        digest.update(tid.encode("utf-8", "surrogatepass") + b"\n")
    return digest.hexdigest()


def number(value: Any) -> float | None:
    """A finite float, or None."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    v = float(value)
    return v if math.isfinite(v) and abs(v) < 1e15 else None


def count(value: Any) -> int | None:
    """A non-negative integer that fits BIGINT, or None."""
    v = number(value)
    return None if v is None or v < 0 else int(min(v, 2**62))


_RESULT_VALUES = operator.attrgetter(*RESULT_COLUMNS)


def result_rows(results: Sequence[Result]) -> list[tuple[Any, ...]]:
    """Each result as a tuple in column order (``dataclasses.astuple`` deep-copies: slow)."""
    return [_RESULT_VALUES(r) for r in results]


class Store(Protocol):
    """What every backend does; nothing else about it is used outside this package."""

    #: Where it is, safe to print (no password).
    where: str

    def add_run(self, run: Run, results: Sequence[Result]) -> bool:
        """Adds a run and its results in one transaction; False (and nothing changed)
        when a run with this id is there already."""
        ...

    def fetch(self, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        """Rows of a read-only query; ``%s`` marks each parameter."""
        ...

    def close(self) -> None: ...


def check_version(found: int | None, where: str, *, write: bool = True) -> None:
    """Refuses a database a newer cvdiag wrote, and, to read, one that holds no history
    or an older schema (a write migrates it)."""
    if found is not None and found > SCHEMA_VERSION:
        raise LastingError(
            f"{where} holds history schema {found}, newer than this cvdiag's {SCHEMA_VERSION}: upgrade cvdiag"
        )
    if not write and found is None:
        raise HistoryError(f"no history at {where} yet (record a run with: cvdiag history add LOG)")
    if not write and found != SCHEMA_VERSION:
        raise HistoryError(f"{where} holds history schema {found}: record a run with this cvdiag to migrate it")


def recorded_version(row: Sequence[Any] | None) -> int:
    """The schema version of ``SELECT max(version) FROM schema_version``'s row (0: none yet)."""
    return int(row[0]) if row and row[0] is not None else 0


def must_migrate(found: int | None, where: str, *, write: bool) -> bool:
    """``check_version``, then whether the one opening to write has migrations to run."""
    check_version(found, where, write=write)
    return write and found != SCHEMA_VERSION


def migrate(execute: Callable[[str, Sequence[Any]], Any], version: int, more: Sequence[str] = ()) -> None:
    """Runs the migrations after ``version`` with ``execute(sql, params)`` (``%s``
    parameters), inside the caller's transaction; ``more`` are a backend's own
    statements of version 1 (its indexes)."""
    execute("CREATE TABLE IF NOT EXISTS schema_version (version INTEGER NOT NULL)", ())
    for v in range(version + 1, SCHEMA_VERSION + 1):
        for statement in (*MIGRATIONS[v - 1], *(more if v == 1 else ())):
            execute(statement, ())
        execute("INSERT INTO schema_version VALUES (%s)", (v,))


def one_line(exc: BaseException) -> str:
    """A driver's message on one line."""
    return " ".join(str(exc).split()) or type(exc).__name__
