"""Every process knows its test (issue 34 item 3): the test id from an incoming
``traceparent``/``baggage``, a mock provider that declares itself the LLM mock, and the
pytest plugin's trace, environment, receiver and verdict record."""

from __future__ import annotations

import asyncio
import os
import re
from pathlib import Path
from typing import Any

import pytest
from otlpkit import attributes, clean_env, log_records, receiver, value_of
from pytestkit import INNER
from starlette.applications import Starlette
from starlette.responses import JSONResponse, PlainTextResponse
from starlette.routing import Route

import cvdiag
from cvdiag.contract.trace_context import trace_id_of_test, trace_test_id
from cvdiag.diagnosis import diagnose
from cvdiag.testing import capture

pytest_plugins = ["pytester"]
DOCS = Path(__file__).parents[1] / "docs" / "opentelemetry.md"
UUID7 = "0190a9c0-1a2b-7c3d-8e4f-5a6b7c8d9e0f"


def _call(app: Any, headers: list[tuple[bytes, bytes]], path: str = "/") -> None:
    """One request straight into the ASGI app: no client adds headers of its own."""
    scope = {"type": "http", "method": "POST", "path": path, "headers": headers, "query_string": b""}
    sent: list[dict[str, Any]] = []

    async def receive() -> dict[str, Any]:
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    asyncio.run(app(scope, receive, send))


def _ingress_ids(headers: list[tuple[bytes, bytes]]) -> tuple[str, bool]:
    app = cvdiag.CvdiagMiddleware(Starlette(routes=[Route("/", lambda r: PlainTextResponse("ok"), methods=["POST"])]))
    with capture(tier="verbose") as envelopes:
        _call(app, headers)
    (ingress,) = [e for e in envelopes if e["boundary"] == "backend.request.ingress"]
    return ingress["test_id"], ingress["metadata"]["inbound_test_id_adopted"]


@pytest.mark.parametrize(
    ("headers", "expected"),
    [
        ([(b"baggage", b"other=1,cvdiag.test_id=Suite-7;prop=x")], ("suite-7", True)),
        (
            [(b"traceparent", b"00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01")],
            ("0af7651916cd43dd8448eb211c80319c", True),
        ),
        # a test's own trace (the pytest plugin's) gives back the test's own id
        ([(b"traceparent", f"00-{trace_id_of_test(UUID7)}-b7ad6b7169203331-01".encode())], (UUID7, True)),
        (
            [
                (b"x-test-id", b"harness-1"),
                (b"traceparent", b"00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"),
            ],
            ("harness-1", True),
        ),
        (
            [
                (b"baggage", b"cvdiag.test_id=b-1"),
                (b"traceparent", b"00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"),
            ],
            ("b-1", True),
        ),
    ],
)
def test_the_test_id_comes_from_x_test_id_then_baggage_then_traceparent(
    headers: list[tuple[bytes, bytes]], expected: tuple[str, bool]
) -> None:
    assert _ingress_ids(headers) == expected


@pytest.mark.parametrize(
    "headers",
    [
        [(b"traceparent", b"00-00000000000000000000000000000000-b7ad6b7169203331-01")],
        [(b"traceparent", b"garbage")],
        [(b"baggage", b"cvdiag.test_id=!!!")],
        # an x-test-id that sanitizes to nothing is not overruled by the trace
        [(b"x-test-id", b"!!!"), (b"traceparent", b"00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01")],
    ],
)
def test_an_invalid_trace_context_mints_a_fresh_id(headers: list[tuple[bytes, bytes]]) -> None:
    from cvdiag.contract.schema import UUID7_RE

    test_id, adopted = _ingress_ids(headers)
    assert UUID7_RE.match(test_id) and adopted is False


def test_a_uuid7_and_its_trace_id_go_both_ways() -> None:
    assert trace_test_id(trace_id_of_test(UUID7)) == UUID7
    assert len(trace_id_of_test("d4-agno-1234")) == 32 and trace_test_id("0af7651916cd43dd8448eb211c80319c") == (
        "0af7651916cd43dd8448eb211c80319c"
    )


