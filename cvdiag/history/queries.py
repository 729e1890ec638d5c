"""The questions a history answers, in SQL that DuckDB and PostgreSQL both run the same
way (``%s`` parameters, ``FILTER``, ``DISTINCT ON``, ``= ANY(list)``, ``strpos``), so
that both backends give the same answers; what SQL would say differently (weeks) is
done here in Python. Every function returns plain, JSON-ready values.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Sequence
from datetime import date, timedelta
from typing import Any

from cvdiag.history.store import HistoryError, Store

#: The newest runs ``flaky`` looks at unless told otherwise.
DEFAULT_WINDOW = 100

_RECENT = (
    "WITH recent AS (SELECT run_id, started_at, commit_sha FROM runs"
    " ORDER BY started_at DESC, run_id DESC LIMIT %s),"
    " r AS (SELECT t.name, t.status, t.cls, recent.run_id, recent.started_at, recent.commit_sha"
    " FROM results t JOIN recent ON t.run_id = recent.run_id WHERE t.status IN ('pass', 'fail')) "
)


def runs(store: Store, limit: int = 50) -> list[dict[str, Any]]:
    """The newest runs first."""
    rows = store.fetch(
        "SELECT run_id, started_at, commit_sha, branch, ci, tests, failed, job_url FROM runs"
        " ORDER BY started_at DESC, run_id DESC LIMIT %s",
        [limit],
    )
    keys = ("run_id", "started_at", "commit", "branch", "ci", "tests", "failed", "job_url")
    return [dict(zip(keys, row, strict=True)) for row in rows]


def flaky(store: Store, window: int = DEFAULT_WINDOW, limit: int = 50) -> list[dict[str, Any]]:
    """Tests that both passed and failed in the newest ``window`` runs (so they flipped
    at least once there), by flake rate: runs, failures, the classes behind the
    failures, commits on which they both passed and failed, first and last seen, and
    the last commit where they passed."""
    found = store.fetch(
        _RECENT + "SELECT name, count(*) AS runs, count(*) FILTER (WHERE status = 'fail') AS failures FROM r"
        " GROUP BY name HAVING count(*) FILTER (WHERE status = 'fail') > 0"
        " AND count(*) FILTER (WHERE status = 'pass') > 0"
        " ORDER BY count(*) FILTER (WHERE status = 'fail') * 1.0 / count(*) DESC,"
        " count(*) FILTER (WHERE status = 'fail') DESC, name LIMIT %s",
        [window, limit],
    )
    if not found:
        return []
    names = [row[0] for row in found]
    recent = {r[0] for r in store.fetch(
        "SELECT run_id FROM runs ORDER BY started_at DESC, run_id DESC LIMIT %s", [window]
    )}  # fmt: skip
    # One read of these few tests' rows (an index scan in PostgreSQL); the rest in Python.
    classes: dict[str, Counter[str]] = defaultdict(Counter)
    statuses: dict[tuple[str, str], set[str]] = defaultdict(set)
    seen: dict[str, tuple[str, str]] = {}
    passed: dict[str, tuple[str, str, str | None]] = {}
    for name, status, cls, commit, started, run_id in store.fetch(
        "SELECT t.name, t.status, t.cls, u.commit_sha, u.started_at, u.run_id FROM results t"
        " JOIN runs u ON t.run_id = u.run_id WHERE t.name = ANY(%s)",
        [names],
    ):
        first, last = seen.get(name, (started, started))
        seen[name] = (min(first, started), max(last, started))
        if status == "pass" and (name not in passed or (started, run_id) > passed[name][:2]):
            passed[name] = (started, run_id, commit)
        if run_id in recent and status in ("pass", "fail"):
            if status == "fail":
                classes[name][cls or "none"] += 1
            if commit is not None:
                statuses[name, commit].add(status)
    same_commit = Counter(name for (name, _), both in statuses.items() if len(both) == 2)
    out = []
    for name, n_runs, failures in found:
        first, last = seen.get(name, (None, None))
        out.append(
            {
                "name": name,
                "runs": n_runs,
                "failures": failures,
                "flake_rate": round(failures / n_runs, 4),
                "classes": dict(sorted(classes[name].items(), key=lambda kv: (-kv[1], kv[0]))),
                "same_commit": same_commit.get(name, 0),
                "first_seen": first,
                "last_seen": last,
                "last_pass_commit": passed[name][2] if name in passed else None,
            }
        )
    return out


def resolve_name(store: Store, name: str) -> str:
    """``name`` itself, or the one stored name that contains it."""
    if store.fetch("SELECT 1 FROM results WHERE name = %s LIMIT 1", [name]):
        return name
    close = [r[0] for r in store.fetch(
        "SELECT DISTINCT name FROM results WHERE strpos(name, %s) > 0 ORDER BY name LIMIT 6", [name]
    )]  # fmt: skip
    if len(close) == 1:
        return close[0]
    if not close:
        raise HistoryError(f"no test named {name!r} in the history")
    shown = ", ".join(close[:5]) + (", ..." if len(close) > 5 else "")
    raise HistoryError(f"{name!r} matches several tests: {shown}; give more of it")


def show(store: Store, name: str, limit: int = 100) -> dict[str, Any]:
    """One test's runs, the newest first."""
    name = resolve_name(store, name)
    rows = store.fetch(
        "SELECT u.started_at, u.commit_sha, u.branch, t.status, t.cls, t.reason, t.duration_ms, u.run_id, t.test_id"
        " FROM results t JOIN runs u ON t.run_id = u.run_id WHERE t.name = %s"
        " ORDER BY u.started_at DESC, u.run_id DESC, t.test_id LIMIT %s",
        [name, limit],
    )
    keys = ("started_at", "commit", "branch", "status", "class", "reason", "duration_ms", "run_id", "test_id")
    return {"name": name, "runs": [dict(zip(keys, row, strict=True)) for row in rows]}


