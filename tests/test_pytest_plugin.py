"""The pytest plugin, driven through pytester: inner test sessions run in this process
with the plugin loaded from its entry point, exactly as a user's suite would."""

from __future__ import annotations

import json
import re

import pytest
from pytestkit import INNER

from cvdiag.contract.schema import UUID7_RE
from cvdiag.write import config as cvdiag_config

pytest_plugins = ["pytester"]


def _inline(pytester: pytest.Pytester, *args: str):
    return pytester.inline_run(*INNER, *args)


def _run(pytester: pytest.Pytester, *args: str) -> pytest.RunResult:
    return pytester.runpytest(*INNER, *args)


#: A Starlette app under the middleware: /stream answers, /broken fails its LLM call, /echo echoes.
INNER_APP = """
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.responses import JSONResponse, StreamingResponse
from starlette.routing import Route
from starlette.testclient import TestClient

import cvdiag


async def stream(request):
    async def body():
        async with cvdiag.agent_scope("inner-agent", model_id="gpt-4o-mini"):
            async with cvdiag.llm_call("openai", "gpt-4o-mini") as call:
                for word in ("a", "b", "c"):
                    call.first_token()
                    yield f"data: {word}\\n\\n"
                call.record(3, finish_reason="stop")

    return StreamingResponse(body(), media_type="text/event-stream")


async def broken_llm(request):
    async with cvdiag.agent_scope("inner-agent", model_id="gpt-4o-mini"):
        try:
            async with cvdiag.llm_call("openai", "gpt-4o-mini"):
                raise ConnectionError("provider down")
        except ConnectionError:
            return JSONResponse({"error": "the model provider failed"}, status_code=502)


async def echo(request):
    return JSONResponse({"x-test-id": request.headers.get("x-test-id")})


app = Starlette(
    routes=[Route("/stream", stream), Route("/broken", broken_llm), Route("/echo", echo)],
    middleware=[Middleware(cvdiag.CvdiagMiddleware, slug="inner")],
)
"""


