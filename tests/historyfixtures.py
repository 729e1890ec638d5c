"""The history tests' fixtures, as a plugin (``pytest_plugins = ["historyfixtures"]``):
one PostgreSQL server for the session, and a new, empty history on each backend."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pgkit
import pytest
from historykit import new_db


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[str]:
    with pgkit.cluster() as url:
        yield url


@pytest.fixture(params=["duckdb", "postgres"])
def db(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """A new, empty history on each backend."""
    server = request.getfixturevalue("postgres_server") if request.param == "postgres" else None
    return new_db(request.param, tmp_path, server)
