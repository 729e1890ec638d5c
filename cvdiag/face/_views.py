"""What each command shows a person: its tables and lines, drawn through ``render.Out``.

The commands decide what to show; these functions decide how it looks (columns, their
order and how they give way, styles, cut details), so a look changes in one place.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Sequence
from typing import Any

from cvdiag.contract.schema import FAILURE_OUTCOMES
from cvdiag.face.render import DIM, FAIL, OK, WARN, Column, Out, ms, offset, one_utc_date, unique_prefixes
from cvdiag.read import correlate, toolcalls
from cvdiag.read.jsonout import dumps

#: A gap between two events of a timeline longer than this gets its own row.
SILENCE_S = 1.0
_DETAIL_CHARS = 110


# -- tests ----------------------------------------------------------------------------


def tests_table(out: Out, rows: list[dict[str, Any]], prefixes: dict[str, str]) -> None:
    """The ``tests`` table: ids never wrapped (cut in the middle, past their unique
    prefix), columns dropped by usefulness when the terminal is narrow."""
    clock = one_utc_date([r["first_ts"] for r in rows]) is not None
    id_width = max(len(prefixes[r["test_id"]]) for r in rows) + 5  # prefix, "…", 4 last characters
    columns = [
        Column("test_id", keep=True, min_width=id_width, middle=True),
        Column("slug", rank=3, min_width=8),
        Column("layers", rank=7),
        Column("events", right=True, rank=6),
        Column("start", rank=4),
        Column("duration", right=True, keep=True, rank=2),
        Column("terminal", rank=5),
        Column("status", keep=True, rank=0),
    ]
    with_class = "class" in rows[0]
    if with_class:
        columns.append(Column("class", keep=True, rank=1))
    table = []
    for r in rows:
        start = r["first_ts"][11:23] if clock else r["first_ts"]
        cells = [r["test_id"], r["slug"], ",".join(r["layers"]), r["events"], start, ms(r["duration_ms"])]
        cells += [r["terminal"], r["status"]] + ([r["class"] or ""] if with_class else [])
        table.append(cells)
    out.table(columns, table, [FAIL if r["status"] == "fail" else None for r in rows])


def tests_summary(out: Out, rows: list[dict[str, Any]], hint: Sequence[str] | None) -> None:
    """The line under the table (how many, how many failed, the day) and a command to run next."""
    import shlex

    failed = sum(r["status"] == "fail" for r in rows)
    date = one_utc_date([r["first_ts"] for r in rows])
    out.line(f"{len(rows)} tests, {failed} failed" + (f", on {date} (UTC)" if date else ""), FAIL if failed else OK)
    if hint:
        out.line(f"next: {shlex.join(hint)}", DIM)


# -- timeline -------------------------------------------------------------------------


def _details(env: dict[str, Any]) -> str:
    tool = toolcalls.describe(env)
    if tool is not None:  # the tool, where it ran and how it failed, before any number
        return _cut(tool)
    parts = []
    md = env.get("metadata")
    for k, v in md.items() if isinstance(md, dict) else ():
        if v is None:
            continue
        parts.append(f"{k}={v if isinstance(v, str | int | float) else dumps(v).decode()}")
    edges = env.get("edge_headers")
    for k, v in edges.items() if isinstance(edges, dict) else ():
        if v is not None:
            parts.append(f"{k}={v}")
    return _cut(" ".join(parts))


def _cut(text: str) -> str:
    return text if len(text) <= _DETAIL_CHARS else text[: _DETAIL_CHARS - 1] + "…"


def _timeline_rows(entries: list[correlate.Entry]) -> Iterator[tuple[list[Any], str | None]]:
    if not entries:
        return
    start = entries[0].key[0]
    prev = start
    for e in entries:
        gap = e.key[0] - prev
        if gap > SILENCE_S:
            yield ["", "", f"··· no event for {gap:.1f} s", "", "", ""], WARN
        prev = max(prev, e.key[0])
        yield timeline_row(e, e.key[0] - start)


def timeline_row(e: correlate.Entry, since: float) -> tuple[list[Any], str | None]:
    """One timeline entry's cells (``since``: seconds after the first entry) and its style."""
    if e.kind == "envelope":
        env = e.data
        failed = env.get("outcome") in FAILURE_OUTCOMES
        cells = [offset(since), env.get("layer"), env.get("boundary"), env.get("outcome"), ms(env.get("duration_ms"))]
        return [*cells, _details(env)], FAIL if failed else None
    if e.kind == "breadcrumb":
        b = e.data
        rest = " ".join(f"{k}={v}" for k, v in b.items() if k not in ("component", "boundary", "status", "test_id"))
        status = b.get("status", "")
        cells = [offset(since), b.get("component", "legacy"), f"breadcrumb {b.get('boundary', '')}", status, ""]
        return [*cells, rest[:_DETAIL_CHARS]], FAIL if status in ("miss", "error") else DIM
    text = e.data if len(e.data) <= _DETAIL_CHARS else e.data[: _DETAIL_CHARS - 1] + "…"
    return [offset(since), "log", os.path.basename(e.source), "", "", text], DIM