def _week(day: str) -> str:
    d = date.fromisoformat(day)
    return (d - timedelta(days=d.weekday())).isoformat()  # the Monday that starts its ISO week


def classes(store: Store, since: str | None = None, by: str = "day") -> list[dict[str, Any]]:
    """Failures per period (``day`` or ``week``, a week named by its Monday) and class,
    with the period's results to compare them with."""
    since = since or ""
    failures: dict[tuple[str, str], int] = Counter()
    totals: dict[str, int] = Counter()
    bucket = _week if by == "week" else (lambda day: day)
    for day, cls, n in store.fetch(
        "SELECT substr(u.started_at, 1, 10), coalesce(t.cls, 'none'), count(*) FROM results t"
        " JOIN runs u ON t.run_id = u.run_id WHERE t.status = 'fail' AND u.started_at >= %s GROUP BY 1, 2",
        [since],
    ):
        failures[bucket(day), cls] += n
    for day, n in store.fetch(
        "SELECT substr(u.started_at, 1, 10), count(*) FROM results t JOIN runs u ON t.run_id = u.run_id"
        " WHERE u.started_at >= %s GROUP BY 1",
        [since],
    ):
        totals[bucket(day)] += n
    return [
        {"period": period, "class": cls, "failures": n, "results": totals[period]}
        for (period, cls), n in sorted(failures.items(), key=lambda kv: (kv[0][0], -kv[1], kv[0][1]))
    ]


