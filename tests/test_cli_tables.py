"""``tests`` and ``timeline`` at 80 and 120 columns, piped and on a terminal: no line
wider than the terminal, ids never wrapped, and a ``next:`` hint that works."""

from __future__ import annotations

import itertools
import os
import random
import re
import shlex
from pathlib import Path

import pytest
from cvdiag_cli import on_a_terminal, run
from hypothesis import given
from hypothesis import strategies as st
from logkit import aborted, compact, envelope, errored, happy, write

from cvdiag.face.render import _common_length, _common_lengths, one_utc_date, unique_prefix, unique_prefixes

# Ids minted in one millisecond share their first 15 characters (time, version), and
# two of these share 35: a fixed-length prefix cannot tell them apart.
_MS = "0190a9c0-1a2b-7"
_rng = random.Random(11)
SAME_MS = [
    f"{_MS}{_rng.getrandbits(12):03x}-{0x8000 | _rng.getrandbits(14):04x}-{_rng.getrandbits(48):012x}" for _ in range(6)
]
TWINS = [f"{_MS}c3d-8e4f-5a6b7c8d9e0{c}" for c in "ab"]
ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")


def _log(tmp_path: Path, *, days: int = 1) -> Path:
    events = []
    for k, tid in enumerate(SAME_MS):
        events += happy(tid, k * 2.0) if k % 2 else errored(tid, k * 2.0)
    events += aborted(TWINS[1], 20.0) + happy(TWINS[0], 30.0)
    if days > 1:
        events += happy("d4-agno-next-day", 86_400.0)
    events.sort(key=lambda e: e["ts"])
    return write(tmp_path / "app.log", [f"CVDIAG {compact(e)}" for e in events])


def _on_a_terminal(args: list[str], env: dict[str, str], cwd: Path) -> str:
    """Rich output, as a user at a terminal sees it, without the colour codes."""
    full_env = {k: v for k, v in os.environ.items() if k != "NO_COLOR"}
    full_env.update({"TERM": "xterm-256color", **env})
    code, out = on_a_terminal(*args, env=full_env, cwd=cwd)
    assert code == 0, out
    assert b"\x1b[" in out  # it did draw in colour
    return ANSI.sub("", out.decode())


def _output(mode: str, args: list[str], width: int, cwd: Path) -> str:
    env = {"COLUMNS": str(width)}
    if mode == "rich":
        return _on_a_terminal(args, env, cwd)
    r = run(*args, env=env, cwd=cwd)
    assert r.code == 0, r.err
    return r.out


def _shown_id(line: str) -> str:
    return line.split()[0]


@pytest.mark.parametrize("mode", ["plain", "rich"])
@pytest.mark.parametrize("width", [80, 120])
def test_tests_fits_the_terminal_and_its_hint_finds_one_test(tmp_path: Path, mode: str, width: int) -> None:
    _log(tmp_path)
    out = _output(mode, ["tests", "app.log"], width, tmp_path)
    lines = out.splitlines()
    assert max(len(line) for line in lines) <= width, out
    if mode == "plain":  # a line ends with its last text, never with padding (diffs, copies)
        assert all(line == line.rstrip() for line in lines), out
    every = [*SAME_MS, *TWINS]
    rows = [line for line in lines if line.strip().startswith(_MS)]
    assert len(rows) == len(every)
    for row in rows:  # one id per row, whole or cut in the middle past a unique prefix
        shown = _shown_id(row.strip())
        head, _, tail = shown.partition("…")
        matches = [t for t in every if t.startswith(head) and t.endswith(tail)]
        assert len(matches) == 1, (shown, out)
    assert f"{len(every)} tests, 4 failed, on 2026-11-21 (UTC)" in out
    time_of_day = re.search(r"\b10:00:\d\d\.\d{3}\b", out)
    if width >= 100:  # the start column fits: its time of day is shown
        assert time_of_day, out
    else:  # it is the column given up first; the ones that say what happened stay
        assert not time_of_day, out
        assert re.search(r"^\s*test_id\s+(slug\s+)?duration\s+status\s+class\s*$", out, re.M), out
        assert re.search(r"\b5\.3 s\s+fail\s+client-disconnect\b", out), out
    assert "2026-11-21T" not in out
    hint = next(line for line in lines if line.startswith("next: "))
    argv = shlex.split(hint.removeprefix("next: "))
    assert argv[:2] == ["cvdiag", "timeline"] and len(argv[2]) >= 8
    r = run(*argv[1:], cwd=tmp_path)
    assert r.code == 0, r.err
    assert r.out.splitlines()[0].startswith(f"test {SAME_MS[0]} ")


