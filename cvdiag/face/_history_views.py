"""What the ``history`` commands show a person: tables that give way on a narrow
terminal (80 columns keeps every row on one line) and a line under each."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from cvdiag.face import render
from cvdiag.face.render import DIM, FAIL, OK, WARN, Column, Out, cut, fit, ms, printable


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
    """The flaky tests. The classes are what this table is for: on a narrow terminal
    they widen first (rank -1) and the names give way, cut so that two names stay two."""
    columns = [
        Column("test", keep=True, min_width=16, middle=True),
        Column("runs", right=True, rank=2),
        Column("fail", right=True, keep=True),
        Column("rate", right=True, keep=True),
        Column("classes behind the failures", keep=True, min_width=14, rank=-1),
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
    _table_of_names(out, columns, table, [WARN] * len(rows))
    out.line(f"{len(rows)} flaky tests: both passed and failed in the last {window} runs", WARN)


def _table_of_names(out: Out, columns: list[Column], rows: list[list[Any]], styles: list[str | None]) -> None:
    """A table whose first column is a test's name: the names cut to the width the table
    gives them in a way that keeps different names different (``apart``)."""
    texts = [[printable(str(v)) for v in cells] for cells in zip(*rows, strict=True)]
    widths = fit(columns, texts, out.width, 3 if out.color else 2)
    width = widths[0]
    if width is not None and max(map(_cells, texts[0])) > width:
        names = apart(texts[0], width)
        rows = [[names[i], *row[1:]] for i, row in enumerate(rows)]
        columns = [replace(columns[0], min_width=None), *columns[1:]]  # cut already: never again
    out.table(columns, rows, styles)


#: Terminal columns a text takes (wide characters two, where ``render`` counts them so).
_cells = getattr(render, "cells", len)


def apart(names: list[str], width: int) -> list[str]:
    """Each name in at most ``width`` columns, cut in the middle, and, where two names
    cut alike, cut around the place where they differ instead (``tests/t.py…[b-long…``):
    two ids that differ only in their middle never print alike."""
    cuts = [cut(n, width, middle=True) for n in names]
    by_cut: dict[str, set[str]] = {}
    for name, shown in zip(names, cuts, strict=True):
        by_cut.setdefault(shown, set()).add(name)
    alike = {name: group for group in by_cut.values() if len(group) > 1 for name in group}
    return [_around(n, width, alike[n]) if n in alike else c for n, c in zip(names, cuts, strict=True)]


def _around(name: str, width: int, group: set[str]) -> str:
    """``name`` in ``width`` columns showing its start and where it first differs from
    the others of ``group``."""
    differs = max(_shared(name, other) for other in group if other != name)
    head = max(1, min(width // 3, differs))
    for room in range(width - head - 1, 1, -1):  # after the head and its "…"; less where characters are wide
        start = max(head, min(differs - room // 2, len(name) - room))
        if start == head:  # the head reaches the difference: no gap to mark
            return cut(name, width)
        tail = name[start:]
        shown = name[:head] + "…" + (tail if len(tail) <= room else tail[: room - 1] + "…")
        if _cells(shown) <= width:
            return shown
    return cut(name, width)


def _shared(a: str, b: str) -> int:
    """How many first characters ``a`` and ``b`` share."""
    return next((i for i, (x, y) in enumerate(zip(a, b, strict=False)) if x != y), min(len(a), len(b)))


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
    header = f"from {doc['a']} to {doc['b']}"
    if out.width is None or len(header) <= out.width:
        out.line(header)
    else:  # two long run ids: one a line, each cut in its middle (the end tells legs apart)
        out.line(cut(f"from {doc['a']}", out.width, middle=True))
        out.line(cut(f"to   {doc['b']}", out.width, middle=True))
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
        if rows:  # the classes and times widen first (rank -1), the names give way
            columns = [Column(names[0], keep=True, min_width=20, middle=True)]
            columns += [Column(n, keep=True, min_width=10, right=title == "slower", rank=-1) for n in names[1:]]
            _table_of_names(out, columns, [cells(r) for r in rows], [style] * len(rows))
