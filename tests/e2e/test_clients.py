"""LLM calls on every instrumented client, end to end: ``examples/clients_app.py`` under
real uvicorn with ``cvdiag.instrument()`` and no LLM code of cvdiag's, one server per
client — a raw aiohttp client, ``requests`` in worker threads, google-genai on its
default aiohttp path and LiteLLM against aimock, boto3 ``bedrock-runtime`` against a
local Bedrock stand-in (``tests/bedrock_stand_in.py``: aimock has no Bedrock).

Each provider failure must get the same class from the real ``cvdiag`` CLI as it does
on httpx (``test_frameworks.py``), with the same messages picking the same scenarios.
"""

from __future__ import annotations

import importlib.util
import json
import sys
from dataclasses import dataclass

import httpx2
import pytest
from conftest import REPO, Aimock, ExampleServer, ServedApp, _unavailable, serve_app

sys.path.insert(0, str(REPO / "tests"))  # the Bedrock stand-in lives beside the unit tests
from bedrock_stand_in import running as bedrock_stand_in

SLOW_THRESHOLD_S = "1"
SLOW_TTFT_MS = 1200
HEARTBEAT_S = "0.2"
RETRIES = 2
HAPPY = "Your parcel shipped yesterday and arrives on Friday."


@dataclass(frozen=True)
class Client:
    name: str
    requires: tuple[str, ...]
    client: str  # the ``client`` key its LLM lines carry
    provider: str
    finish: str | None  # the finish reason of a whole answer (None: not checked)
    tokens: tuple[int, int] | None = (21, 13)


CLIENTS = [
    Client("aiohttp", ("aiohttp",), "aiohttp", "openai-compatible", "stop"),
    Client("requests", ("requests",), "urllib3", "openai-compatible", "stop"),
    Client("genai", ("google.genai", "aiohttp"), "aiohttp", "gemini-compatible", "STOP"),
    Client("litellm", ("litellm",), "httpx", "openai-compatible", "stop"),
    Client("bedrock", ("boto3",), "urllib3", "aws-bedrock", "end_turn"),
]


@dataclass(frozen=True)
class ClientServer(ServedApp):
    spec: Client
    server: ExampleServer


@pytest.fixture(scope="module")
def bedrock():
    with bedrock_stand_in() as stand_in:
        yield stand_in


@pytest.fixture(scope="module", params=CLIENTS, ids=lambda c: c.name)
def app(request: pytest.FixtureRequest, aimock: Aimock, bedrock, tmp_path_factory: pytest.TempPathFactory):
    spec: Client = request.param
    missing = [m for m in spec.requires if importlib.util.find_spec(m) is None]
    if missing:
        _unavailable(f"{spec.name} needs {', '.join(missing)}; install the extra: pip install -e '.[dev,frameworks]'")
    env = {
        "EXAMPLE_CLIENT": spec.name,
        "OPENAI_BASE_URL": f"{aimock.url}/v1",
        "OPENAI_API_KEY": "sk-test-e2e-placeholder",
        "GEMINI_BASE_URL": aimock.url,
        "GEMINI_API_KEY": "gemini-test-e2e-placeholder",
        "BEDROCK_URL": bedrock.url,
        "EXAMPLE_MAX_RETRIES": str(RETRIES),
        "EXAMPLE_HEARTBEAT_S": HEARTBEAT_S,
        "LITELLM_LOG": "ERROR",
        "LITELLM_LOCAL_MODEL_COST_MAP": "True",  # no fetch of the price list over the network
    }
    with serve_app("examples.clients_app:app", env, tmp_path_factory.mktemp(spec.name), request.config) as server:
        # One call first, with time to spare: the SDKs import lazily on it (litellm's
        # import alone takes seconds), which the tests' own time-outs should not include.
        warm_up = httpx2.get(
            f"{server.url}/chat",
            params={"q": "where is my parcel?"},
            headers={"x-test-id": f"warm-up-{spec.name}"},  # not the first test's id
            timeout=120.0,
        )
        assert warm_up.status_code == 200, warm_up.text
        yield ClientServer(spec, server)


@pytest.fixture
def http(app: ClientServer):
    with httpx2.Client(base_url=app.server.url, timeout=30.0) as client:
        yield client


def deltas(body: str) -> str:
    out = []
    for block in body.split("\n\n"):
        lines = block.splitlines()
        if any(line == "event: error" for line in lines):
            out.append("<error>")
        for line in lines:
            if line.startswith("data: ") and not any(x.startswith("event: ") for x in lines):
                out.append(str(json.loads(line[6:]).get("delta", "")))
    return "".join(out)


def client_calls(app: ClientServer, test_id: str) -> list[dict]:
    """The test's LLM call ends, once every ``backend.llm.call.*`` line of it is checked to
    come from the app's client over HTTP."""
    events, ends = app.llm_envelopes(test_id)
    calls = [e for e in events if e["boundary"] in ("backend.llm.call.start", "backend.llm.call.response")]
    assert calls, "no backend.llm.call.* line at all"
    for e in calls:
        meta = e["metadata"]
        assert (meta["source"], meta["provider"], meta["client"]) == ("http", app.spec.provider, app.spec.client)
    return ends


