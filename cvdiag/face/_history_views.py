"""What the ``history`` commands show a person: tables that give way on a narrow
terminal (80 columns keeps every row on one line) and a line under each."""

from __future__ import annotations

from typing import Any

from cvdiag.face.render import DIM, FAIL, OK, WARN, Column, Out, cut, ms, printable


def minutes(stamp: str | None) -> str:
    """``2026-11-21 10:00`` of a canonical stamp: minutes are enough across runs."""
    return "" if not stamp else stamp[:16].replace("T", " ")


def _short(commit: str | None) -> str:
    return (commit or "")[:10]


def recorded(out: Out, run: dict[str, Any] | None, done: Any) -> None:
    """What ``history add`` did: the kept runs it recorded first, then this run."""
    for note in done.notes:
        out.line(note, WARN)
    for run_id in done.earlier:
        out.line(f"recorded run {run_id}, kept from an earlier try, in {done.where}", OK)
    if run is None:
        return
    if done.added:
        out.line(f"recorded run {run['run_id']}: {run['tests']} tests, {run['failed']} failed, in {done.where}", OK)
    else:
        out.line(f"run {run['run_id']} is in {done.where} already: nothing changed", DIM)


def runs(out: Out, rows: list[dict[str, Any]]) -> None:
    columns = [
        Column("run", keep=True, min_width=16, middle=True),
        Column("started (UTC)", keep=True),
        Column("commit", rank=1),
        Column("branch", rank=2, min_width=8),
        Column("tests", right=True, rank=0),
        Column("failed", right=True, keep=True),
        Column("job", rank=3, min_width=12, middle=True),
    ]
    table = [
        [r["run_id"], minutes(r["started_at"]), _short(r["commit"]), r["branch"] or "", r["tests"], r["failed"],
         r["job_url"] or ""]
        for r in rows
    ]  # fmt: skip
    out.table(columns, table, [FAIL if r["failed"] else None for r in rows])
    out.line(f"{len(rows)} runs, newest first", DIM)


def _classes_text(classes: dict[str, int]) -> str:
    return ", ".join(f"{cls} {n}" for cls, n in classes.items())


def flaky(out: Out, rows: list[dict[str, Any]], window: int) -> None:
    columns = [
        Column("test", keep=True, min_width=20, middle=True),
        Column("runs", right=True, rank=2),
        Column("fail", right=True, keep=True),
        Column("rate", right=True, keep=True),
        Column("classes behind the failures", keep=True, min_width=14),
        Column("same commit", right=True, rank=3),
        Column("last pass", rank=1),
        Column("first seen", rank=5),
        Column("last seen", rank=4),
    ]
    table = [
        [r["name"], r["runs"], r["failures"], f"{r['flake_rate']:.0%}", _classes_text(r["classes"]),
         r["same_commit"] or "", _short(r["last_pass_commit"]), minutes(r["first_seen"]), minutes(r["last_seen"])]
        for r in rows
    ]  # fmt: skip
    out.table(columns, table, [WARN] * len(rows))
    out.line(f"{len(rows)} flaky tests: both passed and failed in the last {window} runs", WARN)


def show(out: Out, doc: dict[str, Any]) -> None:
    rows = doc["runs"]
    name = printable(doc["name"])
    out.line(cut(name, out.width or len(name), middle=True))
    columns = [
        Column("when (UTC)", keep=True),
        Column("commit", rank=1),
        Column("status", keep=True),
        Column("class", keep=True, min_width=10),
        Column("duration", right=True, rank=2),
        Column("reason", rank=0, min_width=16),
        Column("run", rank=3, min_width=12, middle=True),
    ]
    table = [
        [minutes(r["started_at"]), _short(r["commit"]), r["status"], r["class"] or "", ms(r["duration_ms"]),
         r["reason"] or "", r["run_id"]]
        for r in rows
    ]  # fmt: skip
    out.table(columns, table, [FAIL if r["status"] == "fail" else None for r in rows])
    failed = sum(r["status"] == "fail" for r in rows)
    out.line(f"{len(rows)} runs, {failed} failed, newest first", FAIL if failed else OK)


def classes(out: Out, rows: list[dict[str, Any]], by: str) -> None:
    columns = [
        Column(by, keep=True),
        Column("class", keep=True, min_width=12),
        Column("failures", right=True, keep=True),
        Column("of results", right=True, rank=0),
        Column("share", right=True, rank=1),
    ]
    table = [
        [r["period"], r["class"], r["failures"], r["results"], f"{r['failures'] / max(1, r['results']):.1%}"]
        for r in rows
    ]
    out.table(columns, table)
    out.line(f"{sum(r['failures'] for r in rows)} failures in {len({r['period'] for r in rows})} {by}s", DIM)


def diff(out: Out, doc: dict[str, Any]) -> None:
    out.line(f"from {doc['a']} to {doc['b']}")
    sections = (
        ("new failures", "new_failures", FAIL, lambda r: [r["name"], r["class"] or "", r["before"] or "absent"],
         ("test", "class", "before")),
        ("fixed", "fixed", OK, lambda r: [r["name"], r["class_before"] or ""], ("test", "class before")),
        ("changed class", "changed_class", WARN, lambda r: [r["name"], r["class_before"] or "", r["class"] or ""],
         ("test", "class before", "class now")),
        ("slower", "slower", WARN, lambda r: [r["name"], ms(r["before_ms"]), ms(r["after_ms"])],
         ("test", "before", "now")),
    )  # fmt: skip
    for title, key, style, cells, names in sections:
        rows = doc[key]
        out.line(f"{title}: {len(rows)}", style if rows else DIM)
        if rows:
            columns = [Column(names[0], keep=True, min_width=20, middle=True)]
            columns += [Column(n, keep=True, min_width=10, right=title == "slower") for n in names[1:]]
            out.table(columns, [cells(r) for r in rows])
