"""The lines the middleware and the emitter write stay byte-identical (times, span ids
and minted ids masked) across changes to the emit path, fast or general.

After a deliberate change to the wire, regenerate: ``python tests/linekit.py > tests/data/emit_lines.txt``.
"""

from __future__ import annotations

import linekit


def test_lines_are_byte_identical_to_the_recorded_ones() -> None:
    expected = linekit.EXPECTED.read_bytes().splitlines()
    written = linekit.lines()
    assert len(written) == len(expected)
    for n, (line, want) in enumerate(zip(written, expected, strict=True)):
        assert line == want, f"line {n + 1} differs"
