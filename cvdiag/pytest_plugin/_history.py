"""``pytest --cvdiag-history [DB]``: the session recorded as one run of the history.

Each process that runs tests spools every test's in-process envelopes and its node id
to a folder beside the history as the test ends (memory stays flat; a killed session's
folder is removed by the next writer, never left in TMPDIR). The process that sees every
outcome (the only one, or pytest-xdist's controller, which hands its workers the folder
through ``workerinput``) records the run at the end of the session: one run however many
workers. The history never fails the session: whatever goes wrong is one line of its
summary, and a run that could not be written is kept for the next writer.
"""

from __future__ import annotations

import os
import shlex
import shutil
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import orjson
import pytest

from cvdiag.contract.ids import new_test_id

_SPOOL_KEY = "cvdiag_history_spool"


@dataclass(slots=True)
class _Outcome:
    failed: bool = False
    skipped: bool = False
    duration_s: float = 0.0


class SessionHistory:
    """A pytest plugin object: spools tests as they end, records the run at the end."""

    def __init__(self, config: pytest.Config, db: str | None, logs: pytest.StashKey[list[str]]) -> None:
        """``logs`` is the plugin's key for the log files named so far (handed in, so
        this module never imports the plugin that loads it)."""
        from cvdiag.history import record

        self.db = db or None
        self.config = config
        self.logs = logs
        self.started = record.now()
        workerinput = getattr(config, "workerinput", None)
        self.worker = workerinput is not None
        self.folder = (workerinput or {}).get(_SPOOL_KEY) or _spool_folder(self.db)
        self.spool = os.path.join(self.folder, f"{os.getpid()}.ndjson")
        self.names = os.path.join(self.folder, f"{os.getpid()}.names")
        self.outcomes: dict[str, _Outcome] = {}
        self.line: str | None = None

    # -- every process that runs tests ---------------------------------------------

    def add(self, test_id: str, nodeid: str, lines: Sequence[bytes]) -> None:
        """One test as it ends: its id, its node id and the lines its sink kept."""
        with open(self.names, "ab") as fh:
            fh.write(orjson.dumps([test_id, nodeid]) + b"\n")
        if lines:
            with open(self.spool, "ab") as fh:
                fh.write(b"\n".join(lines) + b"\n")

    # -- the process that records --------------------------------------------------

    @pytest.hookimpl(optionalhook=True)
    def pytest_configure_node(self, node: Any) -> None:
        """pytest-xdist: each worker spools into the controller's folder."""
        node.workerinput[_SPOOL_KEY] = self.folder

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        if self.worker:
            return
        seen = self.outcomes.setdefault(report.nodeid, _Outcome())
        seen.duration_s += report.duration or 0.0
        if report.failed:
            seen.failed = True
        elif report.skipped and not hasattr(report, "wasxfail"):
            seen.skipped = True

    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        if self.worker:
            return
        try:
            self.line = self._record(self.config.stash.get(self.logs, []))
        except Exception as exc:  # the session's own result matters more than its history
            from cvdiag.history.credentials import masked
            from cvdiag.history.store import location

            self.line = masked(f"cvdiag history: could not record this session: {exc}", location(self.db))
        finally:
            shutil.rmtree(self.folder, ignore_errors=True)

    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        for line in (self.line or "").splitlines():
            terminalreporter.write_line(line)

    def _record(self, logs: Sequence[str]) -> str:
        from cvdiag.history import record, recording
        from cvdiag.history.store import FIELD_MAX, NAME_MAX, Result, keyed
        from cvdiag.read.sources import resolve_sources

        node_of: dict[str, str] = {}
        spools = []
        for name in sorted(os.listdir(self.folder)):
            path = os.path.join(self.folder, name)
            if name.endswith(".names"):
                with open(path, "rb") as fh:
                    node_of.update(orjson.loads(line) for line in fh if line.strip())
            elif name.endswith(".ndjson"):
                spools.append(path)
        status = {
            tid: "fail" if o.failed else "skip" if o.skipped else "pass"
            for tid, node in node_of.items()
            if (o := self.outcomes.get(node)) is not None
        }
        paths = [p for p in (*spools, *logs) if os.path.exists(p)]
        found, tally = ([], None)
        if paths:
            found, tally = record.tests_of(resolve_sources(paths), "", labels=node_of, outcomes=status)
        ours = {keyed(tid, FIELD_MAX): tid for tid in node_of}  # as results name them
        results = [r for r in found if r.test_id in ours]  # a shared log may hold other sessions' tests
        have = {ours[r.test_id] for r in results}
        for tid, node in node_of.items():  # tests that emitted nothing (or past the limit) are results too
            o = self.outcomes.get(node)
            if tid not in have and o is not None:
                results.append(Result("", keyed(node, NAME_MAX) or "", keyed(tid, FIELD_MAX) or "", status[tid],
                                      None, None, None, round(o.duration_s * 1000, 3), None, None, None, None, None,
                                      None, None))  # fmt: skip
        if not results:
            return "cvdiag history: no tests ran, nothing recorded"
        info = record.described(record.RunInfo(), os.environ, f"pytest:{new_test_id()}")
        run, results = record.make_run(info, results, self.started)
        done = recording.record(self.db, run, results)
        said = [f"cvdiag history: recorded run {r}, kept from before, in {done.where}" for r in done.earlier]
        said += [f"cvdiag history: {note}" for note in done.notes]
        if not done.added:
            said.append(f"cvdiag history: run {done.run_id} is in {done.where} already: nothing recorded")
        else:
            said.append(
                f"cvdiag history: recorded run {done.run_id} ({run.tests} tests, {run.failed} failed) in {done.where}"
            )
        if tally is not None and tally.untracked:
            said.append(
                f"cvdiag history: more than {tally.untracked_limit:,} test ids in the logs: the tests past them are "
                "recorded with pytest's outcome, without a class (CVDIAG_MAX_TESTS raises the limit)"
            )
        return "\n".join(said)


def _spool_folder(db: str | None) -> str:
    """A new folder for the session's spool, beside the history (a killed session's is
    removed by the next writer); in TMPDIR when nothing can be written there (the
    history then says why at the end)."""
    from cvdiag.history import places

    try:
        places.sweep(db)
        path = places.scratch(db, "session")
        os.makedirs(path, exist_ok=True)
    except OSError:
        return tempfile.mkdtemp(prefix="cvdiag-history-")
    return path


def looks_like_a_test_path(value: str) -> bool:
    """``--cvdiag-history tests/`` took the tests as the database: say so."""
    from cvdiag.history.credentials import is_postgres

    return not is_postgres(value) and (os.path.isdir(value) or value.endswith(".py") or "::" in value)


def given_with_equals(config: pytest.Config, option: str) -> bool:
    """Whether ``option`` was written ``--option=VALUE`` (on the command line, in
    ``PYTEST_ADDOPTS`` or in the ini file's ``addopts``): then its value is meant."""
    try:
        words = [*config.invocation_params.args, *shlex.split(os.environ.get("PYTEST_ADDOPTS", ""))]
        words += list(config.getini("addopts"))
    except (ValueError, KeyError):
        return False
    return any(str(w).startswith(option + "=") for w in words)
