"""Which backend a history is in, and opening it there.

Apart from ``store`` because the backends build on ``store``'s interface: the choice
sits above both, so no module imports one that imports it back.
"""

from __future__ import annotations

from cvdiag.history.credentials import is_postgres
from cvdiag.history.store import Store, location


def open_store(db: str | None = None, *, write: bool = False) -> Store:
    """The history at ``db`` (see ``store.location``). Reading a history that does not
    exist is a ``HistoryError``; writing creates it."""
    where = location(db)
    if is_postgres(where):
        from cvdiag.history import _postgres

        return _postgres.PostgresStore(where, write=write)
    from cvdiag.history import _duckdb

    return _duckdb.DuckStore(where, write=write)
