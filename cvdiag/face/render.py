"""Human output: rich tables and colour on a terminal, plain aligned text otherwise, and
the one look of a test's tool calls and timeline (``tool_calls_table``, ``timeline_table``)
that every face draws.

``rich`` is imported only when something is drawn in colour, so that piped runs and
``--json`` start fast. Plain output never contains an escape code.
"""

from __future__ import annotations

import bisect
import itertools
import os
import sys
import unicodedata
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, TextIO

from cvdiag.contract.schema import FAILURE_OUTCOMES
from cvdiag.read import toolcalls
from cvdiag.read.jsonout import dumps
from cvdiag.read.timeline import Entry

#: Style names per cell meaning; rich understands them, plain output ignores them.
FAIL = "bold red"
WARN = "yellow"
DIM = "dim"
OK = "green"


def _text(value: Any) -> str:
    """A cell's text: nothing for None."""
    return "" if value is None else str(value)


def printable(text: str) -> str:
    """``text`` with every character Python calls unprintable shown as an
    escape (``\\xNN``, ``\\uXXXX``), so log content can never drive the terminal: C0
    and C1 controls (ESC sequences, BEL, CR overwriting a line), bidi overrides and line
    separators that reorder or spoof what is shown, lone surrogates and non-characters
    that XML cannot hold."""
    if text.isprintable():  # C speed, the common case
        return text
    return "".join(c if c.isprintable() else _escaped(c) for c in text)


def _escaped(char: str) -> str:
    code = ord(char)
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}" if code < 0x10000 else f"\\U{code:08x}"


@dataclass(frozen=True, slots=True)
class Column:
    """A table column and how it gives way when the terminal is narrow."""

    name: str
    #: Right-aligned (numbers).
    right: bool = False
    #: Usefulness: when not every column fits, lower ranks are kept first.
    rank: int = 0
    #: Always shown, however narrow (the columns a row means nothing without).
    keep: bool = False
    #: The width it may shrink to (None: never shrinks).
    min_width: int | None = None
    #: Shrinks by cutting the middle (ids: the start identifies, the end tells apart).
    middle: bool = False
    #: Narrowed, its long cells go on over the next lines instead of being cut (a
    #: reason, an event's details: the end of them is what explains).
    wrap: bool = False


def cells(text: str) -> int:
    """How many terminal columns ``text`` takes: wide (East Asian) characters two,
    combining marks none."""
    if text.isascii():  # the common case, at C speed
        return len(text)
    return sum(_cell(c) for c in text)


def _cell(char: str) -> int:
    if unicodedata.combining(char):
        return 0
    return 2 if unicodedata.east_asian_width(char) in ("W", "F") else 1


def _widest(texts: Sequence[str]) -> int:
    if "".join(texts).isascii():
        return max(map(len, texts), default=0)
    return max(map(cells, texts), default=0)


def _take(text: str, width: int) -> str:
    """The longest start of ``text`` that takes at most ``width`` columns."""
    used = 0
    for i, c in enumerate(text):
        used += _cell(c)
        if used > width:
            return text[:i]
    return text


def _take_end(text: str, width: int) -> str:
    """The longest end of ``text`` that takes at most ``width`` columns."""
    return _take(text[::-1], width)[::-1]


def pad(text: str, width: int, *, right: bool = False) -> str:
    """``text`` padded with spaces to ``width`` terminal columns."""
    fill = " " * max(0, width - cells(text))
    return fill + text if right else text + fill


def wrap(text: str, width: int) -> list[str]:
    """``text`` over lines of at most ``width`` columns, broken between words where it
    can be, inside a word longer than a line (an id, a path) where it must."""
    width = max(1, width)
    lines: list[str] = []
    line = ""
    for word in text.split(" "):
        candidate = f"{line} {word}" if line else word
        if cells(candidate) <= width:
            line = candidate
            continue
        if line:
            lines.append(line)
        while cells(word) > width:
            head = _take(word, width) or word[:1]
            lines.append(head)
            word = word[len(head) :]
        line = word
    if line or not lines:
        lines.append(line)
    return lines


