"""Which test rows and envelopes a command keeps: its filters as plain predicates.

Pure data logic shared by ``tests``, ``grep`` and ``--follow``; the CLI only turns its
options into these arguments.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from cvdiag.contract.timestamps import ts_seconds

EnvelopeFilter = Callable[[dict[str, Any]], bool]


def in_window(ts: float, since: float | None, until: float | None) -> bool:
    """``ts`` (epoch seconds) within ``[since, until]``; None is an open end."""
    return (since is None or ts >= since) and (until is None or ts <= until)


def select_tests(
    rows: Iterable[dict[str, Any]],
    *,
    failed_only: bool = False,
    slug: str | None = None,
    since: float | None = None,
    until: float | None = None,
) -> list[dict[str, Any]]:
    """The rows of ``correlate.scan_tests`` that pass: failed ones only, one slug among
    a row's comma-separated slugs, a first event within the time window."""
    windowed = since is not None or until is not None  # a time read per row only when asked
    return [
        r
        for r in rows
        if (not failed_only or r["status"] == "fail")
        and (slug is None or slug in r["slug"].split(","))
        and (not windowed or in_window(ts_seconds(r["first_ts"]), since, until))
    ]


def envelope_filter(
    *,
    test_id: str | None = None,
    slug: str | None = None,
    layer: str | None = None,
    boundary: str | None = None,
    outcome: str | None = None,
    since: float | None = None,
    until: float | None = None,
) -> EnvelopeFilter:
    """A predicate keeping the envelopes that match every given field: ``test_id`` is a
    prefix, ``boundary`` a name or a glob, the time window is on ``ts``."""
    import fnmatch

    def keep(env: dict[str, Any]) -> bool:
        if test_id and not env["test_id"].startswith(test_id):
            return False
        if slug and env.get("slug") != slug:
            return False
        if layer and env["layer"] != layer:
            return False
        if boundary and not (env["boundary"] == boundary or fnmatch.fnmatchcase(env["boundary"], boundary)):
            return False
        if outcome and env["outcome"] != outcome:
            return False
        if since is not None or until is not None:
            return in_window(ts_seconds(env["ts"]), since, until)
        return True

    return keep