def test_twins_minted_in_one_millisecond_get_a_hint_long_enough(tmp_path: Path) -> None:
    events = [*aborted(TWINS[1], 0.0), *happy(TWINS[0], 1.0)]
    path = write(tmp_path / "app.log", [f"CVDIAG {compact(e)}" for e in events])
    r = run("tests", path)
    hint = next(line for line in r.out.splitlines() if line.startswith("next: "))
    prefix = shlex.split(hint)[3]
    assert prefix == TWINS[1]  # they differ only in the last character
    assert run("timeline", prefix, path).out.startswith(f"test {TWINS[1]}  slug agno  ")


def test_the_hint_prefix_is_eight_characters_when_that_is_unique(tmp_path: Path) -> None:
    path = write(
        tmp_path / "app.log", [f"CVDIAG {compact(e)}" for e in aborted("5b2e7f01-aaaa-7bbb-8ccc-000000000001")]
    )
    r = run("tests", path)
    assert f"next: cvdiag timeline 5b2e7f01 {path}" in r.out.splitlines()


def test_stamps_stay_whole_when_the_tests_span_two_days(tmp_path: Path) -> None:
    _log(tmp_path, days=2)
    out = _output("plain", ["tests", "app.log"], 200, tmp_path)
    assert "2026-11-21T10:00:00.000Z" in out and "2026-11-22T10:00:00.000Z" in out
    assert "(UTC)" not in out


@pytest.mark.parametrize("mode", ["plain", "rich"])
@pytest.mark.parametrize("width", [80, 120])
def test_timeline_fits_the_terminal_with_boundaries_whole(tmp_path: Path, mode: str, width: int) -> None:
    events = happy(TWINS[0], 0.0)
    events.insert(
        3,
        envelope(
            TWINS[0],
            "backend.llm.call.heartbeat",
            3.0,
            metadata={"elapsed_ms_since_start": 2980},
        ),
    )
    write(tmp_path / "app.log", [f"CVDIAG {compact(e)}" for e in events])
    out = _output(mode, ["timeline", TWINS[0], "app.log"], width, tmp_path)
    lines = out.splitlines()
    assert max(len(line) for line in lines) <= width, out
    assert lines[0].startswith(f"test {TWINS[0]}")
    for env in events:
        assert any(env["boundary"] in line for line in lines), env["boundary"]
    assert any("no event for" in line for line in lines)
    assert any(
        re.search(r"\+0\.500 s\s+(backend\s+)?backend\.llm\.call\.response\s+ok\s+480 ms", line) for line in lines
    ), out


@pytest.mark.parametrize("mode", ["plain", "rich"])
def test_long_ids_are_cut_in_the_middle_past_their_unique_prefix(tmp_path: Path, mode: str) -> None:
    ids = [f"nightly-{k:02d}-regression-suite-chat-streaming-agno-gpt-4o-mini" for k in range(3)]
    events = [*errored(ids[0], 0.0), *happy(ids[1], 1.0), *aborted(ids[2], 2.0)]
    write(tmp_path / "app.log", [f"CVDIAG {compact(e)}" for e in events])
    lines = _output(mode, ["tests", "app.log"], 80, tmp_path).splitlines()
    assert max(len(line) for line in lines) <= 80
    rows = [line.strip() for line in lines if line.strip().startswith("nightly-")]
    assert [_shown_id(r)[:10] for r in rows] == [i[:10] for i in ids]
    assert all("…" in _shown_id(r) and _shown_id(r).endswith("mini") for r in rows)
    assert [r.split()[-1] for r in rows] == ["server-error", "ok", "client-disconnect"]


@pytest.mark.parametrize("mode", ["plain", "rich"])
def test_diagnose_all_cuts_reasons_to_fit_and_stats_aligns_numbers(tmp_path: Path, mode: str) -> None:
    _log(tmp_path)
    lines = _output(mode, ["diagnose", "--all", "app.log"], 80, tmp_path).splitlines()
    assert max(len(line) for line in lines) <= 80
    rows = [line.strip() for line in lines if line.strip().startswith(_MS)]
    assert len(rows) == 8 and all(_shown_id(r) in [*SAME_MS, *TWINS] for r in rows)
    assert any(r.split()[1] == "client-disconnect" and r.split()[2] == "The" for r in rows)
    stats = _output("plain", ["stats", "app.log"], 120, tmp_path).splitlines()
    header = stats[0]
    row = next(line for line in stats if "backend.request.ingress" in line)
    assert row.index(" 8") + 2 == header.index("count") + len("count")  # right-aligned under its header