def cut(text: str, width: int, *, middle: bool = False) -> str:
    """``text`` in at most ``width`` terminal columns, ``…`` marking what was left out."""
    if cells(text) <= width:
        return text
    if width <= 1:
        return _take(text, width)
    if middle and width >= 9:
        return _take(text, width - 5) + "…" + _take_end(text, 4)
    return _take(text, width - 1) + "…"


def fit(columns: Sequence[Column], texts: Sequence[Sequence[str]], width: int | None, sep: int) -> list[int | None]:
    """Each column's width, or None for a column dropped to fit ``width`` characters;
    ``texts[i]`` are column i's cells.

    ``keep`` columns are always shown, shrunk if even they do not fit; the others are
    added by usefulness while they fit whole (or, if they may shrink, at their smallest
    width); what is left widens shrunk columns, most useful first. ``width`` None keeps
    every column at its natural width.
    """
    natural = [max(len(c.name), _widest(values)) for c, values in zip(columns, texts, strict=True)]
    if width is None or sum(natural) + sep * (len(columns) - 1) <= width:
        return list(natural)
    smallest = [n if c.min_width is None else min(n, c.min_width) for c, n in zip(columns, natural, strict=True)]
    order = sorted(range(len(columns)), key=lambda i: (not columns[i].keep, columns[i].rank, i))
    widths: list[int | None] = [None] * len(columns)
    kept = [i for i in order if columns[i].keep]
    whole = sum(natural[i] for i in kept) + sep * (len(kept) - 1)
    for i in kept:
        widths[i] = natural[i] if whole <= width else smallest[i]
    used = sum(w for w in widths if w is not None) + sep * (len(kept) - 1)
    for i in order:
        if columns[i].keep or used > width:
            continue
        if used + sep + natural[i] <= width:
            widths[i] = natural[i]
        elif used + sep + smallest[i] <= width and smallest[i] < natural[i]:
            widths[i] = smallest[i]
        else:
            continue
        used += sep + (widths[i] or 0)
    spare = width - used
    for i in order:
        w = widths[i]
        if w is not None and spare > 0:
            grow = min(natural[i] - w, spare)
            widths[i] = w + grow
            spare -= grow
    return widths


def unique_prefixes(ids: Sequence[str], shortest: int = 8) -> dict[str, str]:
    """Each id's shortest prefix (at least ``shortest`` characters) that no other id
    starts with, so a command given it finds exactly that test. Ids minted in the same
    millisecond share 13 or more characters, so a fixed length is not enough."""
    ordered = sorted(set(ids))
    if not ordered:
        return {}
    past = [common + 1 for common in _common_lengths(ordered)]  # with the next id, plus one
    need = map(max, itertools.repeat(shortest), [shortest, *past], [*past, shortest])
    # An id that is another's prefix is found whole (an exact id wins over prefixes).
    return {i: i[:n] for i, n in zip(ordered, need, strict=True)}


def unique_prefix(ids: Sequence[str], wanted: str, shortest: int = 8) -> str:
    """``unique_prefixes(ids)[wanted]`` without the others': ``wanted`` (one of ``ids``)
    against the ids next to it in order, the only ones that can share more of it."""
    ordered = sorted(set(ids))
    at = bisect.bisect_left(ordered, wanted)
    near = [*ordered[max(0, at - 1) : at], *ordered[at + 1 : at + 2]]
    return wanted[: max([shortest, *(_common_length(wanted, other) + 1 for other in near)])]


