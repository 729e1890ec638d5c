"""``cvdiag report``: the file it writes and the data inside it (the browser tests look
at the page itself: tests/test_report_browser.py)."""

from __future__ import annotations

import json
import os
import re
import stat
import threading
from pathlib import Path

import pytest
from cvdiag_cli import run
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
    assert result.err == "cvdiag: no tests found in the inputs; no report written\n"
    assert not out.exists()


def test_a_test_with_endless_events_is_cut_and_counted(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    envs = aborted()
    beats = [dict(envs[1], boundary="backend.sse.event", outcome="info", span_id=f"{i:016x}") for i in range(50)]
    log = write(tmp_path / "app.log", [f"CVDIAG {compact(e)}" for e in [*envs, *beats]])
    monkeypatch.setattr(report_data, "MAX_EVENTS_PER_TEST", 20)

    doc = report_data.build(resolve_sources([str(log)]))

    (detail,) = doc["details"]
    assert len(detail["events"]) == 20
    assert detail["more"] == len(envs) + len(beats) - 20


def test_dash_writes_the_page_to_stdout_and_the_summary_to_stderr(log: Path, tmp_path: Path) -> None:
    result = run("report", log, "-o", "-", env={"CVDIAG_TRACEBACK": "1"})
    assert result.code == 0, result.err
    assert result.out.startswith("<!doctype html>") and TID_ABORT in result.out
    assert "wrote the report to stdout: 4 tests, 3 failed" in result.err
    assert not (tmp_path / "-").exists() and not Path("-").exists()


def test_the_report_reads_its_input_once_and_then_only_the_lines_it_details(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """One pass gives the rows, the verdicts and where each test's envelopes are; only the
    failed test's lines are read again (it is at the start), not the whole log a second time."""
    from cvdiag.read import sources

    envs = [*aborted(start=0.0)]
    for i in range(300):  # passed tests after it: in the index only, never read again
        envs += happy(f"ok-{i:04d}", start=10.0 + i)
    log = write(tmp_path / "app.log", [f"CVDIAG {compact(e)}" for e in envs])
    monkeypatch.setattr(sources, "_FILE_BLOCK", 8192)  # many blocks, so a partial read shows
    read: list[int] = []
    blocks = sources.Source.blocks
    monkeypatch.setattr(sources.Source, "blocks", lambda self, *a: (read.append(len(b)) or b for b in blocks(self, *a)))

    doc = report_data.build(resolve_sources([str(log)]))

    size = log.stat().st_size
    assert size > 40 * 8192
    assert sum(read) < size * 1.1, (sum(read), size)
    (detail,) = doc["details"]
    assert len(detail["events"]) == len(aborted())
    assert detail["diagnosis"]["class"] == "client-disconnect"
    rows = rows_by_id(doc)
    assert len(rows) == 301 and rows["ok-0123"]["detail"] == -1
    assert rows["ok-0123"]["llm_ms"] == rows["ok-0000"]["llm_ms"] > 0