def resolve_run(store: Store, wanted: str) -> str:
    """A run id, a unique prefix of one, ``latest`` or ``latest~N`` (N runs before it)."""
    if wanted == "latest" or wanted.startswith("latest~"):
        back = wanted.partition("~")[2] or "0"
        if not back.isdigit():
            raise HistoryError(f"not a run: {wanted!r} (use latest or latest~N)")
        found = store.fetch(
            "SELECT run_id FROM runs ORDER BY started_at DESC, run_id DESC LIMIT 1 OFFSET %s", [int(back)]
        )
        if not found:
            raise HistoryError(f"the history has no run {wanted!r}")
        return found[0][0]
    if store.fetch("SELECT 1 FROM runs WHERE run_id = %s", [wanted]):
        return wanted
    found = [r[0] for r in store.fetch(
        "SELECT run_id FROM runs WHERE strpos(run_id, %s) = 1 ORDER BY run_id LIMIT 4", [wanted]
    )]  # fmt: skip
    if len(found) == 1:
        return found[0]
    if not found:
        raise HistoryError(f"no run {wanted!r} in the history (see: cvdiag history runs)")
    raise HistoryError(f"{wanted!r} matches several runs: {', '.join(found[:3])}; give more of it")


def _run_tests(store: Store, run_id: str) -> dict[str, tuple[str, str | None, float | None]]:
    """name -> (status, class, duration) of one run; a name that ran twice keeps a failure."""
    tests: dict[str, tuple[str, str | None, float | None]] = {}
    for name, status, cls, dur in store.fetch(
        "SELECT name, status, cls, duration_ms FROM results WHERE run_id = %s ORDER BY name, test_id", [run_id]
    ):
        if name not in tests or status == "fail":
            tests[name] = (status, cls, dur)
    return tests


def diff(store: Store, run_a: str, run_b: str, *, slower: float = 1.5, min_ms: float = 100.0) -> dict[str, Any]:
    """What changed from run A to run B: new failures, fixed, a failure that changed
    class, and tests ``slower`` times slower (and at least ``min_ms`` more) with the
    same status in both (a failure that ends early is not faster)."""
    a_id, b_id = resolve_run(store, run_a), resolve_run(store, run_b)
    a, b = _run_tests(store, a_id), _run_tests(store, b_id)
    new, fixed, changed, slow = [], [], [], []
    for name in sorted(b):
        status, cls, dur = b[name]
        before = a.get(name)
        if status == "fail" and (before is None or before[0] != "fail"):
            new.append({"name": name, "class": cls, "before": before[0] if before else None})
        elif before is None:
            continue
        elif before[0] == "fail" and status == "pass":
            fixed.append({"name": name, "class_before": before[1]})
        elif before[0] == status == "fail" and before[1] != cls:
            changed.append({"name": name, "class_before": before[1], "class": cls})
        if before is not None and before[0] == status and _slower(before[2], dur, slower, min_ms):
            slow.append({"name": name, "before_ms": before[2], "after_ms": dur})
    return {"a": a_id, "b": b_id, "new_failures": new, "fixed": fixed, "changed_class": changed, "slower": slow}


def _slower(before: float | None, after: float | None, factor: float, min_ms: float) -> bool:
    return before is not None and after is not None and after >= before * factor and after - before >= min_ms


def strip(store: Store, names: Sequence[str], window: int = 50) -> dict[str, Any]:
    """Each test's status in each of the newest ``window`` runs (oldest first): the
    report's strip of runs per test."""
    recent = store.fetch(
        "SELECT run_id, started_at, commit_sha FROM runs ORDER BY started_at DESC, run_id DESC LIMIT %s", [window]
    )[::-1]
    ids = [r[0] for r in recent]
    cells: dict[str, dict[str, tuple[str, str | None]]] = defaultdict(dict)
    if ids and names:
        for name, run_id, status, cls in store.fetch(
            "SELECT name, run_id, status, cls FROM results WHERE run_id = ANY(%s) AND name = ANY(%s)",
            [ids, list(names)],
        ):
            if run_id not in cells[name] or status == "fail":
                cells[name][run_id] = (status, cls)
    return {
        "runs": [{"run_id": r, "started_at": s, "commit": c} for r, s, c in recent],
        "tests": {n: [list(cells[n][i]) if i in cells[n] else None for i in ids] for n in names},
    }