def _common_lengths(ordered: Sequence[str]) -> list[int]:
    """How many first characters each id shares with the next. Two ASCII ids of one
    length (UUIDs) as numbers: their XOR's highest bit is in the first byte that differs.
    Else a bisection of slices (``_common_length``)."""
    numbers = [int.from_bytes(i.encode(), "big") if i.isascii() else None for i in ordered]
    out = []
    for a, b, x, y in zip(ordered, ordered[1:], numbers, numbers[1:], strict=False):
        if x is not None and y is not None and len(a) == len(b):
            out.append(len(a) - ((x ^ y).bit_length() + 7) // 8)
        else:
            out.append(_common_length(a, b))
    return out


def _common_length(a: str, b: str) -> int:
    """How many first characters ``a`` and ``b`` share: a bisection of slices compared in
    C (a loop over a dozen shared characters costs more)."""
    lo, hi = 0, min(len(a), len(b))
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if a[:mid] == b[:mid]:
            lo = mid
        else:
            hi = mid - 1
    return lo


def one_utc_date(stamps: Sequence[str]) -> str | None:
    """The date all these canonical stamps (``2026-11-21T10:00:00.000Z``) share, else
    None: then a time of day (``stamp[11:23]``) says as much in half the width."""
    # "T", what follows the milliseconds ("Z" alone in that shape), the date: one text per
    # stamp, the same for all exactly when every stamp has that shape and that date
    shapes = {s[10:11] + s[23:] + s[:10] for s in stamps}
    shape = shapes.pop() if len(shapes) == 1 else ""
    return shape[2:] if len(shape) == 12 and shape.startswith("TZ") else None


def terminal_width(stream: TextIO) -> int | None:
    """``COLUMNS`` when set, else the terminal's width; None for a pipe (no limit)."""
    try:
        columns = int(os.environ.get("COLUMNS", ""))
    except ValueError:
        columns = 0
    if columns > 0:
        return columns
    try:
        return os.get_terminal_size(stream.fileno()).columns if stream.isatty() else None
    except (AttributeError, ValueError, OSError):
        return None


def use_color(stream: TextIO) -> bool:
    """Colour only for a terminal, and never when NO_COLOR is set (no-color.org) or TERM=dumb."""
    if os.environ.get("NO_COLOR") or os.environ.get("TERM") == "dumb":
        return False
    try:
        return stream.isatty()
    except (AttributeError, ValueError):
        return False


class Out:
    """Where human output goes, and whether it may be coloured.

    Every text it prints goes through ``printable`` and reaches rich as ``Text``, never
    as markup: log content is shown, not obeyed.
    """

    def __init__(self, stream: TextIO | None = None, *, plain: bool = False, width: int | None = None) -> None:
        """``plain``: text for a report or a file, as a pipe gets it (no colour, no width
        limit unless ``width`` is given: pytest's terminal), whatever the terminal."""
        self.stream = stream or sys.stdout
        self.color = not plain and use_color(self.stream)
        self.width = width if plain else terminal_width(self.stream)
        self._console: Any = None

    def console(self) -> Any:
        if self._console is None:
            from rich.console import Console

            self._console = Console(file=self.stream, highlight=False, soft_wrap=True, width=self.width)
        return self._console

    def line(self, text: str = "", style: str | None = None) -> None:
        text = printable(text)
        if self.color and style:
            from rich.text import Text

            self.console().print(Text(text, style=style))
        else:
            self.stream.write(text + "\n")

    def lines(self, before: str, numbers: Iterable[int], after: str, style: str | None = None) -> None:
        """``line(f"{before}{n}{after}")`` for each of ``numbers``, the text made printable
        once (a listing of one problem on millions of lines)."""
        if self.color and style:
            for n in numbers:
                self.line(f"{before}{n}{after}", style)
            return
        head, tail = printable(before), printable(after) + "\n"
        write = self.stream.write
        for n in numbers:
            write(f"{head}{n}{tail}")

    def prose(self, text: str, style: str | None = None, indent: str = "") -> None:
        """A sentence, wrapped at the terminal's width (a table row is cut instead)."""
        if self.width is None or len(indent) + cells(text) <= self.width:
            self.line(indent + text, style)
            return
        for part in wrap(printable(text), max(20, self.width - len(indent))):
            self.line(indent + part, style)

    def command(self, words: Sequence[str], indent: str = "  ", note: str = "", prompt: str = "") -> None:
        """A shell command to copy, quoted; on a narrow terminal broken over lines that end
        in `` \\`` (it still runs as pasted). ``note``: a ``# comment`` after it, on a line
        of its own when it does not fit; ``prompt``: shown before it (``$``), never quoted."""
        import shlex

        parts = [shlex.quote(w) for w in words]
        if prompt:
            parts.insert(0, prompt)
        lines = [indent + parts[0]]
        for part in parts[1:]:
            if self.width is not None and cells(lines[-1]) + 1 + cells(part) + 2 > self.width:
                lines[-1] += " \\"
                lines.append(indent + "    " + part)
            else:
                lines[-1] += " " + part
        if note:
            comment = f"# {note}"
            if self.width is None or cells(lines[-1]) + 2 + cells(comment) <= self.width:
                lines[-1] += "  " + comment
            else:
                lines.insert(0, indent + comment)
        for line in lines:
            self.line(line)

    def table(
        self,
        columns: Sequence[str | Column],
        rows: Sequence[Sequence[Any]],
        styles: Sequence[str | None] | None = None,
        title: str | None = None,
        *,
        by_column: bool = False,
    ) -> None:
        """One row per item; ``styles[i]`` colours row i on a terminal. On a narrow
        terminal, columns are dropped and shrunk as their ``Column`` says: never wrapped.
        ``by_column``: ``rows`` given column by column (``rows[i]``: column i's cells), as
        a long table is best made. Either way it is drawn by columns: each step a loop in C
        over a column, not Python over every cell."""
        # rows turned into columns, unless given so (no rows: an empty column each)
        values = rows if by_column else (list(zip(*rows, strict=True)) if rows else [() for _ in columns])
        cols = [c if isinstance(c, Column) else Column(c, rank=i, keep=True) for i, c in enumerate(columns)]
        texts = [list(map(str, cells)) if None not in cells else [_text(v) for v in cells] for cells in values]
        for i, cells in enumerate(texts):
            if not "".join(cells).isprintable():  # one C-speed test per column; escaping is rare
                texts[i] = list(map(printable, cells))
        sep = 3 if self.color else 2
        widths = fit(cols, texts, self.width, sep)
        shown = [i for i, w in enumerate(widths) if w is not None]
        header = [cut(cols[i].name, widths[i] or 0) for i in shown]
        wrapped = False
        for i in shown:  # a column narrowed below its longest cell: each cell cut (or wrapped) to fit
            w = widths[i] or 0
            if cols[i].min_width is not None and _widest(texts[i]) > w:
                if cols[i].wrap:
                    texts[i] = ["\n".join(wrap(v, w)) for v in texts[i]]
                    wrapped = True
                else:
                    texts[i] = [cut(v, w, middle=cols[i].middle) for v in texts[i]]
        if wrapped:  # a cell over several lines: one row per line, the others' cells blank
            texts, styles = _unfolded(texts, styles)
        if self.color:
            body = [list(row) for row in zip(*(texts[i] for i in shown), strict=True)]
            self._rich_table([cols[i] for i in shown], [widths[i] or 0 for i in shown], header, body, styles, title)
            return
        if title:
            self.stream.write(printable(title) + "\n")
        padded = []
        for k, i in enumerate(shown):
            column = [header[k], *texts[i]]
            if "".join(column).isascii():
                just = str.rjust if cols[i].right else str.ljust
                padded.append(list(map(just, column, itertools.repeat(widths[i] or 0))))
            else:  # a wide character takes two columns: padded by what it takes, not by len
                padded.append([pad(v, widths[i] or 0, right=cols[i].right) for v in column])
        lines: Iterator[str] = map(str.rstrip, map("  ".join, zip(*padded, strict=True)))
        if not padded:  # no column fits: a blank line each, as a table of no columns is drawn
            lines = itertools.repeat("", 1 + (len(texts[0]) if texts else 0))
        while chunk := list(itertools.islice(lines, 4096)):  # written a few thousand lines at a time
            self.stream.write("\n".join(chunk) + "\n")

    def _rich_table(
        self,
        cols: list[Column],
        widths: list[int],
        header: list[str],
        body: list[list[str]],
        styles: Sequence[str | None] | None,
        title: str | None,
    ) -> None:
        from rich import box
        from rich.table import Table
        from rich.text import Text

        table = Table(
            title=Text(printable(title)) if title else None,
            box=box.SIMPLE_HEAD,
            show_edge=False,
            pad_edge=False,
            header_style="bold",
        )
        for col, w, name in zip(cols, widths, header, strict=True):
            table.add_column(Text(name), width=w, no_wrap=True, justify="right" if col.right else "left")
        for i, row in enumerate(body):
            table.add_row(*(Text(v) for v in row), style=styles[i] if styles else None)
        console = self.console()
        # Columns that must stay whole may need more than the terminal: never let rich
        # squeeze them (it would cut an id); the terminal wraps the line instead.
        console.print(table, width=max(console.width, sum(widths) + 3 * (len(widths) - 1)))


def _unfolded(
    texts: list[list[str]], styles: Sequence[str | None] | None
) -> tuple[list[list[str]], list[str | None] | None]:
    """Columns whose cells may hold several lines, as columns of one-line cells: a row
    becomes as many rows as its tallest cell, keeping its style."""
    out: list[list[str]] = [[] for _ in texts]
    out_styles: list[str | None] | None = None if styles is None else []
    for r, row in enumerate(zip(*texts, strict=True)):
        split = [cell.split("\n") for cell in row]
        height = max(map(len, split))
        for i, lines in enumerate(split):
            out[i].extend(lines + [""] * (height - len(lines)))
        if out_styles is not None and styles is not None:
            out_styles.extend([styles[r]] * height)
    return out, out_styles


class Progress:
    """A one-line progress note on stderr for long reads, only when stderr is a terminal."""

    MIN_BYTES = 256 << 20

    def __init__(self, total: int) -> None:
        self.total = total
        self.done = 0
        self.enabled = total >= self.MIN_BYTES and sys.stderr.isatty()
        self._shown = -1

    def __call__(self, delta: int) -> None:
        self.done += delta
        pct = min(100, self.done * 100 // max(1, self.total))
        if self.enabled and pct != self._shown:
            self._shown = pct
            sys.stderr.write(f"\rcvdiag: reading {pct:3d}% of {self.total >> 20} MB")
            sys.stderr.flush()

    def close(self) -> None:
        if self.enabled:
            sys.stderr.write("\r\x1b[K")
            sys.stderr.flush()


def counted(count: int, noun: str) -> str:
    """``1 test``, ``2 tests``: a count with its noun in the right number."""
    return f"{count} {noun}" if count == 1 else f"{count} {noun}s"


def ms(value: Any) -> str:
    """A duration in ms for people: ``850 ms``, ``12.3 s``."""
    if value is None:
        return ""
    v = float(value)
    return f"{v:.0f} ms" if abs(v) < 1000 else f"{v / 1000:.1f} s"


def offset(seconds: float) -> str:
    """Time since the first event: ``+0.000 s``."""
    return f"+{seconds:.3f} s"


# -- the timeline ----------------------------------------------------------------------
# One look for a test's events wherever they are shown: ``cvdiag timeline``, ``diagnose``,
# ``--follow`` and the pytest failure report draw the entries ``read.timeline`` orders.

#: A gap between two events of a timeline longer than this gets its own row.
SILENCE_S = 1.0
_DETAIL_CHARS = 110


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


def _timeline_rows(entries: Sequence[Entry]) -> Iterator[tuple[list[Any], str | None]]:
    if not entries:
        return
    start = entries[0].seconds
    prev = start
    for e in entries:
        t = e.seconds
        gap = t - prev
        if gap > SILENCE_S:
            yield ["", "", f"··· no event for {gap:.1f} s", "", "", ""], WARN
        prev = max(prev, t)
        yield timeline_row(e, t - start)


def timeline_row(e: Entry, since: float) -> tuple[list[Any], str | None]:
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


_TIMELINE_COLUMNS = [
    Column("t", right=True, keep=True, rank=1),
    Column("layer", rank=4),
    Column("boundary", keep=True),
    Column("outcome", keep=True, rank=0),
    Column("duration", right=True, rank=2),
    Column("details", keep=True, rank=3, min_width=12, wrap=True),
]


def timeline_table(out: Out, entries: Sequence[Entry], max_rows: int | None = None) -> None:
    """A test's entries (in time order) as the timeline table, silences as rows of their
    own; past ``max_rows`` entries the rest is counted in a last line."""
    shown = entries if max_rows is None else entries[:max_rows]
    rows = list(_timeline_rows(shown))
    if rows:
        out.table(_TIMELINE_COLUMNS, [r for r, _ in rows], [s for _, s in rows])
    if len(entries) > len(shown):
        out.line(f"... {len(entries) - len(shown)} more events", DIM)


_TOOL_COLUMNS = [
    Column("tool", keep=True, min_width=8),
    Column("source", rank=2),
    Column("server", rank=3),
    Column("outcome", keep=True),
    Column("duration", right=True, rank=1),
    Column("error", keep=True, min_width=12),
]


def tool_calls_table(out: Out, calls: Sequence[toolcalls.ToolCall]) -> None:
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
