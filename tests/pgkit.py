"""A real PostgreSQL for the history tests: ``CVDIAG_TEST_POSTGRES_URL`` when CI (or a
developer) gives one, else a throwaway cluster of Debian's packages started here.

The cluster lives in a temporary directory: ``initdb`` with a password
(scram-sha-256, so a wrong one is refused as on a real server), listening only on a unix
socket in that directory (no port to collide with other test runs), stopped and removed
when the session ends. As root it runs as the ``postgres`` user (PostgreSQL refuses
root). Without PostgreSQL the tests skip, saying why; with ``CVDIAG_REQUIRE_E2E=1`` (CI)
that is a failure instead.
"""

from __future__ import annotations

import glob
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager

import pytest

URL_ENV = "CVDIAG_TEST_POSTGRES_URL"
PASSWORD = "s3cret-pw-for-tests"


def _required() -> bool:
    return os.environ.get("CVDIAG_REQUIRE_E2E", "").strip().lower() in ("1", "true", "yes", "on")


def unavailable(reason: str) -> None:
    if _required():
        pytest.fail(f"PostgreSQL tests required (CVDIAG_REQUIRE_E2E=1) but {reason}", pytrace=False)
    pytest.skip(f"PostgreSQL tests skipped: {reason} (CVDIAG_REQUIRE_E2E=1 makes this a failure)")


def binaries() -> str | None:
    """The newest ``/usr/lib/postgresql/*/bin`` with initdb (Debian's layout)."""
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"), key=lambda p: int(p.split("/")[4]))
    return os.path.dirname(found[-1]) if found else None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextmanager
def cluster() -> Iterator[str]:
    """A throwaway cluster's URL (password included), or a skip/failure."""
    given = os.environ.get(URL_ENV)
    if given:
        yield given
        return
    bin_dir = binaries()
    if bin_dir is None:
        unavailable("no PostgreSQL server binaries (apt-get install postgresql), and no " + URL_ENV)
    user = None
    if os.geteuid() == 0:
        try:
            user = pwd.getpwnam("postgres")
        except KeyError:
            unavailable("running as root and there is no postgres user to run the server")
    top = tempfile.mkdtemp(prefix="cvdiag-pg-")
    data, sock = os.path.join(top, "data"), os.path.join(top, "sock")
    os.makedirs(sock)
    pwfile = os.path.join(top, "pw")
    with open(pwfile, "w") as fh:
        fh.write(PASSWORD)
    if user is not None:
        for path in (top, sock, pwfile):
            os.chown(path, user.pw_uid, user.pw_gid)

    def as_owner(*cmd: str) -> subprocess.CompletedProcess[str]:
        full = ["runuser", "-u", "postgres", "--", *cmd] if user is not None else list(cmd)
        return subprocess.run(full, capture_output=True, text=True, timeout=120, check=False)

    port = _free_port()  # names the socket file only: the server listens on no TCP port
    try:
        done = as_owner(f"{bin_dir}/initdb", "-D", data, "-U", "postgres", "--auth=scram-sha-256",
                        f"--pwfile={pwfile}", "-E", "UTF8", "--no-sync")  # fmt: skip
        if done.returncode:
            unavailable(f"initdb failed: {done.stderr.strip()[-300:]}")
        opts = f"-c listen_addresses='' -c unix_socket_directories={sock} -p {port} -c fsync=off"
        done = as_owner(f"{bin_dir}/pg_ctl", "-D", data, "-o", opts, "-w", "-t", "60",
                        "-l", os.path.join(top, "server.log"), "start")  # fmt: skip
        if done.returncode:
            unavailable(f"the server did not start: {done.stderr.strip()[-300:]}")
        try:
            yield f"postgresql://postgres:{PASSWORD}@/postgres?host={sock}&port={port}"
        finally:
            as_owner(f"{bin_dir}/pg_ctl", "-D", data, "-m", "immediate", "-w", "stop")
    finally:
        shutil.rmtree(top, ignore_errors=True)


def fresh_database(url: str, name: str) -> str:
    """A new empty database on the server at ``url``; its URL."""
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}"')
        conn.execute(f'CREATE DATABASE "{name}"')
    base, _, query = url.partition("?")
    return f"{base.rsplit('/', 1)[0]}/{name}" + (f"?{query}" if query else "")