@pytest.mark.parametrize("mode", ["plain", "rich"])
@pytest.mark.parametrize("width", [80, 120])
def test_compare_stats_and_validate_fit_the_terminal(tmp_path: Path, mode: str, width: int) -> None:
    _log(tmp_path)
    ok, failed = SAME_MS[1], SAME_MS[0]
    lines = _output(mode, ["compare", ok[:18], failed[:18], "app.log"], width, tmp_path).splitlines()
    assert max(len(line) for line in lines) <= width
    assert lines[:3] == [
        f"A {ok}  ok  610 ms",
        f"B {failed}  server-error  50 ms",
        "first divergence: B has no backend.agent.enter",
    ]
    steps = {words[1]: words for words in map(str.split, lines[4:]) if words[0] in (">", "*")}
    assert steps["backend.agent.enter"][0] == ">" and "info" in steps["backend.agent.enter"]
    assert "err (RuntimeError) 50 ms" in " ".join(steps["backend.error.caught"])
    assert len(steps) == 7
    lines = _output(mode, ["stats", "app.log"], width, tmp_path).splitlines()
    assert max(len(line) for line in lines) <= width
    rows = {words[1]: words[2:] for words in map(str.split, lines) if words[:1] == ["agno"]}
    assert rows["backend.request.ingress"] == ["8", "0", "0", "0", "8"]
    assert rows["backend.sse.aborted"] == ["1", "0", "1", "0", "0"]
    assert rows["llm_latency_ms"] == ["4", *["480", "ms"] * 4]
    out = _output(mode, ["validate", "app.log"], width, tmp_path)
    assert out == "checked 37 envelopes: 0 invalid, 0 malformed lines\n"


_MIXED = st.lists(st.text(alphabet="ab-0é", max_size=14), max_size=30)
_SAME_LENGTH = st.lists(st.text(alphabet="ab0-", min_size=12, max_size=12), max_size=30)  # as UUIDs are


@given(st.one_of(_MIXED, _SAME_LENGTH), st.text("ab-0", max_size=14), st.sampled_from([8, 2]))
def test_unique_prefixes_name_each_id_alone(ids: list[str], other: str, shortest: int) -> None:
    """Each prefix is as short as can be (at least ``shortest``) and no other id starts
    with it, unless the id is itself another's prefix (then it is given whole); ids of
    one length and ASCII are compared as numbers, the others by slices."""
    assert _common_length(other, other + "x") == len(other)
    assert _common_length(other, "") == 0
    common = os.path.commonprefix  # characters are what is compared here, not paths
    assert all(_common_length(a, b) == len(common([a, b])) for a in ids for b in (other, *ids))
    ordered = sorted(set(ids))
    assert _common_lengths(ordered) == [len(common([a, b])) for a, b in itertools.pairwise(ordered)]
    prefixes = unique_prefixes(ids, shortest)
    assert prefixes.keys() == set(ids)
    for i, p in prefixes.items():
        assert i.startswith(p) and (len(p) >= min(shortest, len(i)))
        others = [j for j in prefixes if j != i and j.startswith(p)]
        assert not others or p == i
        assert len(p) <= shortest or any(j != i and j.startswith(p[:-1]) for j in prefixes)
        assert unique_prefix(ids, i, shortest) == p  # one id's alone, as the hint under a table needs it


_STAMPS = st.one_of(
    st.sampled_from(["2026-11-21T10:00:00.000Z", "2026-11-21T23:59:59.999Z", "2026-11-22T00:00:00.000Z"]),
    st.text(alphabet="0126-:.TZ+ ", max_size=30),
    st.text(alphabet="0-TZ", min_size=24, max_size=24),
    st.sampled_from(["2026-11-21T10:00:00.000+00:00", "2026-11-21T10:00:00.0000Z", "2026-11-21T10:00:00Z"]),
)


@given(st.lists(_STAMPS, max_size=6))
def test_one_date_is_named_only_when_every_stamp_is_canonical_and_of_that_date(stamps: list[str]) -> None:
    """Only then does the table show a time of day (``stamp[11:23]``) in place of the
    stamp. Canonical by shape: ``YYYY-MM-DDTHH:MM:SS.mmmZ`` is 24 characters, "T" and "Z"
    in their places (the scan writes every ``ts`` so)."""
    canonical = all(len(s) == 24 and s[10] == "T" and s[23] == "Z" for s in stamps)
    dates = {s[:10] for s in stamps}
    assert one_utc_date(stamps) == (dates.pop() if canonical and len(dates) == 1 else None)
