"""Human output: rich tables and colour on a terminal, plain aligned text otherwise.

``rich`` is imported only when something is drawn in colour, so that piped runs and
``--json`` start fast. Plain output never contains an escape code.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence
from typing import Any, TextIO

#: Style names per cell meaning; rich understands them, plain output ignores them.
FAIL = "bold red"
WARN = "yellow"
DIM = "dim"
OK = "green"


def use_color(stream: TextIO) -> bool:
    """Colour only for a terminal, and never when NO_COLOR is set (no-color.org) or TERM=dumb."""
    if os.environ.get("NO_COLOR") or os.environ.get("TERM") == "dumb":
        return False
    try:
        return stream.isatty()
    except (AttributeError, ValueError):
        return False


class Out:
    """Where human output goes, and whether it may be coloured."""

    def __init__(self, stream: TextIO | None = None) -> None:
        self.stream = stream or sys.stdout
        self.color = use_color(self.stream)
        self._console: Any = None

    def console(self) -> Any:
        if self._console is None:
            from rich.console import Console

            self._console = Console(file=self.stream, highlight=False, soft_wrap=True)
        return self._console

    def line(self, text: str = "", style: str | None = None) -> None:
        if self.color and style:
            from rich.text import Text

            self.console().print(Text(text, style=style))
        else:
            self.stream.write(text + "\n")

    def table(
        self,
        columns: Sequence[str],
        rows: Sequence[Sequence[Any]],
        styles: Sequence[str | None] | None = None,
        title: str | None = None,
    ) -> None:
        """One row per item; ``styles[i]`` colours row i on a terminal."""
        cells = [["" if v is None else str(v) for v in row] for row in rows]
        if self.color:
            from rich.table import Table

            table = Table(title=title, show_edge=False, header_style="bold")
            for c in columns:
                table.add_column(c, overflow="fold")
            for i, row in enumerate(cells):
                table.add_row(*row, style=styles[i] if styles else None)
            self.console().print(table)
            return
        if title:
            self.stream.write(title + "\n")
        widths = [len(c) for c in columns]
        for row in cells:
            for i, v in enumerate(row):
                widths[i] = max(widths[i], len(v))
        fmt = "  ".join(f"{{:<{w}}}" for w in widths)
        self.stream.write(fmt.format(*columns).rstrip() + "\n")
        for row in cells:
            self.stream.write(fmt.format(*row).rstrip() + "\n")


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


def ms(value: Any) -> str:
    """A duration in ms for people: ``850 ms``, ``12.3 s``."""
    if value is None:
        return ""
    v = float(value)
    return f"{v:.0f} ms" if abs(v) < 1000 else f"{v / 1000:.1f} s"


def offset(seconds: float) -> str:
    """Time since the first event: ``+0.000 s``."""
    return f"+{seconds:.3f} s"
