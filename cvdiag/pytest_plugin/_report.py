"""``pytest --cvdiag-report PATH``: the HTML report of a whole session.

Each test's in-process envelopes go to a spool file on disk as the test ends (memory
stays flat however long the session), with the test's node id and pytest outcome; at
the end of the session the spool and the ``--cvdiag-log`` files become one report.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Sequence

from cvdiag.face import report, report_data
from cvdiag.face.render import counted
from cvdiag.read.sources import resolve_sources


class SessionReport:
    """The spool of one session and what pytest said about each test."""

    def __init__(self, path: str, *, all_tests: bool = False) -> None:
        self.path = path
        self.all_tests = all_tests
        self.folder = tempfile.mkdtemp(prefix="cvdiag-report-")
        self.spool = os.path.join(self.folder, "in-process.ndjson")
        self.labels: dict[str, str] = {}
        self.failed: set[str] = set()

    def add(self, test_id: str, nodeid: str, failed: bool, lines: Sequence[bytes]) -> None:
        """One test as it ends: its name, its outcome and the lines its sink kept."""
        self.labels[test_id] = nodeid
        if failed:
            self.failed.add(test_id)
        if lines:
            with open(self.spool, "ab") as fh:
                fh.write(b"\n".join(lines) + b"\n")

    def write(self, logs: Sequence[str]) -> str:
        """Writes the report; the line to show at the end of the session."""
        try:
            return self._write(logs)
        except Exception as exc:  # the session's own result matters more than its report
            return f"cvdiag report: could not write {self.path}: {type(exc).__name__}: {exc}"
        finally:
            shutil.rmtree(self.folder, ignore_errors=True)

    def _write(self, logs: Sequence[str]) -> str:
        paths = [p for p in (self.spool, *logs) if os.path.exists(p)]
        doc = report_data.build(
            resolve_sources(paths), all_tests=self.all_tests, labels=self.labels, failed=self.failed
        )
        # Name what was read as the user knows it: the session, not the spool file that is
        # deleted once the page is written; and offer pytest's own option for more.
        session = f"pytest session ({counted(len(self.labels), 'test')})"
        doc["meta"]["sources"] = [session if s == self.spool else s for s in doc["meta"]["sources"]]
        doc["meta"]["all_command"] = "pytest --cvdiag-report-all"
        if not doc["rows"]:
            return f"cvdiag report: no envelopes in this session, {self.path} not written"
        size = report.write(doc, self.path, "cvdiag report: pytest session")
        failed = sum(r[report_data.ROW_COLUMNS.index("failed")] for r in doc["rows"])
        return f"cvdiag report: {self.path} ({counted(len(doc['rows']), 'test')}, {failed} failed, {size / 1e6:.1f} MB)"
