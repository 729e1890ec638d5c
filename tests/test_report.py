"""``cvdiag report``: the file it writes and the data inside it (the browser tests look
at the page itself: tests/test_report_browser.py)."""

from __future__ import annotations

import json
import os
import re
import stat
import threading
from pathlib import Path
from typing import Any

import pytest
from cvdiag_cli import run, run_peak
from hypothesis import example, given, settings
from hypothesis import strategies as st
from logkit import TID_ABORT, TID_ERROR, TID_OK, aborted, compact, errored, happy, write
from reportkit import STORY_ID, story

from cvdiag.face import report_data
from cvdiag.read.sources import resolve_sources


def embedded(page: str) -> tuple[dict, list[dict]]:
    """The index and the details a report page carries."""
    index = json.loads(re.search(r'<script type="application/json" id="cvdiag-index">(.*?)</script>', page).group(1))
    found = re.findall(r'<script type="application/json" id="cvdiag-detail-\d+">(.*?)</script>', page)
    details = [json.loads(m) for m in found]
    return index, details


def events_of(detail: dict) -> list[list]:
    """A built detail's events, as the page reads them (each text holds one or several)."""
    return json.loads(b"[" + b",".join(detail["events"]) + b"]")


def rows_by_id(index: dict) -> dict[str, dict]:
    cols = index["meta"]["columns"]
    return {r[0]: dict(zip(cols, r, strict=True)) for r in index["rows"]}


@pytest.fixture
def log(tmp_path: Path) -> Path:
    envs = [*happy(), *aborted(), *errored(), *story()]
    return write(tmp_path / "app.log", [f"CVDIAG {compact(e)}" for e in envs])


def test_report_writes_one_page_with_every_test_and_says_so(log: Path, tmp_path: Path) -> None:
    out = tmp_path / "report.html"
    result = run("report", log, "-o", out)

    assert result.code == 0, result.err
    assert f"wrote {out}: 4 tests, 3 failed, 3 with a waterfall" in result.out
    page = out.read_text()
    index, details = embedded(page)
    rows = rows_by_id(index)
    assert set(rows) == {TID_OK, TID_ABORT, TID_ERROR, STORY_ID}
    strings = index["strings"]
    assert strings[rows[TID_ABORT]["class"]] == "client-disconnect"
    assert strings[rows[TID_OK]["class"]] == "ok"
    assert rows[TID_OK]["detail"] == -1  # passed: in the index only
    assert rows[STORY_ID]["llm_ms"] == 70 + 2810  # both attempts
    assert rows[STORY_ID]["ttfb_ms"] == 1760
    assert len(details) == 3
    story_detail = details[rows[STORY_ID]["detail"]]
    assert len(story_detail["events"]) == len(story())
    assert story_detail["diagnosis"]["class"] == strings[rows[STORY_ID]["class"]]


def test_an_index_row_says_when_its_test_started_and_what_the_harness_saw(log: Path) -> None:
    """``start_ms`` is from the first event of the whole log to the test's first event;
    a test the harness saw fail is failed and shown in detail whatever its envelopes say,
    and a label names it."""
    from datetime import datetime

    envs = [json.loads(line.split(" ", 1)[1]) for line in log.read_text().splitlines()]
    first: dict[str, datetime] = {}
    for env in envs:
        at = datetime.fromisoformat(env["ts"])
        first[env["test_id"]] = min(first.get(env["test_id"], at), at)
    start = min(first.values())
    doc = report_data.build(resolve_sources([str(log)]), failed={TID_OK}, labels={TID_OK: "tests/test_x.py::ok"})
    rows = rows_by_id(doc)
    assert {tid: row["start_ms"] for tid, row in rows.items()} == {
        tid: round((at - start).total_seconds() * 1000) for tid, at in first.items()
    }
    assert max(row["start_ms"] for row in rows.values()) > 0
    ok = rows[TID_OK]
    assert (ok["failed"], ok["label"], doc["strings"][ok["class"]]) == (1, "tests/test_x.py::ok", "ok")
    assert doc["details"][ok["detail"]]["diagnosis"]["class"] == "ok"  # its events shown, though they look fine
    assert rows[TID_ABORT]["label"] is None