def test_a_mock_provider_declared_as_the_llm_mock_reads_as_the_providers_error() -> None:
    async def responses(request: Any) -> JSONResponse:
        return JSONResponse({"error": {"type": "server_error"}}, status_code=500)

    routes = [Route("/v1/responses", responses, methods=["POST"])]
    verdicts = {}
    for layer in ("backend", "aimock"):
        app = cvdiag.CvdiagMiddleware(Starlette(routes=routes), slug="mock", layer=layer)
        with capture(tier="verbose") as envelopes:
            _call(app, [(b"x-test-id", f"mock-{layer}".encode())], "/v1/responses")
        mine = [e for e in envelopes if e["test_id"] == f"mock-{layer}"]
        verdicts[layer] = (diagnose(mine).cls, [e["boundary"] for e in mine])
    assert verdicts["backend"] == (
        "server-error",
        ["backend.request.ingress", "backend.sse.first_byte", "backend.response.complete"],
    )
    assert verdicts["aimock"] == (
        "llm-error",
        ["aimock.request.ingress", "aimock.response.start", "aimock.response.complete"],
    )
    with pytest.raises(ValueError, match="layer must be one of backend, aimock"):
        cvdiag.CvdiagMiddleware(Starlette(), layer="probe")


def test_each_test_has_its_trace_and_its_environment(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OTEL_RESOURCE_ATTRIBUTES", "team=search,test.id=stale")
    outer = (os.environ.get("TRACEPARENT"), os.environ.get("CVDIAG_TEST_ID"))  # this test's own, set by the plugin
    pytester.makepyfile(
        """
        import os, httpx

        seen = {}

        def handler(request):
            seen.update(request.headers)
            return httpx.Response(200)

        def test_one(cvdiag_test_id):
            httpx.Client(transport=httpx.MockTransport(handler)).get("http://svc/")
            trace = cvdiag_test_id.replace("-", "")
            assert seen["x-test-id"] == cvdiag_test_id
            assert seen["traceparent"].startswith(f"00-{trace}-") and seen["traceparent"].endswith("-01")
            assert os.environ["CVDIAG_TEST_ID"] == cvdiag_test_id
            assert os.environ["TRACEPARENT"] == seen["traceparent"]
            assert os.environ["OTEL_RESOURCE_ATTRIBUTES"] == f"team=search,test.id={cvdiag_test_id}"
        """
    )
    result = pytester.inline_run(*INNER)
    result.assertoutcome(passed=1)
    assert os.environ["OTEL_RESOURCE_ATTRIBUTES"] == "team=search,test.id=stale"
    assert (os.environ.get("TRACEPARENT"), os.environ.get("CVDIAG_TEST_ID")) == outer


CHILD = """
import os, sys
import cvdiag
cvdiag.configure(enabled=True, otlp=True, stdout=False)
with cvdiag.request_context(test_id=os.environ["CVDIAG_TEST_ID"], slug="agent-cli"):
    cvdiag.emit("backend.agent.enter", {"agent_name": "cli", "model_id": "m"})
cvdiag.flush()
"""


def test_the_session_receiver_collects_what_child_processes_export(pytester: pytest.Pytester) -> None:
    """``--cvdiag-otlp-receive``: a process the test starts exports to the session's
    receiver (endpoint and ``test.id`` from the environment); a failed test's report
    reads the receiver's file among its logs."""
    pytester.makepyfile(
        child=CHILD,
        test_agent="""
        import subprocess, sys
        def test_agent(cvdiag_test_id):
            subprocess.run([sys.executable, "child.py"], check=True, timeout=60)
            assert False, "the agent failed"
        """,
    )
    env = {**clean_env(), "PYTHONPATH": os.pathsep.join([str(Path(__file__).parents[1]), str(pytester.path)])}
    for key, value in env.items():
        pytester._monkeypatch.setenv(key, value)
    for key in [k for k in os.environ if k.startswith(("CVDIAG", "OTEL_"))]:
        pytester._monkeypatch.delenv(key)
    result = pytester.runpytest_subprocess(*INNER, "--cvdiag-otlp-receive=otlp/got.jsonl")
    result.assert_outcomes(failed=1)
    out = str(pytester.path / "otlp" / "got.jsonl")
    (record,) = log_records(out)
    test_id = value_of(record["body"])["test_id"]
    assert record["_resource"]["test.id"] == test_id  # OTEL_RESOURCE_ATTRIBUTES, as set for the test
    assert attributes(record)["cvdiag.slug"] == "agent-cli"
    result.stdout.fnmatch_lines([f"test id: {test_id}", "timeline (* events from in-process, otlp/got.jsonl):"])


def test_a_failed_tests_verdict_is_a_record_in_its_trace(pytester: pytest.Pytester, tmp_path: Path) -> None:
    out = str(tmp_path / "otlp.jsonl")
    pytester.makepyfile(
        """
        import cvdiag
        def test_llm_fails():
            cvdiag.emit("backend.llm.call.response",
                        {"provider": "openai", "model": "gpt-4o-mini", "http_status": 503, "error_class": "APIError"},
                        outcome="err", duration_ms=5)
            assert False
        def test_passes():
            pass
        """
    )
    with receiver(out) as r:
        env = {**clean_env(), "CVDIAG_OTLP": "1", "OTEL_EXPORTER_OTLP_ENDPOINT": r.endpoint}
        env["PYTHONPATH"] = str(Path(__file__).parents[1])
        for key in [k for k in os.environ if k.startswith(("CVDIAG", "OTEL_"))]:
            pytester._monkeypatch.delenv(key)
        for key, value in env.items():
            pytester._monkeypatch.setenv(key, value)
        result = pytester.runpytest_subprocess(*INNER)
        result.assert_outcomes(failed=1, passed=1)
    verdicts = [rec for rec in log_records(out) if rec["eventName"] == "cvdiag.verdict"]
    assert len(verdicts) == 1
    (verdict,) = verdicts
    body = value_of(verdict["body"])
    assert (body["class"], body["test"]) == (
        "llm-error",
        "test_a_failed_tests_verdict_is_a_record_in_its_trace.py::test_llm_fails",
    )
    assert 0 < body["confidence"] <= 1 and "gpt-4o-mini" in body["reason"]
    assert verdict["severityText"] == "WARN"
    assert verdict["traceId"] == trace_id_of_test(body["test_id"])
    assert attributes(verdict)["cvdiag.class"] == "llm-error"
    # the test's own envelopes went out too, in the same trace's test
    assert any(value_of(rec["body"]).get("boundary") == "backend.llm.call.response" for rec in log_records(out))


# The documented lines (docs/opentelemetry.md, "Receiving from agents run as processes"):
# each CLI reads the test's id from the environment the plugin sets for it.
CODEX_LINE = 'env_http_headers = { "x-test-id" = "CVDIAG_TEST_ID" }'
CLAUDE_LINE = 'ANTHROPIC_CUSTOM_HEADERS="x-test-id: ${CVDIAG_TEST_ID}"'

#: Stand-ins of the two CLIs' header handling (neither CLI runs here: see the docs):
#: Codex sends, for each entry of ``env_http_headers``, the named variable's value under
#: the header; Claude Code sends each ``Name: Value`` line of ANTHROPIC_CUSTOM_HEADERS.
AGENT = """
import os, sys, tomllib, httpx
kind, url = sys.argv[1], sys.argv[2]
if kind == "codex":
    provider = tomllib.loads(os.environ["CODEX_PROVIDER_TOML"])
    headers = {name: os.environ[var] for name, var in provider["env_http_headers"].items() if var in os.environ}
else:
    headers = dict(line.split(": ", 1) for line in os.environ["ANTHROPIC_CUSTOM_HEADERS"].splitlines() if ": " in line)
sys.exit(0 if httpx.post(url, json={}, headers=headers).status_code == 200 else 1)
"""


@pytest.mark.parametrize("cli", ["codex", "claude"])
def test_an_agent_cli_run_by_a_test_is_matched_to_it_by_the_documented_line(
    cli: str, pytester: pytest.Pytester
) -> None:
    docs = DOCS.read_text()
    assert CODEX_LINE in docs and CLAUDE_LINE in docs
    pytester.makepyfile(
        agent=AGENT,
        test_agent=f"""
        import os, subprocess, sys
        import cvdiag
        from starlette.applications import Starlette
        from starlette.responses import JSONResponse
        from starlette.routing import Route
        from serverkit import running_server

        async def responses(request):
            return JSONResponse({{"error": {{"type": "server_error"}}}}, status_code=500)

        mock = cvdiag.CvdiagMiddleware(
            Starlette(routes=[Route("/v1/responses", responses, methods=["POST"])]), slug="mock", layer="aimock"
        )

        def test_agent_answers():
            with running_server(mock) as base:
                env = dict(os.environ)
                if {cli!r} == "codex":
                    env["CODEX_PROVIDER_TOML"] = {CODEX_LINE!r}
                    argv = [sys.executable, "agent.py", "codex", base + "/v1/responses"]
                else:  # the documented line, expanded by a shell as a user's would be
                    argv = ["sh", "-c", {CLAUDE_LINE!r} + ' exec "$0" agent.py claude "$1"', sys.executable,
                            base + "/v1/responses"]
                    argv[2] = argv[2].replace('ANTHROPIC_CUSTOM_HEADERS=', 'export ANTHROPIC_CUSTOM_HEADERS=', 1)
                    argv[2] = argv[2].replace('}}" exec', '}}"; exec', 1)
                assert subprocess.run(argv, env=env, timeout=60).returncode == 0
        """,
    )
    pytester._monkeypatch.setenv(
        "PYTHONPATH", os.pathsep.join([str(Path(__file__).parent), str(Path(__file__).parents[1])])
    )
    result = pytester.runpytest_subprocess(*INNER)
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["diagnosis: llm-error (0.90) The LLM (its mock) answered HTTP 500*"])