@pytest.fixture
def inner_app(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(inner_app=INNER_APP)


def _sections(reprec, when: str | None = None) -> dict[str, str]:
    """nodeid (and phase) -> the text of its ``cvdiag`` report section, for reports that have one."""
    found = {}
    for report in reprec.getreports("pytest_runtest_logreport"):
        if when is not None and report.when != when:
            continue
        for title, text in report.sections:
            if title == "cvdiag":
                found[f"{report.nodeid}::{report.when}"] = text
    return found


def test_each_test_gets_its_own_uuid7_bound_for_its_whole_run(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        """
        import pytest
        from cvdiag import current_context

        seen = []

        @pytest.fixture
        def id_in_setup():
            return current_context().test_id

        def test_one(cvdiag_test_id, cvdiag_headers, id_in_setup):
            assert current_context().test_id == cvdiag_test_id == id_in_setup
            trace = cvdiag_test_id.replace("-", "")
            assert cvdiag_headers["x-test-id"] == cvdiag_test_id
            assert cvdiag_headers["traceparent"].startswith(f"00-{trace}-") and len(cvdiag_headers) == 2
            seen.append(cvdiag_test_id)

        def test_two(cvdiag_test_id):
            seen.append(cvdiag_test_id)

        def test_ids_differ_and_are_uuid7():
            from cvdiag.contract.schema import UUID7_RE
            assert len(set(seen)) == 2
            assert all(UUID7_RE.match(i) for i in seen)
        """
    )
    _inline(pytester).assertoutcome(passed=3)


def test_async_tests_sharing_one_runner_task_each_see_their_own_id(pytester: pytest.Pytester) -> None:
    # A module-scoped async fixture keeps anyio's runner task alive across tests; that
    # task was created with the first test's context.
    pytester.makepyfile(
        """
        import pytest
        from cvdiag import current_context

        @pytest.fixture(scope="module")
        def anyio_backend():
            return "asyncio"

        @pytest.fixture(scope="module")
        async def shared_resource():
            return "shared"

        @pytest.mark.anyio
        @pytest.mark.parametrize("n", range(3))
        async def test_id_is_this_tests(n, shared_resource, cvdiag_test_id):
            assert current_context().test_id == cvdiag_test_id
        """
    )
    _inline(pytester).assertoutcome(passed=3)


def test_requests_from_testclient_and_import_time_clients_carry_the_test_id(
    pytester: pytest.Pytester, inner_app: None
) -> None:
    pytester.makepyfile(
        """
        import httpx
        import httpx2
        from starlette.testclient import TestClient
        from inner_app import app

        # Built when the module is imported, before any test runs.
        EARLY_HTTPX = httpx.Client(transport=httpx.ASGITransport(app=app), base_url="http://inner")

        def test_testclient(cvdiag_test_id):
            with TestClient(app) as client:
                response = client.get("/echo")
            assert response.json() == {"x-test-id": cvdiag_test_id}
            assert response.headers["x-test-id"] == cvdiag_test_id

        def test_import_time_client(cvdiag_test_id):
            import asyncio

            async def main():
                async with httpx2.AsyncClient(transport=httpx2.ASGITransport(app=app), base_url="http://inner") as c:
                    return (await c.get("/echo")).json()

            assert asyncio.run(main()) == {"x-test-id": cvdiag_test_id}
        """
    )
    _inline(pytester).assertoutcome(passed=2)


def test_cvdiag_events_are_this_tests_envelopes_at_debug_tier(pytester: pytest.Pytester, inner_app: None) -> None:
    pytester.makepyfile(
        """
        from starlette.testclient import TestClient
        import cvdiag
        from inner_app import app

        def test_stream(cvdiag_test_id, cvdiag_events):
            with TestClient(app) as client:
                assert client.get("/stream").status_code == 200
            cvdiag.emit("cvdiag.purge_audit", {"note": "accounting lines are left out"})
            names = cvdiag_events.boundaries()
            assert names[0] == "backend.request.ingress"
            assert names[-1] == "backend.response.complete"
            assert "backend.sse.event" in names  # a debug-tier boundary
            assert not [n for n in names if n.startswith("cvdiag.")]
            assert {e["test_id"] for e in cvdiag_events} == {cvdiag_test_id}
            (response,) = cvdiag_events.of("backend.llm.call.response")
            assert response["metadata"]["finish_reason"] == "stop"
            assert len(cvdiag_events) == len(names)

        def test_other(cvdiag_events):
            assert cvdiag_events.boundaries() == []
        """
    )
    _inline(pytester).assertoutcome(passed=2)


def test_previous_configuration_is_restored_after_the_tests(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        """
        from cvdiag.contract.schema import Tier
        from cvdiag.write.config import configure, get_settings

        def test_enabled_at_debug():
            settings = get_settings()
            assert settings.enabled and settings.tier is Tier.DEBUG

        def test_reconfigured_inside():
            configure(enabled=False, tier="default", stdout=False)
        """
    )
    before = cvdiag_config.get_settings()
    _inline(pytester).assertoutcome(passed=2)
    assert cvdiag_config.get_settings() == before


def test_user_sinks_and_label_stay_as_configured(pytester: pytest.Pytester) -> None:
    log = pytester.path / "user.ndjson"
    pytester.makeconftest(
        f"""
        import cvdiag
        cvdiag.configure(enabled=False, stdout=False, file={str(log)!r}, env="production")
        """
    )
    pytester.makepyfile(
        """
        import cvdiag
        from cvdiag.contract.schema import Tier
        from cvdiag.write.config import get_settings

        def test_user_settings_win():
            settings = get_settings()
            assert settings.enabled
            assert settings.stdout is False and settings.file.endswith("user.ndjson")
            # the user's own label refuses debug; the plugin does not override it
            assert settings.env_label == "production" and settings.tier is Tier.DEFAULT
            with cvdiag.agent_scope("inner-agent"):
                pass
        """
    )
    try:
        _inline(pytester).assertoutcome(passed=1)
    finally:
        cvdiag_config.configure(environ={})  # undo the inner conftest's import-time configure
    boundaries = [json.loads(line)["boundary"] for line in log.read_text().splitlines()]
    assert boundaries == ["backend.agent.enter", "backend.agent.exit"]


def test_marker_sets_the_tier_or_turns_capture_off(pytester: pytest.Pytester, inner_app: None) -> None:
    pytester.makepyfile(
        """
        import re
        import pytest
        from starlette.testclient import TestClient
        import cvdiag
        from cvdiag.write.config import get_settings
        from inner_app import app

        @pytest.mark.cvdiag(tier="verbose")
        def test_verbose(cvdiag_events):
            with TestClient(app) as client:
                client.get("/stream")
            names = cvdiag_events.boundaries()
            assert "backend.llm.call.start" in names and "backend.sse.event" not in names

        @pytest.mark.cvdiag(enabled=False)
        def test_disabled(cvdiag_test_id, cvdiag_headers, cvdiag_events):
            assert re.match(r"^[0-9a-f-]{36}$", cvdiag_test_id)
            assert cvdiag.current_context().test_id == cvdiag_test_id
            with TestClient(app) as client:
                assert client.get("/echo").json() == {"x-test-id": cvdiag_test_id}
            assert not get_settings().enabled
            assert len(cvdiag_events) == 0

        @pytest.mark.cvdiag(tier="chatty")
        def test_bad_tier():
            pass
        """
    )
    reprec = _inline(pytester)
    reprec.assertoutcome(passed=2, failed=1)
    (bad,) = [r for r in reprec.getreports("pytest_runtest_logreport") if r.failed]
    assert bad.when == "setup"
    assert "@pytest.mark.cvdiag" in bad.longreprtext and "chatty" in bad.longreprtext


def test_failed_test_report_names_the_cause_and_shows_the_timeline(pytester: pytest.Pytester, inner_app: None) -> None:
    pytester.makepyfile(
        """
        from starlette.testclient import TestClient
        from inner_app import app

        def test_chat_answers():
            with TestClient(app) as client:
                assert client.get("/broken").status_code == 200

        def test_passes():
            with TestClient(app) as client:
                assert client.get("/stream").status_code == 200
        """
    )
    reprec = _inline(pytester)
    reprec.assertoutcome(passed=1, failed=1)
    sections = _sections(reprec)
    assert [key.split("::", 1)[1] for key in sections] == ["test_chat_answers::call"]
    (text,) = sections.values()
    assert "diagnosis: llm-error" in text
    assert "ConnectionError" in text
    rows = [line for line in text.splitlines() if re.match(r"^\s*\+\d+\.\d{3} s ", line)]
    assert rows[0].split()[2:4] == ["backend", "backend.request.ingress"]
    assert any("backend.llm.call.response" in row and " err " in row for row in rows)
    assert rows[-1].split()[3] == "backend.response.complete"


def test_the_section_is_shown_in_the_terminal_report(pytester: pytest.Pytester, inner_app: None) -> None:
    pytester.makepyfile(
        """
        from starlette.testclient import TestClient
        from inner_app import app

        def test_chat_answers():
            with TestClient(app) as client:
                assert client.get("/broken").status_code == 200
        """
    )
    result = _run(pytester)
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*- cvdiag -*", "test id: *", "diagnosis: llm-error *"])


def test_setup_and_teardown_failures_get_the_section_too(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        """
        import pytest
        import cvdiag

        @pytest.fixture
        def broken_setup():
            with cvdiag.agent_scope("setup-agent"):
                pass
            raise RuntimeError("cannot set up")

        @pytest.fixture
        def broken_teardown():
            yield
            raise RuntimeError("cannot tear down")

        def test_setup(broken_setup):
            pass

        def test_teardown(broken_teardown):
            pass
        """
    )
    reprec = _inline(pytester)
    sections = _sections(reprec)
    assert set(sections) == {
        "test_setup_and_teardown_failures_get_the_section_too.py::test_setup::setup",
        "test_setup_and_teardown_failures_get_the_section_too.py::test_teardown::teardown",
    }
    setup_text = sections["test_setup_and_teardown_failures_get_the_section_too.py::test_setup::setup"]
    assert "backend.agent.enter" in setup_text
    teardown_text = sections["test_setup_and_teardown_failures_get_the_section_too.py::test_teardown::teardown"]
    assert "diagnosis: none" in teardown_text


def test_cvdiag_log_files_join_the_failure_timeline(pytester: pytest.Pytester) -> None:
    log = pytester.path / "server.log"
    log.write_text("uvicorn starting\n")
    pytester.makepyfile(
        f"""
        import json

        from cvdiag.testing import envelope as make_envelope

        def envelope(test_id, boundary, metadata):
            return make_envelope(boundary, test_id=test_id, slug="server", outcome="err", metadata=metadata)

        def test_server_side_failure(cvdiag_test_id):
            with open({str(log)!r}, "a") as fh:
                other = envelope("someone-else", "backend.error.caught", {{"exception_type": "KeyError"}})
                fh.write("CVDIAG " + json.dumps(other) + "\\n")
                mine = envelope(cvdiag_test_id, "backend.sse.aborted",
                                {{"termination_kind": "chunk_error", "bytes_before_abort": 12}})
                fh.write("2026-11-21 10:00:00 INFO backend-1  | CVDIAG " + json.dumps(mine) + "\\n")
                fh.write('CVDIAG {{"schema_version":1,"test_id":"' + cvdiag_test_id + '","trace_id":"cut off\\n')
            assert False, "the server broke the stream"
        """
    )
    missing = pytester.path / "not-started.log"
    reprec = _inline(pytester, f"--cvdiag-log={log}", f"--cvdiag-log={missing}")
    (text,) = _sections(reprec).values()
    assert f"note: {missing}: no such file" in text
    assert "diagnosis: stream-error" in text
    assert "backend.sse.aborted" in text and "chunk_error" in text
    assert "KeyError" not in text
    assert str(log) in text
    assert "note: cvdiag: skipped 1 malformed CVDIAG line" in text


def test_emit_probe_puts_the_harness_on_the_timeline(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        """
        import pytest

        def test_passes(request, cvdiag_events):
            starts = cvdiag_events.of("probe.start")
            if not request.config.getoption("cvdiag_emit_probe"):
                assert starts == []
                return
            (start,) = starts
            assert start["layer"] == "probe"
            assert start["metadata"]["url"].endswith("::test_passes")

        def test_fails():
            raise ValueError("boom")

        @pytest.mark.skip(reason="not today")
        def test_skipped():
            pass
        """
    )
    reprec = _inline(pytester, "--cvdiag-emit-probe")
    reprec.assertoutcome(passed=1, failed=1, skipped=1)
    (text,) = _sections(reprec).values()
    assert "probe.start" in text
    assert "diagnosis: no-backend" in text  # harness events, nothing from a backend

    without = _inline(pytester)
    (plain,) = _sections(without).values()
    assert "probe.start" not in plain


def test_probe_exit_carries_the_tests_outcome(pytester: pytest.Pytester) -> None:
    log = pytester.path / "probe.ndjson"
    pytester.makeconftest(
        f"""
        import cvdiag
        cvdiag.configure(stdout=False, file={str(log)!r})
        """
    )
    pytester.makepyfile(
        """
        import pytest

        def test_passes():
            pass

        def test_fails():
            raise ValueError("boom")

        @pytest.mark.skip(reason="not today")
        def test_skipped():
            pass
        """
    )
    try:
        _inline(pytester, "--cvdiag-emit-probe")
    finally:
        cvdiag_config.configure(environ={})
    exits = [json.loads(line) for line in log.read_text().splitlines()]
    exits = [e for e in exits if e["boundary"] == "probe.exit"]
    assert [(e["metadata"]["terminal_outcome"], e["outcome"]) for e in exits] == [
        ("ok", "ok"),
        ("error", "err"),
        ("cancelled", "err"),
    ]
    assert exits[1]["metadata"]["failure_classifier"] == "ValueError"


def test_strict_mode_makes_instrumentation_bugs_fail_the_test(pytester: pytest.Pytester) -> None:
    unwritable = pytester.mkdir("a-directory-not-a-file")
    pytester.makeconftest(
        f"""
        import cvdiag
        cvdiag.configure(stdout=False, file={str(unwritable)!r})
        """
    )
    pytester.makepyfile(
        """
        import cvdiag

        def test_failing_sink():
            with cvdiag.agent_scope("agent"):
                pass

        def test_unregistered_boundary():
            cvdiag.emit("backend.not.in.the.catalog")
        """
    )
    try:
        _inline(pytester).assertoutcome(passed=2)
        strict = _inline(pytester, "--cvdiag-strict")
    finally:
        cvdiag_config.configure(environ={})
    failed = {r.nodeid.split("::")[1]: r for r in strict.getreports("pytest_runtest_logreport") if r.failed}
    assert set(failed) == {"test_failing_sink", "test_unregistered_boundary"}
    # the sink fails on the writer thread: re-raised at the next emit or at the latest
    # by the plugin's flush when the test's fixtures are torn down
    assert failed["test_failing_sink"].when in ("call", "teardown")
    assert "IsADirectoryError" in failed["test_failing_sink"].longreprtext
    assert "backend.not.in.the.catalog" in failed["test_unregistered_boundary"].longreprtext


def test_the_plugin_can_be_turned_off(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        """
        def test_needs_the_id(cvdiag_test_id):
            pass
        """
    )
    result = _run(pytester, "-p", "no:cvdiag")
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(["*fixture 'cvdiag_test_id' not found*"])


def test_the_outer_test_has_an_id_too(cvdiag_test_id: str) -> None:
    assert UUID7_RE.match(cvdiag_test_id)


_PRINTS = """
import cvdiag

def test_emits():
    with cvdiag.agent_scope("quiet-agent"):
        pass
    print("app output")
"""


def test_capture_prints_nothing_to_stdout_unless_cvdiag_was_on(pytester: pytest.Pytester, monkeypatch):
    pytester.makepyfile(test_prints=_PRINTS)
    for name in ("CVDIAG_ENABLED", "CVDIAG_BACKEND_EMITTER", "CVDIAG_STDOUT"):
        monkeypatch.delenv(name, raising=False)
    saved = cvdiag_config.get_settings()
    try:
        cvdiag_config.configure(environ={})  # cvdiag off, as on a machine where nobody set it up
        quiet = _run(pytester, "-s")
        cvdiag_config.configure(enabled=True, environ={})  # the user had it on: keep their stdout copy
        loud = _run(pytester, "-s")
    finally:
        cvdiag_config.apply_settings(saved)
    quiet.assert_outcomes(passed=1)
    loud.assert_outcomes(passed=1)
    assert "app output" in quiet.stdout.str() and "CVDIAG {" not in quiet.stdout.str()
    assert "CVDIAG {" in loud.stdout.str()


def test_a_harness_on_requests_or_aiohttp_sends_the_test_id_and_the_session_undoes_it(
    pytester: pytest.Pytester,
) -> None:
    """The plugin instruments every client (``cvdiag.instrument()``), not only httpx: a
    harness's ``requests`` and ``aiohttp`` calls to a real local server carry the test id,
    and the session's end puts urllib3 and aiohttp back as they were. In a process of its
    own: this session's plugin must not have patched the clients already."""
    pytester.makeconftest(
        """
        import pytest

        @pytest.hookimpl(trylast=True)
        def pytest_unconfigure(config):
            import aiohttp
            import urllib3
            from cvdiag.write import _aiohttp_capture, _urllib3_capture

            patched = (urllib3.HTTPConnectionPool.__dict__["urlopen"] is _urllib3_capture._urlopen,
                       aiohttp.ClientSession.__dict__["_request"] is _aiohttp_capture._request)
            print(f"patched at the end: {patched}")
        """
    )
    pytester.makepyfile(
        """
        import asyncio
        import threading
        from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

        import aiohttp
        import pytest
        import requests

        class Echo(BaseHTTPRequestHandler):
            def do_GET(self):
                body = (self.headers.get("x-test-id") or "none").encode()
                self.send_response(200)
                self.send_header("content-length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args):
                pass

        @pytest.fixture
        def url():
            server = ThreadingHTTPServer(("127.0.0.1", 0), Echo)
            threading.Thread(target=server.serve_forever, daemon=True).start()
            yield f"http://127.0.0.1:{server.server_address[1]}/"
            server.shutdown()
            server.server_close()

        def test_requests(cvdiag_test_id, url):
            assert requests.get(url, timeout=10).text == cvdiag_test_id

        def test_aiohttp(cvdiag_test_id, url):
            async def main():
                async with aiohttp.ClientSession() as session, session.get(url) as response:
                    return await response.text()

            assert asyncio.run(main()) == cvdiag_test_id
        """
    )
    result = pytester.runpytest_subprocess(*INNER, "-s")
    result.assert_outcomes(passed=2)
    assert "patched at the end: (False, False)" in result.stdout.str()