def test_a_fifo_or_device_given_as_the_output_is_written_into_not_replaced(log: Path, tmp_path: Path) -> None:
    """``-o /dev/null`` once replaced the device with a regular file (the atomic rename)."""
    fifo = tmp_path / "page.fifo"
    os.mkfifo(fifo)
    received: list[bytes] = []
    reader = threading.Thread(target=lambda: received.append(fifo.read_bytes()), daemon=True)
    reader.start()
    result = run("report", log, "-o", fifo)
    reader.join(30)
    assert result.code == 0, result.err
    assert stat.S_ISFIFO(fifo.stat().st_mode)  # still a FIFO ...
    assert b'id="cvdiag-index"' in received[0]  # ... and the page went through it
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".cvdiag-report-")] == []
    assert run("report", log, "-o", os.devnull).code == 0
    assert stat.S_ISCHR(os.stat(os.devnull).st_mode)


def test_all_gives_every_test_a_waterfall(log: Path, tmp_path: Path) -> None:
    out = tmp_path / "report.html"
    result = run("report", log, "-o", out, "--all", "--json")

    assert result.code == 0, result.err
    assert json.loads(result.out)["detailed"] == 4
    index, details = embedded(out.read_text())
    assert len(details) == 4
    assert rows_by_id(index)[TID_OK]["detail"] >= 0


def test_the_page_loads_nothing_from_anywhere(log: Path, tmp_path: Path) -> None:
    out = tmp_path / "report.html"
    result = run("report", log, "-o", out)
    page = out.read_text()

    assert f"wrote {out}: 4 tests, 3 failed" in result.out
    assert "Content-Security-Policy" in page and "default-src 'none'" in page
    assert not re.search(r"<(?:script|link|img|iframe)[^>]+(?:src|href)=", page)


def test_hostile_text_cannot_end_its_script_element(tmp_path: Path) -> None:
    evil = "</script><script>window.pwned=1</script><!--"
    envs = aborted()
    envs[0]["metadata"]["path"] = evil
    log = write(tmp_path / "app.log", [f"CVDIAG {compact(e)}" for e in envs])
    out = tmp_path / "report.html"

    assert run("report", log, "-o", out).code == 0
    page = out.read_text()
    assert evil not in page
    assert page.count("</script>") == page.count("<script")  # only the page's own elements end
    _, (detail,) = embedded(page)
    assert evil in json.dumps(detail["events"][0][5], ensure_ascii=False)  # the value survives, as data


def test_a_log_read_twice_shows_each_event_once(log: Path, tmp_path: Path) -> None:
    copy = tmp_path / "copy.log"
    copy.write_bytes(log.read_bytes())  # as when stdout and the file sink are both given
    out = tmp_path / "report.html"

    assert run("report", log, copy, "-o", out).code == 0
    index, details = embedded(out.read_text())
    assert len(details[rows_by_id(index)[STORY_ID]["detail"]]["events"]) == len(story())


def test_no_tests_writes_nothing_and_says_why(tmp_path: Path) -> None:
    log = write(tmp_path / "noise.log", ["INFO just an app log line"])
    out = tmp_path / "report.html"
    result = run("report", log, "-o", out)

    assert (result.code, result.out) == (1, "")
    assert result.err.startswith("cvdiag: no tests found in the inputs; no report written\ncvdiag: read 1 file")
    assert not out.exists()


