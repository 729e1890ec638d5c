"""The PostgreSQL backend: one server for a team's CI (extra ``cvdiag[postgres]``).

Many jobs write at once: a run's row is inserted with ``ON CONFLICT DO NOTHING`` first,
so of two jobs adding the same run one waits on the other's key and then adds nothing;
its results go in by COPY in the same transaction. Migrations take an advisory lock, so
jobs that meet an empty database create the schema once.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from cvdiag.history.credentials import masked, redacted
from cvdiag.history.store import (
    POSTGRES_INDEXES,
    RESULT_COLUMNS,
    RUN_COLUMNS,
    HistoryError,
    MissingExtra,
    Result,
    Run,
    check_version,
    migrate,
    must_migrate,
    one_line,
    recorded_version,
    result_rows,
)

try:
    import psycopg
except ImportError:  # pragma: no cover - depends on the install
    psycopg = None  # type: ignore[assignment]

#: pg_advisory_xact_lock key of schema migrations ("cvdiag" in ASCII).
_MIGRATION_LOCK = 0x637664696167
_CONNECT_TIMEOUT_S = 10
_INSERT_RUN = (
    f"INSERT INTO runs ({', '.join(RUN_COLUMNS)}) VALUES ({', '.join(['%s'] * len(RUN_COLUMNS))})"
    " ON CONFLICT (run_id) DO NOTHING RETURNING run_id"
)
_COPY_RESULTS = f"COPY results ({', '.join(RESULT_COLUMNS)}) FROM STDIN"


def _binary_text(statement: str) -> str:
    """Text compared byte by byte, as DuckDB does: the same order (and answers) in both."""
    return re.sub(r"\bTEXT\b", 'TEXT COLLATE "C"', statement)


class PostgresStore:
    """A history in a PostgreSQL database."""

    def __init__(self, url: str, *, write: bool) -> None:
        if psycopg is None:
            raise MissingExtra("PostgreSQL", "postgres")
        self.where = redacted(url)
        self._url = url
        try:
            self.conn = psycopg.connect(url, autocommit=True, connect_timeout=_CONNECT_TIMEOUT_S)
        except psycopg.Error as exc:
            raise HistoryError(f"cannot use the history at {self.where}: {self._said(exc)}") from None
        except Exception as exc:  # a malformed URL or option: psycopg raises ProgrammingError or ValueError
            raise HistoryError(f"not a usable PostgreSQL URL {self.where}: {self._said(exc)}") from None
        try:
            self._schema(write)
        except BaseException:
            self.conn.close()
            raise

    def _said(self, exc: Exception) -> str:
        """The driver's message on one line, without a secret of the URL it may quote."""
        return masked(one_line(exc), self._url)

    def _fail(self, exc: Exception) -> HistoryError:
        return HistoryError(f"{self.where}: {self._said(exc)}")

    def _version(self) -> int | None:
        row = self.conn.execute("SELECT to_regclass('schema_version') IS NOT NULL").fetchone()
        if not row or not row[0]:
            return None
        row = self.conn.execute("SELECT max(version) FROM schema_version").fetchone()
        return recorded_version(row)

    def _schema(self, write: bool) -> None:
        try:
            version = self._version()
            if not must_migrate(version, self.where, write=write):
                return
            with self.conn.transaction():
                self.conn.execute("SELECT pg_advisory_xact_lock(%s)", [_MIGRATION_LOCK])
                self.conn.execute("CREATE TABLE IF NOT EXISTS schema_version (version INTEGER NOT NULL)")
                version = self._version() or 0  # another job may have migrated while we waited
                check_version(version, self.where)
                migrate(lambda sql, params: self.conn.execute(_binary_text(sql), params), version, POSTGRES_INDEXES)
        except psycopg.Error as exc:
            raise self._fail(exc) from None

    def add_run(self, run: Run, results: Sequence[Result]) -> bool:
        rows = result_rows(results)
        try:
            with self.conn.transaction(), self.conn.cursor() as cur:
                cur.execute(_INSERT_RUN, [getattr(run, c) for c in RUN_COLUMNS])
                if cur.fetchone() is None:  # another job (or an earlier add) has this run
                    return False
                with cur.copy(_COPY_RESULTS) as copy:
                    for row in rows:
                        copy.write_row(row)
        except psycopg.Error as exc:
            raise self._fail(exc) from None
        return True

    def fetch(self, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        try:
            return self.conn.execute(sql, list(params)).fetchall()  # type: ignore[arg-type]
        except psycopg.Error as exc:
            raise self._fail(exc) from None

    def close(self) -> None:
        self.conn.close()