def followed_line(out: Out, env: dict[str, Any], source: str) -> None:
    """An envelope that ``--follow`` saw appended: one timeline row, its time in full."""
    row, style = timeline_row(correlate.Entry((0.0, 0, 0), "envelope", env, source), 0.0)
    row[0] = env["ts"]
    out.line("  ".join(str(c) for c in row if c), style)
    out.stream.flush()


_TIMELINE_COLUMNS = [
    Column("t", right=True, keep=True, rank=1),
    Column("layer", rank=4),
    Column("boundary", keep=True),
    Column("outcome", keep=True, rank=0),
    Column("duration", right=True, keep=True, rank=2),
    Column("details", keep=True, rank=3, min_width=12),
]


def timeline(out: Out, tl: correlate.Timeline, d: Any) -> None:
    """A test's header line, its verdict (``d``, may be None) and its events in time order."""
    envs = tl.envelopes
    slugs = sorted({e.get("slug") for e in envs if isinstance(e.get("slug"), str)})
    if tl.test_id:
        out.line(f"test {tl.test_id}  slug {','.join(slugs) or '-'}  {len(envs)} events", "bold")
    if d is not None:
        out.line(f"verdict: {d.cls} (confidence {d.confidence:.2f})", OK if d.cls == "ok" else FAIL)
        out.prose(d.reason, indent="  ")
    tool_calls(out, toolcalls.tool_calls(envs))
    rows = list(_timeline_rows(tl.entries))
    if rows:
        out.table(_TIMELINE_COLUMNS, [r for r, _ in rows], [s for _, s in rows])


_TOOL_COLUMNS = [
    Column("tool", keep=True, min_width=8),
    Column("source", rank=2),
    Column("server", rank=3),
    Column("outcome", keep=True),
    Column("duration", right=True, rank=1),
    Column("error", keep=True, min_width=12),
]


def tool_calls(out: Out, calls: list[toolcalls.ToolCall]) -> None:
    """A test's tool calls, failed first: what ran where, how it ended, the error's excerpt."""
    if not calls:
        return
    out.line(f"tool calls: {toolcalls.summary(calls)}", FAIL if any(c.failed for c in calls) else None)
    shown = sorted(calls, key=lambda c: not c.failed)[: toolcalls.MAX_SHOWN]
    rows = [[c.name, c.seen_on or "", c.server or "", c.outcome, ms(c.duration_ms), c.failure()] for c in shown]
    out.table(_TOOL_COLUMNS, rows, [FAIL if c.failed else None for c in shown])
    if len(calls) > len(shown):
        out.line(f"... {len(calls) - len(shown)} more tool calls", DIM)
    out.line()


def timeline_json(tl: correlate.Timeline, d: Any, with_logs: bool) -> dict[str, Any]:
    """``timeline --json``: the verdict, the tool calls, the envelopes, breadcrumbs and (asked
    for) log lines."""
    doc: dict[str, Any] = {
        "test_id": tl.test_id,
        "diagnosis": d.to_json() if d is not None else None,
        "tool_calls": [c.to_json() for c in toolcalls.tool_calls(tl.envelopes)],
        "events": tl.envelopes,
        "breadcrumbs": [e.data for e in tl.entries if e.kind == "breadcrumb"],
    }
    if with_logs:
        doc["logs"] = [{"source": e.source, "text": e.data} for e in tl.entries if e.kind == "log"]
    return doc


