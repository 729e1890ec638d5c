"""Per slug and boundary counts, and latency percentiles in constant memory.

Percentiles come from a log-bucketed histogram (about 1 % relative error, exact below
128 ms), so a log of any size costs a few kilobytes per (slug, metric).
"""

from __future__ import annotations

import math
import os
from collections.abc import Iterable
from typing import Any

from cvdiag.contract.schema import OUTCOMES

_EXACT = 128
_GROWTH = math.log(1.01)

#: metric name -> (boundary, metadata key) it is read from.
METRICS: dict[str, tuple[str, str]] = {
    "request_ms": ("backend.response.complete", "total_duration_ms"),
    "ttfb_ms": ("backend.sse.first_byte", "delta_ms_from_ingress"),
    "llm_latency_ms": ("backend.llm.call.response", "latency_ms"),
}
_BY_BOUNDARY = {b: (name, key) for name, (b, key) in METRICS.items()}

#: Rows kept, whatever the log: a log of a million made-up boundary names would
#: otherwise cost a row each (1.4 GB). The rest are counted in one row, and said so.
MAX_ROWS = int(os.environ.get("CVDIAG_STATS_MAX_ROWS", 10_000))
OTHER = "(others)"


def _bucket(v: float) -> int:
    if v < _EXACT:
        return max(0, int(v))
    return _EXACT + int(math.log(v / _EXACT) / _GROWTH)


def _value(bucket: int) -> float:
    if bucket < _EXACT:
        return float(bucket)
    return _EXACT * math.exp((bucket - _EXACT + 1) * _GROWTH)  # the bucket's upper edge


class Histogram:
    __slots__ = ("buckets", "count", "max")

    def __init__(self) -> None:
        self.buckets: dict[int, int] = {}
        self.count = 0
        self.max: float | None = None

    def add(self, v: float) -> None:
        b = _bucket(v)
        self.buckets[b] = self.buckets.get(b, 0) + 1
        self.count += 1
        if self.max is None or v > self.max:
            self.max = v

    def absorb(self, other: Histogram) -> None:
        """``other``'s values added to these."""
        for b, n in other.buckets.items():
            self.buckets[b] = self.buckets.get(b, 0) + n
        self.count += other.count
        if other.max is not None and (self.max is None or other.max > self.max):
            self.max = other.max

    def percentile(self, p: float) -> float | None:
        if not self.count:
            return None
        rank = max(1, math.ceil(self.count * p / 100))
        seen = 0
        for b in sorted(self.buckets):
            seen += self.buckets[b]
            if seen >= rank:
                return min(round(_value(b), 1), self.max) if self.max is not None else _value(b)
        return self.max


class Stats:
    """Folds envelopes into counts per (slug, boundary) and histograms per (slug, metric)."""

    def __init__(self, max_rows: int = MAX_ROWS) -> None:
        self.counts: dict[tuple[str, str], dict[str, int]] = {}
        self.latency: dict[tuple[str, str], Histogram] = {}
        self.max_rows = max_rows
        self.folded = 0  # envelopes counted under OTHER once the rows were all taken

    def note(self) -> str | None:
        """The stderr note when rows were folded, else None."""
        if not self.folded:
            return None
        return (
            f"cvdiag: more than {self.max_rows:,} slug and boundary pairs: "
            f"{self.folded:,} envelopes of the others are counted under {OTHER!r}"
        )

    def row_for(self, slug: str, boundary: str, outcome: str) -> tuple[tuple[str, str], bool]:
        """(the key of the row an envelope of (slug, boundary, outcome) counts in, whether
        it is folded under ``(others)`` as ``max_rows`` are taken), the row and its outcome
        column made now when this is the first: what ``add`` and a count made elsewhere
        (``add_counts``) share, so rows are made in file order either way."""
        key = (slug, boundary)
        row = self.counts.get(key)
        folded = row is None and len(self.counts) >= self.max_rows
        if folded:
            key = (OTHER, OTHER)
            row = self.counts.get(key)
        if row is None:
            row = self.counts[key] = dict.fromkeys(("count", *OUTCOMES), 0)
        row.setdefault(outcome, 0)
        return key, folded

    def add_counts(self, key: tuple[str, str], outcome: str, n: int, folded: bool) -> None:
        """``n`` envelopes of the row ``key`` (from ``row_for``) and ``outcome``."""
        row = self.counts[key]
        row["count"] += n
        row[outcome] += n
        if folded:
            self.folded += n

    def add(self, env: dict[str, Any]) -> None:
        slug, boundary, outcome = env.get("slug"), env["boundary"], env["outcome"]
        slug = slug if isinstance(slug, str) else ""
        key, folded = self.row_for(slug, boundary, outcome)
        self.add_counts(key, outcome, 1, folded)
        slug, boundary = key
        metric = _BY_BOUNDARY.get(boundary)
        if metric is not None:
            md = env.get("metadata")
            v = md.get(metric[1]) if isinstance(md, dict) else None
            if isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v) and v >= 0:
                self._histogram(slug, metric[0]).add(v)

    def merge(self, later: Stats) -> None:
        """``later``'s counts after this one's, as if its envelopes had come next: its rows
        in the order it made them, each made here or folded under ``(others)`` (its latency
        left out, as ``add`` leaves a folded envelope's) as ``row_for`` decides. Exact only
        when ``later`` folded nothing: a pair it folded may be one of the rows here."""
        for (slug, boundary), row in later.counts.items():
            folded = False
            for outcome, n in row.items():
                if outcome == "count":
                    continue
                key, folded = self.row_for(slug, boundary, outcome)
                self.add_counts(key, outcome, n, folded)
            metric = _BY_BOUNDARY.get(boundary)
            hist = later.latency.get((slug, metric[0])) if metric is not None else None
            if hist is not None and not folded:
                self._histogram(slug, metric[0]).absorb(hist)

    def _histogram(self, slug: str, metric: str) -> Histogram:
        """The histogram of ``(slug, metric)``, made now (or the others' past ``max_rows``)."""
        h = self.latency.get((slug, metric))
        if h is None and len(self.latency) >= self.max_rows:
            slug = OTHER
            h = self.latency.get((slug, metric))
        if h is None:
            h = self.latency[(slug, metric)] = Histogram()
        return h

    def boundary_rows(self) -> list[dict[str, Any]]:
        return [{"slug": s, "boundary": b, **row} for (s, b), row in sorted(self.counts.items())]

    def latency_rows(self) -> list[dict[str, Any]]:
        order = list(METRICS)
        rows = []
        for (slug, metric), h in sorted(self.latency.items(), key=lambda kv: (kv[0][0], order.index(kv[0][1]))):
            rows.append(
                {
                    "slug": slug,
                    "metric": metric,
                    "count": h.count,
                    "p50": h.percentile(50),
                    "p90": h.percentile(90),
                    "p99": h.percentile(99),
                    "max": h.max,
                }
            )
        return rows


def collect(envelopes: Iterable[dict[str, Any]]) -> Stats:
    stats = Stats()
    for env in envelopes:
        stats.add(env)
    return stats