def _codex() -> str | None:
    import shutil

    return os.environ.get("CVDIAG_CODEX_BIN") or shutil.which("codex")


@pytest.mark.skipif(
    _codex() is None,
    reason="the Codex CLI is not installed (npm i @openai/codex; or set CVDIAG_CODEX_BIN): "
    "test_an_agent_cli_run_by_a_test_is_matched_to_it_by_the_documented_line covers the mechanism",
)
def test_the_real_codex_cli_sends_the_tests_id_by_the_documented_line(pytester: pytest.Pytester) -> None:
    """The Codex CLI itself, offline against a mock provider under cvdiag's middleware:
    the documented ``env_http_headers`` line makes its requests carry the test's id, so the
    failing test is matched and diagnosed."""
    pytester.makepyfile(
        test_codex=f"""
        import os, subprocess
        import cvdiag
        from starlette.applications import Starlette
        from starlette.responses import JSONResponse
        from starlette.routing import Route
        from serverkit import running_server

        async def responses(request):
            return JSONResponse({{"error": {{"type": "server_error", "message": "boom"}}}}, status_code=500)

        mock = cvdiag.CvdiagMiddleware(
            Starlette(routes=[Route("/v1/responses", responses, methods=["POST"])]), slug="mock", layer="aimock"
        )

        def test_codex_answers(tmp_path):
            with running_server(mock) as base:
                (tmp_path / "config.toml").write_text(
                    'model = "mock-model"\\nmodel_provider = "mock"\\n[model_providers.mock]\\nname = "mock"\\n'
                    f'base_url = "{{base}}/v1"\\nwire_api = "responses"\\n'
                    'request_max_retries = 0\\nstream_max_retries = 0\\n'
                    + {CODEX_LINE!r} + "\\n"
                )
                env = {{**os.environ, "CODEX_HOME": str(tmp_path)}}
                run = subprocess.run([{_codex()!r}, "exec", "--skip-git-repo-check", "say hi"], env=env,
                                     capture_output=True, text=True, timeout=120, cwd=tmp_path)
            assert run.returncode == 0, run.stderr[-300:]
        """,
    )
    pytester._monkeypatch.setenv(
        "PYTHONPATH", os.pathsep.join([str(Path(__file__).parent), str(Path(__file__).parents[1])])
    )
    result = pytester.runpytest_subprocess(*INNER)
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["diagnosis: llm-error (0.90) The LLM (its mock) answered HTTP 500*"])


