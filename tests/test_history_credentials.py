"""Every credential a PostgreSQL location can carry is masked wherever the location is
printed: property tests over the forms libpq accepts (a URL's user part, its query, a
keyword string), and a real server's refusals through the command."""

from __future__ import annotations

from urllib.parse import quote

import cvdiag_cli
import pytest
from hypothesis import given
from hypothesis import strategies as st

from cvdiag.history.credentials import is_postgres, masked, redacted, secrets_in

pytest_plugins = ["historyfixtures"]  # the postgres_server fixture

#: A password always holds MARK, which nothing else in the locations below holds.
MARK = "Zq7"
passwords = st.builds(lambda a, b: a + MARK + b, st.text(max_size=12), st.text(max_size=12))


def _keyword_quoted(pw: str) -> str:
    return "'" + pw.replace("\\", "\\\\").replace("'", "\\'") + "'"


def _keyword_bare(pw: str) -> str:
    """A bare value: a backslash before each space, quote and backslash (libpq's escapes)."""
    return "".join("\\" + c if c.isspace() or c in "'\\" else c for c in pw)


def forms(pw: str) -> list[str]:
    q = quote(pw, safe="")
    return [
        f"postgresql://ci:{q}@db.internal:5432/hist",
        f"postgres://ci:{q}@/hist?host=/run/postgresql",
        f"postgresql:///hist?host=/tmp&password={q}",
        f"postgresql:///hist?host=/tmp&PASSWORD={q}&port=5",
        f"postgresql:///hist?%70assword={q}",
        f"postgresql://ci@db/hist?sslmode=verify-full&sslpassword={q}&passfile=/home/ci/.pgpass",
        f"postgresql://ci:{q}@db/hist?password={q}&sslpassword={q}#x",
        f"host=db user=ci password={_keyword_quoted(pw)} dbname=hist",
        f"dbname=hist sslpassword = {_keyword_quoted(pw)} password={_keyword_quoted(pw)}",
        f"dbname=hist password={_keyword_bare(pw)} port=5",
    ]


@given(passwords)
def test_no_form_of_a_location_prints_its_password(pw: str) -> None:
    for where in forms(pw):
        assert is_postgres(where)
        shown = redacted(where)
        assert MARK not in shown, (where, shown)
        assert "***" in shown
        said = f"connection to {where} failed: password {pw!s} and {quote(pw, safe='')} refused"
        assert MARK not in masked(said, where), where


@given(passwords)
def test_a_password_a_user_writes_unencoded_is_masked_too(pw: str) -> None:
    """libpq and urlsplit disagree on a stray ``@``, ``:`` or ``?`` in a password: either way it is masked."""
    for where in (f"postgresql://ci:{pw}@db/hist", f"postgresql://ci@db/hist?password={pw}"):
        if any(c in pw for c in "/#&"):
            continue  # not a password libpq would take written so
        assert MARK not in redacted(where), where
        assert MARK not in masked(where, where)


def test_what_is_not_a_secret_stays_shown() -> None:
    where = "postgresql://ci:pw12345@db.internal:5432/hist?sslmode=require&passfile=/home/ci/.pgpass"
    assert redacted(where) == "postgresql://ci:***@db.internal:5432/hist?sslmode=require&passfile=/home/ci/.pgpass"
    assert redacted("host=db user=ci password='a b\\'c' port=5") == "host=db user=ci password=*** port=5"
    assert {"'a b\\'c'", "a b'c"} <= set(secrets_in("host=db password='a b\\'c'"))
    assert redacted(".cvdiag/history.duckdb") == ".cvdiag/history.duckdb"
    assert not is_postgres(".cvdiag/history.duckdb") and not is_postgres("hosts/history.duckdb")
    assert is_postgres("keepalives=1 host=db password=pw12345")
    assert redacted("keepalives=1 host=db password=pw12345") == "keepalives=1 host=db password=***"


@pytest.mark.parametrize("form", ["query", "keywords"])
def test_a_password_in_the_query_or_a_keyword_string_is_not_printed(form: str, postgres_server: str) -> None:
    """A real server refuses a wrong password given as ``?password=`` or as ``password=``."""
    query = postgres_server.partition("?")[2]
    params = dict(p.split("=", 1) for p in query.split("&"))
    wrong = "not-the-pw-q1w2e3"
    if form == "query":
        url = f"postgresql://postgres@/postgres?host={params['host']}&port={params['port']}&password={wrong}"
    else:
        url = f"host={params['host']} port={params['port']} user=postgres dbname=postgres password='{wrong}'"
    done = cvdiag_cli.run("history", "runs", "--db", url)
    assert done.code == 1 and "password authentication failed" in done.err, done.err
    assert wrong not in done.err + done.out and "password=***" in done.err
    assert len(done.err.strip().splitlines()) == 1
