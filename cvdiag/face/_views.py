"""What each command shows a person: its tables and lines, drawn through ``render.Out``.

The commands decide what to show; these functions decide how it looks (columns, their
order and how they give way, styles, cut details), so a look changes in one place.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from cvdiag.face.render import (
    FAIL,
    OK,
    WARN,
    Column,
    Out,
    counted,
    ms,
    offset,
    timeline_row,
    timeline_table,
    tool_calls_table,
    unique_prefixes,
)
from cvdiag.read import correlate, inventory, toolcalls

# -- tests ----------------------------------------------------------------------------


def tests_table(out: Out, rows: list[dict[str, Any]], prefixes: Mapping[str, str] | None, date: str | None) -> None:
    """The ``tests`` table: ids never wrapped (cut in the middle, past their unique
    prefix: ``prefixes``, None where nothing is cut), columns dropped by usefulness when
    the terminal is narrow; a time of day when every test started on one ``date``."""
    # prefix, "…", 4 last characters
    id_width = None if prefixes is None else max(len(prefixes[r["test_id"]]) for r in rows) + 5
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
    starts = [r["first_ts"] for r in rows]
    values = [
        [r["test_id"] for r in rows],
        [r["slug"] for r in rows],
        [",".join(r["layers"]) for r in rows],
        [r["events"] for r in rows],
        [ts[11:23] for ts in starts] if date is not None else starts,
        list(map(ms, [r["duration_ms"] for r in rows])),
        [r["terminal"] for r in rows],
        [r["status"] for r in rows],
    ]
    if "class" in rows[0]:
        columns.append(Column("class", keep=True, rank=1))
        values.append([r["class"] or "" for r in rows])
    if any("node_id" in r for r in rows):  # a harness wrote the pytest node id: beside the test id
        columns.insert(1, Column("pytest node id", rank=2, min_width=24, middle=True))
        values.insert(1, [r.get("node_id", "") for r in rows])
    styles = [FAIL if r["status"] == "fail" else None for r in rows]
    out.table(columns, values, styles, by_column=True)


def tests_summary(
    out: Out,
    rows: list[dict[str, Any]],
    hint: Sequence[str] | None,
    date: str | None,
    *,
    minted: int = 0,
    default_tier: int = 0,
) -> None:
    """The line under the table (how many, how many failed, the ``date`` they share), the
    requests that came without a test id (``minted``), and a command to run next."""
    failed = sum(r["status"] == "fail" for r in rows)
    out.line(
        f"{counted(len(rows), 'test')}, {failed} failed" + (f", on {date} (UTC)" if date else ""),
        FAIL if failed else OK,
    )
    if default_tier:
        n = default_tier
        who = "every test was" if n == len(rows) else f"{counted(n, 'test')} of them {'was' if n == 1 else 'were'}"
        out.prose(f"{who} {inventory.DEFAULT_TIER_NOTE}", WARN)
    if minted:
        out.prose(
            f"{counted(minted, 'request')} came without an x-test-id (health checks, probes?): the server"
            " minted {} id{}; they are counted above".format(
                "its" if minted == 1 else "their", "" if minted == 1 else "s"
            ),
            WARN,
        )
    if hint:
        out.command(hint, indent="", prompt="next:")


# -- timeline -------------------------------------------------------------------------


def followed_line(out: Out, env: dict[str, Any], source: str) -> None:
    """An envelope that ``--follow`` saw appended: one timeline row, its time in full."""
    row, style = timeline_row(correlate.Entry(0, 0, "envelope", env, source), 0.0)
    row[0] = env["ts"]
    out.line("  ".join(str(c) for c in row if c), style)
    out.stream.flush()


def timeline(out: Out, tl: correlate.Timeline, d: Any) -> None:
    """A test's header line, its verdict (``d``, may be None) and its events in time order."""
    envs = tl.envelopes
    slugs = sorted({e.get("slug") for e in envs if isinstance(e.get("slug"), str)})
    if tl.test_id:
        out.prose(f"test {tl.test_id}  slug {','.join(slugs) or '-'}  {counted(len(envs), 'event')}", "bold")
    if d is not None:
        out.line(f"verdict: {d.cls} (confidence {d.confidence:.2f})", OK if d.cls == "ok" else FAIL)
        out.prose(d.reason, indent="  ")
    if inventory.at_default_tier(e.get("boundary", "") for e in envs):
        out.prose(f"note: {inventory.DEFAULT_TIER_NOTE}", WARN)
    tool_calls_table(out, toolcalls.tool_calls(envs))
    timeline_table(out, tl.entries)


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
    # on a narrow terminal the rarer outcomes give way first (they stay in --json)
    rank = {"timeout": 1, "info": 2}
    out.table(
        [
            Column(
                c,
                keep=c not in rank,
                rank=rank.get(c, 0),
                right=c not in ("slug", "boundary"),
                min_width=8 if c == "slug" else None,
            )
            for c in cols
        ],
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
    """One verdict in full, or a table of many (a reason wrapped in its column when the terminal is narrow)."""
    if len(found) == 1:
        v = found[0]
        out.line(f"test {v['test_id']}", "bold")
        out.line(f"verdict: {v['class']} (confidence {v['confidence']:.2f})", OK if v["class"] == "ok" else FAIL)
        out.prose(v["reason"], indent="  ")
        return
    rows = [[v["test_id"], v["class"], f"{v['confidence']:.2f}", v["reason"]] for v in found]
    prefixes = unique_prefixes([v["test_id"] for v in found])
    columns = [
        Column("test_id", keep=True, min_width=max(map(len, prefixes.values())) + 5, middle=True),
        Column("class", keep=True),
        Column("confidence", right=True, rank=1),
        Column("reason", keep=True, min_width=20, wrap=True),
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
        out.prose(f"{name} {tid}  {cls}  {ms(total)}{tools}", "bold" if cls == "ok" else FAIL)
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