# -- stats ----------------------------------------------------------------------------


def stats(out: Out, boundaries: list[dict[str, Any]], latency: list[dict[str, Any]]) -> None:
    """Counts per slug and boundary, then latency percentiles per slug and metric."""
    cols = ["slug", "boundary", "count", "ok", "err", "timeout", "info"]
    out.table(
        [Column(c, keep=True, right=c not in ("slug", "boundary")) for c in cols],
        [[r[c] for c in cols] for r in boundaries],
        [FAIL if r["err"] or r["timeout"] else None for r in boundaries],
    )
    if latency:
        out.line()
        lcols = ["slug", "metric", "count", "p50", "p90", "p99", "max"]
        lrows = [[r["slug"], r["metric"], r["count"], *(ms(r[c]) for c in lcols[3:])] for r in latency]
        out.table([Column(c, keep=True, right=c not in ("slug", "metric")) for c in lcols], lrows)


# -- diagnose -------------------------------------------------------------------------


def verdicts(out: Out, found: list[dict[str, Any]]) -> None:
    """One verdict in full, or a table of many (its reasons cut: ``diagnose ID`` says it whole)."""
    if len(found) == 1:
        v = found[0]
        out.line(f"test {v['test_id']}", "bold")
        out.line(f"verdict: {v['class']} (confidence {v['confidence']:.2f})", OK if v["class"] == "ok" else FAIL)
        out.line(f"  {v['reason']}")
        return
    rows = [[v["test_id"], v["class"], f"{v['confidence']:.2f}", v["reason"]] for v in found]
    prefixes = unique_prefixes([v["test_id"] for v in found])
    columns = [
        Column("test_id", keep=True, min_width=max(map(len, prefixes.values())) + 5, middle=True),
        Column("class", keep=True),
        Column("confidence", right=True, rank=1),
        Column("reason", keep=True, min_width=20),
    ]
    out.table(columns, rows, [None if v["class"] == "ok" else FAIL for v in found])


# -- compare --------------------------------------------------------------------------


def comparison(out: Out, result: Any, found: list[Any]) -> None:
    """Both tests' verdicts (``found``: A's, B's), the first divergence, and the aligned steps."""
    for name, tid, d, total, calls in (
        ("A", result.a_id, found[0], result.a_duration_ms, result.a_tools),
        ("B", result.b_id, found[1], result.b_duration_ms, result.b_tools),
    ):
        cls = d.cls if d is not None else "-"
        tools = f"  {toolcalls.summary(calls)}" if calls else ""
        out.line(f"{name} {tid}  {cls}  {ms(total)}{tools}", "bold" if cls == "ok" else FAIL)
    first = result.divergence_index
    if first is None:
        out.line("no divergence: same boundaries, outcomes and timing", OK)
    else:
        out.prose(f"first divergence: {result.divergence}", FAIL)
    columns = [
        Column("", keep=True),
        Column("boundary", keep=True),
        Column("A t", right=True, rank=4),
        Column("A", keep=True, rank=1),
        Column("A dur", right=True, rank=2),
        Column("B t", right=True, rank=4),
        Column("B", keep=True, rank=1),
        Column("B dur", right=True, rank=2),
        Column("difference", rank=3, min_width=12),
    ]
    rows, styles = [], []
    for i, step in enumerate(result.steps):
        cells: list[Any] = [">" if i == first else "*" if step.differences else "", step.boundary]
        for side in (step.a, step.b):
            cells += [offset(side.offset_s), side.outcome_text, ms(side.duration_ms)] if side else ["", "-", ""]
        rows.append([*cells, "; ".join(step.differences)])
        styles.append(FAIL if i == first else WARN if step.differences and not step.minor else None)
    out.table(columns, rows, styles)