def test_a_test_with_endless_events_is_cut_and_counted(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    envs = aborted()
    beats = [dict(envs[1], boundary="backend.sse.event", outcome="info", span_id=f"{i:016x}") for i in range(50)]
    log = write(tmp_path / "app.log", [f"CVDIAG {compact(e)}" for e in [*envs, *beats]])
    monkeypatch.setattr(report_data, "MAX_EVENTS_PER_TEST", 20)

    doc = report_data.build(resolve_sources([str(log)]))

    (detail,) = doc["details"]
    assert len(events_of(detail)) == 20
    assert detail["more"] == len(envs) + len(beats) - 20


def test_dash_writes_the_page_to_stdout_and_the_summary_to_stderr(log: Path, tmp_path: Path) -> None:
    result = run("report", log, "-o", "-", env={"CVDIAG_TRACEBACK": "1"})
    assert result.code == 0, result.err
    assert result.out.startswith("<!doctype html>") and TID_ABORT in result.out
    assert "wrote the report to stdout: 4 tests, 3 failed" in result.err
    assert not (tmp_path / "-").exists() and not Path("-").exists()


def _bytes_read() -> int:
    """What this process has read so far, by any read or pread (Linux counts it)."""
    with open("/proc/self/io", "rb") as io:
        fields = dict(line.split(b": ") for line in io.read().splitlines())
    return int(fields[b"rchar"])


def test_the_report_reads_its_input_once_and_then_only_the_lines_it_details(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """One pass gives the rows, the verdicts and where each test's envelopes are; then
    only the failed tests' lines are read again, where the file holds them: not the
    whole log a second time, though the last of them is at its end."""
    from cvdiag.read import sources

    envs = [*aborted(start=0.0)]
    for i in range(1000):  # passed tests between them: in the index only, never read again
        envs += happy(f"ok-{i:04d}", start=10.0 + i)
    envs += aborted("late-abort", start=2000.0)
    log = write(tmp_path / "app.log", [f"CVDIAG {compact(e)}" for e in envs])
    monkeypatch.setattr(sources, "_FILE_BLOCK", 8192)  # many blocks, so a partial read shows
    read: list[int] = []
    blocks = sources.Source.blocks
    monkeypatch.setattr(sources.Source, "blocks", lambda self, *a: (read.append(len(b)) or b for b in blocks(self, *a)))
    sources_ = resolve_sources([str(log)])

    before = _bytes_read()
    doc = report_data.build(sources_)
    copied = _bytes_read() - before

    size = log.stat().st_size
    assert size > 200 * 8192
    assert sum(read) == size  # the blocks: once
    assert copied < size * 1.1, (copied, size)  # and the lines read again: a few KB of it
    assert [len(events_of(d)) for d in doc["details"]] == [len(aborted())] * 2
    assert [d["diagnosis"]["class"] for d in doc["details"]] == ["client-disconnect"] * 2
    rows = rows_by_id(doc)
    assert len(rows) == 1002 and rows["ok-0123"]["detail"] == -1
    assert rows["ok-0123"]["llm_ms"] == rows["ok-0000"]["llm_ms"] > 0


@pytest.mark.parametrize("where", ["in the file", "in its blocks"])
def test_lines_gone_before_they_are_read_again_are_counted_not_lost(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, where: str
) -> None:
    """A log cut (``copytruncate``) between the pass and the reading again of a detailed
    test's lines, read where the file held them or, past a line too long to keep, from
    its blocks read again: the page says how many of its events it could not show."""
    from cvdiag.read import _diagnosing, sources

    lines = [
        f"CVDIAG {compact(e)}" for e in [*aborted(start=0.0), *happy(start=5.0), *aborted("late-abort", start=10.0)]
    ]
    if where == "in its blocks":
        monkeypatch.setattr(sources, "_FILE_BLOCK", 512)  # a line a block: a whole block goes
        monkeypatch.setattr(sources, "MAX_LINE", 2000)
        lines.insert(0, "x" * 3000)  # left out: the blocks are not the file's bytes
    log = write(tmp_path / "app.log", lines)
    cut = log.stat().st_size - len(lines[-1]) - 1 - 10  # the last line, and the end of the one before it
    monkeypatch.setattr(_diagnosing, "release_free_memory", lambda: os.truncate(log, min(cut, log.stat().st_size)))

    doc = report_data.build(resolve_sources([str(log)]))  # the pass frees memory, then reads the lines again

    first, late = doc["details"]
    assert (len(events_of(first)), first["more"]) == (len(aborted()), 0)
    assert (len(events_of(late)), late["more"]) == (len(aborted()) - 2, 2)


def test_the_lines_of_a_log_deleted_before_they_are_read_again_are_counted(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from cvdiag.read import _diagnosing

    log = write(tmp_path / "app.log", [f"CVDIAG {compact(e)}" for e in [*happy(start=0.0), *aborted(start=5.0)]])
    monkeypatch.setattr(_diagnosing, "release_free_memory", lambda: log.unlink(missing_ok=True))

    (detail,) = report_data.build(resolve_sources([str(log)]))["details"]

    assert (len(events_of(detail)), detail["more"]) == (0, len(aborted()))


_TEXT = st.text(st.characters(codec="utf-8"), max_size=6) | st.sampled_from(["", "a", "a\x00", "a\x00b", "ab", "\x00"])


@st.composite
def _envelopes(draw: st.DrawFn) -> dict:
    canonical = draw(st.booleans())
    seconds = draw(st.integers(0, 3))
    ts = (
        f"2026-11-21T10:00:0{seconds}.{draw(st.integers(0, 2)):03d}Z"
        if canonical
        else f"2026-11-21T10:00:0{seconds}+00:00"
    )
    env = {"ts": ts, "boundary": draw(st.sampled_from(["a", "b", "a.b"])), "test_id": "t"}
    if draw(st.booleans()):
        env["mono_ns"] = draw(st.integers(-(2**70), 2**70))
    if draw(st.booleans()):
        env["span_id"] = draw(_TEXT)
    return env


_AT = {"ts": "2026-11-21T10:00:00.000Z", "boundary": "a", "test_id": "t", "mono_ns": 5}


@given(st.lists(_envelopes(), min_size=2, max_size=8))
@example([{**_AT, "span_id": "a"}, {**_AT, "span_id": "a\x00"}, {**_AT, "span_id": "a\x00b"}, {**_AT, "span_id": ""}])
@example([{**_AT, "span_id": "a\x00"}, {**_AT, "span_id": "a", "boundary": "\x00a"}, _AT])
@settings(max_examples=400, deadline=None)
def test_the_bytes_an_event_is_sorted_by_order_as_its_time_and_identity_do(envs: list[dict]) -> None:
    """A report keeps each event as one bytes object that starts with its sort key: sorting
    those and dropping equal keys must give what sorting by (order key, identity) gives."""
    from cvdiag.contract.timestamps import order_key
    from cvdiag.read.correlate import identity

    def as_tuple(env: dict) -> tuple:
        span, *rest = identity(env)
        return (order_key(env["ts"], env.get("mono_ns")), span is not None, "" if span is None else span, *rest)

    keys = [report_data._sort_key(e, e["ts"]) for e in envs]
    by_bytes = sorted(range(len(envs)), key=lambda i: keys[i])
    by_tuple = sorted(range(len(envs)), key=lambda i: as_tuple(envs[i]))
    assert [as_tuple(envs[i]) for i in by_bytes] == [as_tuple(envs[i]) for i in by_tuple]
    for i in range(len(envs)):
        for j in range(len(envs)):
            assert (keys[i] == keys[j]) == (as_tuple(envs[i]) == as_tuple(envs[j]))


def test_a_report_holds_its_events_at_about_the_size_of_their_json(tmp_path: Path) -> None:
    """The events of the tests in detail are what a report keeps the longest: each costs
    about its JSON, not the buffer orjson grew to write it (4 KB and more)."""
    import tracemalloc

    envs = []
    for i in range(100):
        test = aborted(f"ab-{i:04d}", start=float(i))
        beats = [
            dict(test[1], boundary="backend.sse.event", outcome="info", span_id=f"{i:08x}{k:08x}") for k in range(40)
        ]
        envs += [*test, *beats]
    log = write(tmp_path / "app.log", [f"CVDIAG {compact(e)}" for e in envs])
    report_data.build(resolve_sources([str(log)]))  # the caches of a first read are not the report's
    tracemalloc.start()
    try:
        doc = report_data.build(resolve_sources([str(log)]))
        held = tracemalloc.get_traced_memory()[0]  # what the document holds: the rows and verdicts too
    finally:
        tracemalloc.stop()
    assert sum(len(events_of(d)) for d in doc["details"]) == len(envs)
    texts = sum(len(e) for d in doc["details"] for e in d["events"])
    assert held < 2 * texts + 4000 * len(doc["rows"]), (held, texts)


def test_a_test_not_shown_in_detail_keeps_only_what_its_index_row_shows(log: Path, monkeypatch) -> None:
    """The process that diagnoses drops the whole verdict of a test the report does not
    detail, and reads the events of those it does, so no process holds every test's
    whole verdict and two share the reading."""
    from cvdiag.read import correlate, split

    monkeypatch.setattr(split, "PARALLEL_MIN_BYTES", 0)  # two processes even for this log
    detail = correlate.Detail(100, facts=("ttfb_ms",), reader=report_data._Reader(report_data.Strings()))
    for jobs in (1, 2):
        scan = correlate.scan_tests(resolve_sources([str(log)]), jobs=jobs, keep_json=True, detail=detail)
        rows = {r["test_id"]: r for r in scan.rows}
        passed, failed = rows[TID_OK], rows[TID_ABORT]
        assert passed["_diagnosis"]["evidence"].keys() == {"ttfb_ms"}
        assert (passed["_diagnosis"]["class"], "_kept" in passed, "_read" in passed) == ("ok", False, False)
        assert passed["_llm_ms"] > 0
        assert failed["_diagnosis"]["class"] == "client-disconnect" and len(failed["_diagnosis"]["evidence"]) > 5
        assert len(events_of({"events": failed["_read"].events})) == len(aborted())  # read again where it was diagnosed


def test_a_process_sends_the_report_index_rows_and_only_the_shown_tests_verdicts(log: Path, monkeypatch) -> None:
    """The process that diagnoses makes the page's index rows of its tests, numbered in
    its own table, and sends those: the whole verdict and the events only of a test shown
    in detail, no brief verdict and no row of ``tests``."""
    from cvdiag.read import correlate, split

    monkeypatch.setattr(split, "PARALLEL_MIN_BYTES", 0)  # two processes even for this log
    for jobs in (1, 2):
        reader = report_data._Reader(report_data.Strings())
        detail = correlate.Detail(100, facts=report_data._INDEX_FACTS, reader=reader, keep=reader.keep)
        scan = correlate.scan_tests(resolve_sources([str(log)]), jobs=jobs, keep_json=True, detail=detail)
        rows = {r["test_id"]: r for r in scan.rows}
        passed, failed = rows[TID_OK], rows[TID_ABORT]
        assert passed.keys() == {"test_id", "first_ts", "_cells", "_strings"}
        assert failed.keys() == {"test_id", "first_ts", "_cells", "_strings", "_read", "_diagnosis"}
        assert (passed["_strings"] is reader.strings) == (jobs == 1)  # a process of its own numbers in its copy
        names = list(passed["_strings"])
        cells = dict(zip(report_data.ROW_COLUMNS, passed["_cells"], strict=True))
        assert (names[cells["slug"]], names[cells["class"]], cells["failed"], cells["detail"]) == ("agno", "ok", 0, -1)
        assert cells["reason"].startswith("No failure found") and cells["llm_ms"] > 0 and cells["ttfb_ms"] > 0
        assert failed["_diagnosis"]["class"] == "client-disconnect"
        assert dict(zip(report_data.ROW_COLUMNS, failed["_cells"], strict=True))["failed"] == 1


@pytest.mark.parametrize(
    "env", [{"CVDIAG_PARALLEL_MIN_BYTES": "0"}, {"CVDIAG_EVIDENCE_BUDGET": "1"}], ids=["two-processes", "budget-1"]
)
def test_the_report_is_the_same_in_two_processes_and_in_many_passes(log: Path, tmp_path: Path, env: dict) -> None:
    one, other = tmp_path / "one.html", tmp_path / "other.html"
    assert run("report", "-j", "1", log, "-o", one).code == 0
    assert run("report", "-j", "2", log, "-o", other, env=env).code == 0
    assert _seen(one) == _seen(other)
    assert len(_seen(one)[2]) == 3  # the failed and the flagged tests


def _seen(page: Path) -> tuple[dict, list, list]:
    """What a page shows: names in place of their numbers (each process numbers the
    names of the rows and events it makes in its own order)."""
    index, details = embedded(page.read_text())
    del index["meta"]["generated"]
    names = index.pop("strings")
    rows = [dict(zip(index["meta"]["columns"], row, strict=True)) for row in index.pop("rows")]
    for row in rows:
        row["slug"], row["class"], row["terminal"] = (names[row[k]] for k in ("slug", "class", "terminal"))
        row["layers"] = [names[x] for x in row["layers"]]
    for d in details:
        d["events"] = [[e[0], *(names[x] for x in e[1:4]), *e[4:]] for e in d["events"]]
    return index, rows, details


def test_a_tests_events_travel_joined_unless_they_name_more_than_the_seed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A test shown in detail whose events name only the seed's names (every boundary of
    the catalogue) sends them as one bytes object, numbered alike in every process, even
    once the process's table holds other names (slugs, classes). One whose events name
    a boundary of their own is sent event by event, renumbered where its process's table
    is not the page's; so is any test finished after such a name was numbered in the
    table. Either way the page shows each name as logged."""
    from cvdiag.read import correlate, split

    first, second = aborted("t-seed"), aborted("t-custom", start=5.0)
    second.insert(2, dict(second[1], boundary="backend.custom.step", span_id="00000000000000c5"))
    log = write(tmp_path / "app.log", [f"CVDIAG {compact(e)}" for e in (*happy("t-ok"), *first, *second)])
    for compiled in (True, False):
        if not compiled:
            monkeypatch.setattr(report_data, "_plain_events", lambda: None)
        reader = report_data._Reader(report_data.Strings())
        detail = correlate.Detail(100, reader=reader, keep=reader.keep)
        rows = {
            r["test_id"]: r
            for r in correlate.scan_tests(resolve_sources([str(log)]), keep_json=True, detail=detail).rows
        }
        assert len(reader.strings) > len(report_data._SEED)  # slugs and classes met before the events are read
        assert (rows["t-seed"]["_read"].joined, rows["t-custom"]["_read"].joined) == (True, False), compiled
        assert len(rows["t-seed"]["_read"].events) == 1 and len(rows["t-custom"]["_read"].events) == len(second)
    monkeypatch.undo()
    ours = split.owner(0, 2)
    assert ours(b"t-ok") != ours(b"t-custom")  # its process's table is not the page's: renumbered
    one, other = tmp_path / "one.html", tmp_path / "other.html"
    assert run("report", "-j", "1", log, "-o", one).code == 0
    assert run("report", "-j", "2", log, "-o", other, env={"CVDIAG_PARALLEL_MIN_BYTES": "0"}).code == 0
    assert _seen(one) == _seen(other)
    shown = {d["diagnosis"]["test_id"]: [e[2] for e in d["events"]] for d in _seen(other)[2]}
    assert shown["t-custom"].count("backend.custom.step") == 1 and "backend.sse.aborted" in shown["t-seed"]


def _many_tests(path: Path, tests: int) -> Path:
    """A log of ``tests`` happy tests, one in ten aborted (shown in detail)."""
    ok = "".join(f"CVDIAG {compact(e)}\n" for e in happy("t-0000000"))
    bad = "".join(f"CVDIAG {compact(e)}\n" for e in aborted("t-0000000"))
    path.write_text("".join((bad if i % 10 == 0 else ok).replace("t-0000000", f"t-{i:07d}") for i in range(tests)))
    return path


def test_a_reason_many_rows_give_alike_is_kept_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Rows with the same reason share one string (sent and held once), up to a bound of
    distinct reasons, past which each row keeps its own."""
    sources = resolve_sources([str(_many_tests(tmp_path / "app.log", 60))])
    for cap, shared in ((4096, True), (0, False)):
        monkeypatch.setattr(report_data, "_MAX_REASONS", cap)
        rows = report_data.build(sources)["rows"]
        reason = report_data.ROW_COLUMNS.index("reason")
        ok = [row[reason] for row in rows if row[reason].startswith("No failure found")]
        assert len(ok) == 54 and len(set(ok)) == 1
        assert (len({id(text) for text in ok}) == 1) is shared


def test_a_report_in_one_process_grows_by_a_few_kb_a_test(tmp_path: Path) -> None:
    """What ``report -j1`` holds grows with the tests, not with the log: each test's row,
    evidence and where its lines are (the places packed, the slots handed back as they
    are taken, the layers shared) while the pass ends, then its verdict made into the
    index row it is kept as, one test at a time. Taken as the growth of the peak between
    two logs, so the interpreter's own memory does not count: 2.9 KB a test here (3.2
    with every row made before any is kept, 3.4 with the slots held to the end), where
    it was 4.0 KB."""
    peaks = []
    for tests in (3_000, 12_000):
        r, peak = run_peak("report", "-j1", _many_tests(tmp_path / f"{tests}.log", tests), "-o", tmp_path / "r.html")
        assert r.code == 0 and f"{tests} tests, {tests // 10} failed" in r.out, r.out
        peaks.append(peak)
    per_test_kb = (peaks[1] - peaks[0]) * 1024 / 9_000
    assert per_test_kb < 3.1, f"{per_test_kb:.2f} KB a test ({peaks} MB)"


@pytest.mark.parametrize("jobs", [1, 2])
def test_the_scan_says_where_the_log_ends(log: Path, monkeypatch: pytest.MonkeyPatch, jobs: int) -> None:
    """The end of the log (its latest ``ts``) that the diagnosis dates open calls from,
    as the scan returns it: taken before the rows are made of the aggregates."""
    from cvdiag.contract.timestamps import ts_seconds
    from cvdiag.read import correlate, split

    monkeypatch.setattr(split, "PARALLEL_MIN_BYTES", 0)  # two processes even for this log
    latest = max(json.loads(line[len("CVDIAG ") :])["ts"] for line in log.read_text().splitlines())
    for detail in (None, correlate.Detail(100, reader=report_data._Reader(report_data.Strings()))):
        scan = correlate.scan_tests(resolve_sources([str(log)]), jobs=jobs, keep_json=True, detail=detail)
        assert scan.log_end == ts_seconds(latest)


def test_each_test_goes_from_its_verdict_to_its_index_row_before_the_next_is_judged(
    log: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The process that diagnoses judges a test, makes its row and keeps what the page
    needs of it, then goes on to the next: it never holds every verdict and every row."""
    from cvdiag.read import _diagnosing, correlate

    seen: list[tuple[str, str]] = []
    judge = _diagnosing._Judge.__call__

    def judged(self: Any, ev: Any, status: str | None) -> Any:
        seen.append(("judged", ev.test_id))
        return judge(self, ev, status)

    monkeypatch.setattr(_diagnosing._Judge, "__call__", judged)
    reader = report_data._Reader(report_data.Strings())

    def keep(row: dict) -> dict:
        seen.append(("kept", row["test_id"]))
        return reader.keep(row)

    detail = correlate.Detail(100, facts=report_data._INDEX_FACTS, reader=reader, keep=keep)
    scan = correlate.scan_tests(resolve_sources([str(log)]), jobs=1, keep_json=True, detail=detail)
    ids = [row["test_id"] for row in scan.rows]
    assert len(ids) == 4
    assert sorted(seen) == sorted((step, tid) for tid in ids for step in ("judged", "kept"))
    assert all(seen[k][0] == "judged" and seen[k + 1] == ("kept", seen[k][1]) for k in range(0, len(seen), 2))


@pytest.mark.parametrize("compiled", [True, False])
def test_a_test_shown_is_finished_as_soon_as_its_last_line_is_read(log: Path, monkeypatch, compiled: bool) -> None:
    """Its events are sorted and let go of what sorting needed (a key each, about 40 % of
    their bytes) as soon as its last line is read, not once every test's lines are: a run
    of lines is handed over in one call (compiled, or the loop without it), and a test
    finishes within it, with every line it has and before any line of a test after it."""
    from cvdiag.read import correlate

    if not compiled:
        monkeypatch.setattr(report_data, "_plain_events", lambda: None)
    made: list[Any] = []
    seen: list[tuple[str, int, list[int]]] = []  # at each finish: the test, its events, every test's

    class Events(report_data._TestEvents):
        __slots__ = ("test_id",)

        def finish(self) -> None:
            seen.append((self.test_id, len(self.events), [len(t.events) for t in made]))
            super().finish()

    class Reader(report_data._Reader):
        def __call__(self, row: dict) -> Any:
            events = Events(row, self.strings)
            events.test_id = row["test_id"]
            made.append(events)
            return events

    detail = correlate.Detail(100, everything=True, reader=Reader(report_data.Strings()))
    rows = correlate.scan_tests(resolve_sources([str(log)]), jobs=1, keep_json=True, detail=detail).rows
    events = {r["test_id"]: r["events"] for r in rows}
    assert len(seen) == 4  # each test's lines are together in this log, one run of them
    for k, (tid, taken, every) in enumerate(seen):
        assert taken == events[tid]  # every line of the test read, none left
        assert every[k + 1 :] == [0] * (len(made) - k - 1)  # no test after it read yet
        assert made[k].test_id == tid
