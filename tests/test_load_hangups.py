"""Streams under load on a real uvicorn (issue 35): clients in another process hang up
after the first chunk, and every hang-up must end in ``backend.sse.aborted``, every whole
read in ``backend.response.complete``, whatever uvicorn itself recorded. The full size
(5,000 streams of 2 s, 1,000 at a time) is ``tools/load_hangups.py`` by hand; these run
it at a size for a two-core machine."""

from __future__ import annotations

from repotools import load_tool

load = load_tool("load_hangups")


def test_hang_ups_as_the_stream_ends_are_aborts_not_complete():
    """Each client hangs up about when its stream sends its last chunk: uvicorn learns of
    it and drops that send, while the app's disconnect listener has not run yet."""
    result = load.run(streams=300, at_once=100, hangups=1.0, seconds=0.2, lag=(0.19, 0.215))
    assert result.gone >= 30, result  # the race was run: many hang-ups landed before the last send
    assert result.gone_as_complete == 0, result
    assert result.wrong == 0, result


def test_the_issues_shape_scaled_down_reads_right():
    """300 streams of 2 s, 100 at a time, 30% hanging up after the first chunk."""
    result = load.run(streams=300, at_once=100, hangups=0.3, seconds=2.0, lag=(0.0, 2.0))
    assert result.gone >= 30 and result.pairs[("complete", "backend.response.complete")] >= 150, result
    assert result.wrong == 0, result