def _claude() -> str | None:
    import shutil

    return os.environ.get("CVDIAG_CLAUDE_BIN") or shutil.which("claude")


@pytest.mark.skipif(
    _claude() is None,
    reason="Claude Code is not installed (npm i @anthropic-ai/claude-code; or set CVDIAG_CLAUDE_BIN): "
    "test_an_agent_cli_run_by_a_test_is_matched_to_it_by_the_documented_line covers the mechanism",
)
def test_the_real_claude_code_sends_the_tests_id_by_the_documented_line(pytester: pytest.Pytester) -> None:
    """Claude Code itself, offline against a mock of the Messages API under cvdiag's
    middleware: the documented ``ANTHROPIC_CUSTOM_HEADERS`` line, expanded by a shell,
    makes its requests carry the test's id."""
    pytester.makepyfile(
        test_claude=f"""
        import os, subprocess
        import cvdiag
        from starlette.applications import Starlette
        from starlette.responses import JSONResponse
        from starlette.routing import Route
        from serverkit import running_server

        async def messages(request):
            error = {{"type": "api_error", "message": "boom"}}
            return JSONResponse({{"type": "error", "error": error}}, status_code=500)

        mock = cvdiag.CvdiagMiddleware(
            Starlette(routes=[Route("/v1/messages", messages, methods=["POST"])]), slug="mock", layer="aimock"
        )

        def test_claude_answers(tmp_path):
            with running_server(mock) as base:
                env = {{**os.environ, "HOME": str(tmp_path), "ANTHROPIC_BASE_URL": base,
                       "ANTHROPIC_API_KEY": "sk-ant-test", "CLAUDE_CODE_MAX_RETRIES": "0",
                       # its own telemetry, to the session's receiver (the plugin set the endpoint)
                       "CLAUDE_CODE_ENABLE_TELEMETRY": "1", "OTEL_LOGS_EXPORTER": "otlp",
                       "OTEL_METRICS_EXPORTER": "none", "OTEL_LOGS_EXPORT_INTERVAL": "500"}}
                line = "export " + {CLAUDE_LINE!r}
                run = subprocess.run(["sh", "-c", line + '; exec "$0" -p "say hi" --max-turns 1', {_claude()!r}],
                                     env=env, capture_output=True, text=True, timeout=120, cwd=tmp_path)
            assert run.returncode == 0, run.stdout[-300:]
        """,
    )
    pytester._monkeypatch.setenv(
        "PYTHONPATH", os.pathsep.join([str(Path(__file__).parent), str(Path(__file__).parents[1])])
    )
    result = pytester.runpytest_subprocess(*INNER, "--cvdiag-otlp-receive=otlp.jsonl")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["diagnosis: llm-error (0.90) The LLM (its mock) answered HTTP 500*"])
    # Claude Code's own OTLP reached the session's receiver, tagged with the test's id.
    (test_id,) = re.findall(r"^test id: (\S+)$", result.stdout.str(), re.M)
    errors = [
        r for r in log_records(str(pytester.path / "otlp.jsonl")) if attributes(r).get("event.name") == "api_error"
    ]
    assert errors and {r["_resource"]["test.id"] for r in errors} == {test_id}
    assert attributes(errors[0])["status_code"] in ("500", 500)