def test_happy_stream_is_one_ok_call_with_its_facts(http, app, cvdiag_test_id) -> None:
    response = http.get("/chat", params={"q": "where is my parcel?"})

    assert response.status_code == 200 and deltas(response.text) == HAPPY
    (llm,) = client_calls(app, cvdiag_test_id)
    meta = llm["metadata"]
    assert (llm["outcome"], meta["http_status"], meta["attempt"], meta["stream"]) == ("ok", 200, 0, True)
    assert meta["output_chars"] == len(HAPPY)
    if app.spec.finish is not None:
        assert meta["finish_reason"] == app.spec.finish
    if app.spec.tokens is not None:
        assert (meta["prompt_tokens"], meta["completion_tokens"]) == app.spec.tokens
    assert meta["ttft_ms"] is not None and meta["ttft_ms"] <= meta["latency_ms"]
    assert meta["chunks"] > 1
    assert app.diagnose(cvdiag_test_id)["class"] == "ok"


def test_provider_500_on_every_attempt_is_an_llm_error(http, app, cvdiag_test_id) -> None:
    response = http.get("/chat", params={"q": "the provider is down"})

    assert response.status_code == 502
    calls = client_calls(app, cvdiag_test_id)
    assert [c["metadata"]["attempt"] for c in calls] == list(range(RETRIES + 1))
    assert {(c["outcome"], c["metadata"]["http_status"]) for c in calls} == {("err", 500)}
    verdict = app.diagnose(cvdiag_test_id)
    assert verdict["class"] == "llm-error"
    assert "500" in verdict["reason"] and f"{RETRIES + 1} attempts" in verdict["reason"]


def test_provider_500_then_success_is_ok_with_both_attempts(http, app, cvdiag_test_id) -> None:
    response = http.get("/chat", params={"q": "a flaky provider"})

    assert response.status_code == 200 and deltas(response.text) == "Answered on the second try."
    calls = client_calls(app, cvdiag_test_id)
    got = [(c["metadata"]["attempt"], c["outcome"], c["metadata"]["http_status"]) for c in calls]
    assert got == [(0, "err", 500), (1, "ok", 200)]
    assert app.diagnose(cvdiag_test_id)["class"] == "ok"


def test_provider_429_is_an_llm_error_with_its_retry_after(http, app, cvdiag_test_id) -> None:
    response = http.get("/chat", params={"q": "too many requests"})

    assert response.status_code == 429
    calls = client_calls(app, cvdiag_test_id)
    assert [c["metadata"]["attempt"] for c in calls] == list(range(RETRIES + 1))
    assert {(c["outcome"], c["metadata"]["http_status"], c["metadata"]["retry_after_ms"]) for c in calls} == {
        ("err", 429, 1000)
    }
    verdict = app.diagnose(cvdiag_test_id)
    assert verdict["class"] == "llm-error" and "429" in verdict["reason"]


def test_stream_cut_by_the_provider_is_an_llm_error(http, app, cvdiag_test_id) -> None:
    response = http.get("/chat", params={"q": "the provider cuts me off"})

    assert response.status_code == 200 and deltas(response.text).endswith("<error>")
    (llm,) = client_calls(app, cvdiag_test_id)
    assert (llm["outcome"], llm["metadata"]["http_status"]) == ("err", 200)
    assert llm["metadata"]["output_chars"] > 0 and llm["metadata"]["finish_reason"] is None
    assert app.diagnose(cvdiag_test_id)["class"] == "llm-error"


def test_slow_first_token_beats_and_is_llm_slow(http, app, cvdiag_test_id) -> None:
    response = http.get("/chat", params={"q": "take your time"})

    assert deltas(response.text) == "A slow answer, but a whole one."
    (llm,) = client_calls(app, cvdiag_test_id)
    assert llm["outcome"] == "ok" and llm["metadata"]["ttft_ms"] >= SLOW_TTFT_MS
    assert [e for e in app.server.envelopes(cvdiag_test_id) if e["boundary"] == "backend.llm.call.heartbeat"]
    assert app.diagnose(cvdiag_test_id, "--slow-s", SLOW_THRESHOLD_S)["class"] == "llm-slow"


def test_empty_completion_is_provider_empty(http, app, cvdiag_test_id) -> None:
    response = http.get("/chat", params={"q": "say nothing"})

    assert deltas(response.text) == ""
    calls = client_calls(app, cvdiag_test_id)
    assert calls and all((c["outcome"], c["metadata"]["output_chars"]) == ("ok", 0) for c in calls)
    assert app.diagnose(cvdiag_test_id)["class"] == "provider-empty"


def test_client_hanging_up_cancels_the_call(http, app, cvdiag_test_id) -> None:
    with http.stream("GET", "/chat", params={"q": "tell me a very long tale"}) as response:
        assert response.status_code == 200
        assert next(response.iter_lines()).startswith("data: ")

    (llm,) = client_calls(app, cvdiag_test_id)
    assert (llm["outcome"], llm["metadata"]["error_class"]) == ("timeout", "CancelledError")
    assert llm["metadata"]["output_chars"] > 0
    verdict = app.diagnose(cvdiag_test_id)
    assert verdict["class"] == "client-disconnect"
