"""``cvdiag report --history DB``: the report's history page, drawn here as static HTML
and SVG (no script: the page is shown by CSS ``:target`` when its link is followed).

Failure classes over time as stacked bars, the flaky table, and a strip of the newest
runs per test. Every text from the database goes through ``printable`` and
``html.escape``: a test name is shown, never obeyed.
"""

from __future__ import annotations

import html
from importlib import resources
from typing import Any

from cvdiag.face._history_views import minutes
from cvdiag.face.render import printable
from cvdiag.history import queries
from cvdiag.history.store import Store

#: Okabe-Ito (colour-blind safe), then greys: one per class, in order of failures.
PALETTE = ("#d55e00", "#e69f00", "#0072b2", "#cc79a7", "#56b4e9", "#009e73", "#f0e442", "#000000", "#999999")
STRIP_RUNS = 50
FLAKY_ROWS = 30


def _e(value: Any) -> str:
    return html.escape(printable("" if value is None else str(value)), quote=True)


def _chart(rows: list[dict[str, Any]], colors: dict[str, str]) -> str:
    """Stacked bars: one per period, one segment per class, each with a tooltip."""
    periods = sorted({r["period"] for r in rows})
    if not periods:
        return '<p class="muted" id="history-no-failures">No failures recorded.</p>'
    per: dict[str, list[dict[str, Any]]] = {p: [] for p in periods}
    for r in rows:
        per[r["period"]].append(r)
    top = max(sum(r["failures"] for r in per[p]) for p in periods)
    width, height, pad = max(320, 28 * len(periods) + 40), 180, 24
    bar = (width - 2 * pad) / len(periods)
    parts = [f'<svg id="history-classes" role="img" aria-label="failures per class over time" '
             f'width="{width}" height="{height + 40}" viewBox="0 0 {width} {height + 40}">']  # fmt: skip
    for i, p in enumerate(periods):
        y = height
        for r in sorted(per[p], key=lambda r: r["class"]):
            h = (height - pad) * r["failures"] / top
            y -= h
            parts.append(
                f'<rect class="seg" data-class="{_e(r["class"])}" data-period="{_e(p)}" x="{pad + i * bar + 2:.1f}" '
                f'y="{y:.1f}" width="{max(1.0, bar - 4):.1f}" height="{h:.1f}" fill="{colors[r["class"]]}">'
                f"<title>{_e(p)}: {_e(r['class'])} {r['failures']} of {r['results']} results</title></rect>"
            )
        if len(periods) <= 16 or i % max(1, len(periods) // 8) == 0:
            parts.append(f'<text x="{pad + i * bar + bar / 2:.1f}" y="{height + 16}" text-anchor="middle" '
                         f'class="tick">{_e(p[5:])}</text>')  # fmt: skip
    parts.append(f'<text x="{pad}" y="{pad - 8}" class="tick">{top} failures</text></svg>')
    legend = "".join(
        f'<span class="swatch-item"><span class="swatch" style="background:{c}"></span>{_e(cls)}</span>'
        for cls, c in colors.items()
    )
    return "".join(parts) + f'<div class="legend" id="history-legend">{legend}</div>'


def _flaky_table(rows: list[dict[str, Any]]) -> str:
    if not rows:
        return '<p class="muted" id="history-no-flaky">No test both passed and failed in these runs.</p>'
    head = "".join(f"<th>{h}</th>" for h in ("test", "runs", "failures", "rate", "classes behind the failures",
                                             "same commit", "last pass", "first seen", "last seen"))  # fmt: skip
    body = []
    for r in rows:
        classes = ", ".join(f"{_e(c)} {n}" for c, n in r["classes"].items())
        cells = [f'<td class="mono">{_e(r["name"])}</td>', f'<td class="num">{r["runs"]}</td>',
                 f'<td class="num">{r["failures"]}</td>', f'<td class="num">{r["flake_rate"]:.0%}</td>',
                 f"<td>{classes}</td>", f'<td class="num">{r["same_commit"]}</td>',
                 f'<td class="mono">{_e((r["last_pass_commit"] or "")[:10])}</td>',
                 f"<td>{_e(minutes(r['first_seen']))}</td>", f"<td>{_e(minutes(r['last_seen']))}</td>"]  # fmt: skip
        body.append("<tr>" + "".join(cells) + "</tr>")
    return f'<table id="history-flaky"><thead><tr>{head}</tr></thead><tbody>{"".join(body)}</tbody></table>'


def _strip(doc: dict[str, Any], colors: dict[str, str]) -> str:
    runs = doc["runs"]
    rows = []
    for name, cells in doc["tests"].items():
        marks = []
        for run, cell in zip(runs, cells, strict=True):
            status, cls = cell if cell else ("absent", None)
            tip = f"{minutes(run['started_at'])} · {run['run_id']} · {run['commit'] or ''} · {status}"
            tip += f" · {cls}" if status == "fail" and cls else ""
            style = f' style="background:{colors.get(cls or "none", PALETTE[-1])}"' if status == "fail" else ""
            marks.append(f'<span class="run {status}" data-run="{_e(run["run_id"])}"{style} title="{_e(tip)}">'
                         f'{"✖" if status == "fail" else ""}</span>')  # fmt: skip
        rows.append(f'<tr><td class="mono">{_e(name)}</td><td class="runs">{"".join(marks)}</td></tr>')
    if not rows:
        return ""
    return (f'<table id="history-strip"><thead><tr><th>test</th><th>the last {len(runs)} runs, oldest first'
            f'</th></tr></thead><tbody>{"".join(rows)}</tbody></table>')  # fmt: skip


def section(store: Store) -> str:
    """The history page and the link to it, to put at the end of the report's body."""
    runs = queries.runs(store, limit=1_000_000)
    days = sorted({r["started_at"][:10] for r in runs})
    by = "week" if len(days) > 60 else "day"
    classes = queries.classes(store, by=by)
    totals: dict[str, int] = {}
    for r in classes:
        totals[r["class"]] = totals.get(r["class"], 0) + r["failures"]
    ordered = sorted(totals, key=lambda c: (-totals[c], c))
    colors = {c: PALETTE[min(i, len(PALETTE) - 1)] for i, c in enumerate(ordered)}
    flaky = queries.flaky(store, limit=FLAKY_ROWS)
    strip = queries.strip(store, [r["name"] for r in flaky], STRIP_RUNS)
    span = f"from {_e(days[0])} to {_e(days[-1])}" if days else ""
    css = resources.files(__package__).joinpath("report_assets", "history.css").read_text(encoding="utf-8")
    return "\n".join([
        f"<style>{css}</style>",
        f'<nav class="history-nav"><a href="#history" id="history-link">History: {len(runs)} runs, '
        f"{len(flaky)} flaky tests</a></nav>",
        '<section id="history" class="history"><main>',
        '<p><a href="#" id="history-back">‹ back to the tests</a></p>',
        f"<h1>History</h1><p class=\"muted\">{len(runs)} runs {span} in {_e(store.where)}</p>",
        f"<h2>Failure classes per {by}</h2>",
        _chart(classes, colors),
        f"<h2>Flaky tests</h2><p class=\"muted\">Both passed and failed in the last {queries.DEFAULT_WINDOW} runs."
        "</p>",
        _flaky_table(flaky),
        "<h2>Runs per test</h2>",
        _strip(strip, colors),
        "</main></section>",
    ])  # fmt: skip
