"""The HTML report of a real run: the example app under uvicorn, the openai SDK, aimock,
four requests (a happy one, a provider 500, a client hanging up, a slow call), then
``cvdiag report`` on the server's log, opened in headless chromium.

With ``CVDIAG_REPORT_ARTIFACT=PATH`` (CI) the report is also copied there, to keep.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import uuid
from pathlib import Path

import httpx2

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/, for the browser kit
from reportkit import browser, visit

SLOW_MS = 1200
EXPECTED = {"happy": "ok", "provider-500": "llm-error", "hang-up": "client-disconnect", "slow": "llm-slow"}


def _drive(server_url: str, aimock, ids: dict[str, str]) -> None:
    aimock.chaos(ids["provider-500"], dropRate=1)
    aimock.chaos(ids["slow"], latencyMs=SLOW_MS)
    with httpx2.Client(base_url=server_url, timeout=30.0) as http:

        def ask(name: str, q: str = "hello") -> httpx2.Response:
            return http.get("/chat", params={"q": q}, headers={"x-test-id": ids[name]})

        assert ask("happy").status_code == 200
        assert ask("provider-500").status_code == 502
        story = {"q": "tell me a long story"}
        with http.stream("GET", "/chat", params=story, headers={"x-test-id": ids["hang-up"]}) as response:
            assert next(response.iter_lines()).startswith("data: ")  # then hang up
        assert ask("slow").status_code == 200


def test_report_of_a_real_run_shows_each_failure_for_what_it_is(
    example_server, aimock, cvdiag_cli, tmp_path: Path
) -> None:
    run = uuid.uuid4().hex[:8]
    ids = {name: f"report-{name}-{run}" for name in EXPECTED}
    _drive(example_server.url, aimock, ids)
    events = {name: example_server.envelopes(tid) for name, tid in ids.items()}  # each up to its terminal

    out = tmp_path / "real-run-report.html"
    result = cvdiag_cli("report", str(example_server.log), "-o", str(out), "--slow-s", "1", "--json")
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["tests"] >= 4
    if artifact := os.environ.get("CVDIAG_REPORT_ARTIFACT"):
        Path(artifact).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(out, artifact)

    with browser() as chrome, visit(chrome, out) as seen:
        page = seen.page
        page.fill("#q", run)
        shown = page.eval_on_selector_all(
            "#grid tr.row", "rs => rs.map(r => [r.dataset.id, r.children[1].textContent])"
        )
        assert dict(shown) == {ids[name]: cls for name, cls in EXPECTED.items()}
        for name in ("provider-500", "hang-up", "slow"):
            page.evaluate("id => { location.hash = 'test=' + encodeURIComponent(id) }", ids[name])
            page.wait_for_selector(f'#detail[data-id="{ids[name]}"] #waterfall svg')
            assert page.eval_on_selector_all("#waterfall g.lane", "gs => gs.map(g => g.dataset.layer)") == ["backend"]
            drawn = page.eval_on_selector_all("#waterfall [data-ev]", "ns => ns.map(n => n.dataset.boundary)")
            assert sorted(drawn) == sorted(e["boundary"] for e in events[name])
            assert f"verdict: {EXPECTED[name]}" in page.text_content("#diagnosis")
            bars = page.eval_on_selector_all("#waterfall g.bar", "gs => gs.map(g => g.dataset.label)")
            if name == "provider-500":
                llm = [e["metadata"] for e in events[name] if e["boundary"] == "backend.llm.call.response"]
                assert llm and all(m["http_status"] == 500 for m in llm), llm
                assert sum(b.startswith("attempt ") and "HTTP 500" in b for b in bars) == len(llm), bars
            if name == "hang-up":
                assert any(b.startswith("aborted rst") for b in bars), bars
            if name == "slow":
                beats = [e for e in events[name] if e["boundary"] == "backend.llm.call.heartbeat"]
                assert beats and len(page.query_selector_all("#waterfall line.hb")) == len(beats)
        seen.assert_clean()
