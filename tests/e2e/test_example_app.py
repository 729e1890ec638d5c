"""The whole path, for real: this test's id travels from the test (httpx2, instrumented by
the pytest plugin) through the example app (uvicorn subprocess, CvdiagMiddleware, the
openai SDK) to aimock, and back out through the server's log and the ``cvdiag`` CLI.

Every scenario asserts three things: the id reached aimock (its request journal), the
backend's envelopes carry it, and ``cvdiag diagnose`` names the right class.
"""

from __future__ import annotations

import json

import httpx2
import pytest

#: Injected LLM latency: long enough for several 0.2 s heartbeats, and above the slow
#: threshold given to the CLI, so the verdict does not depend on machine speed.
LATENCY_MS = 1200
SLOW_THRESHOLD_S = "1"


def diagnose(cvdiag_cli, server, test_id: str, *extra: str) -> dict:
    result = cvdiag_cli("diagnose", test_id, str(server.log), "--json", *extra)
    assert result.returncode == 0, result.stderr
    (verdict,) = json.loads(result.stdout)
    assert verdict["test_id"] == test_id
    return verdict


def timeline(cvdiag_cli, server, test_id: str) -> list[dict]:
    result = cvdiag_cli("timeline", test_id, str(server.log), "--json")
    assert result.returncode == 0, result.stderr
    found = json.loads(result.stdout)
    assert found["test_id"] == test_id
    return found["events"]


def by_boundary(events: list[dict], name: str) -> list[dict]:
    return [e for e in events if e["boundary"] == name]


def sse_data(body: str) -> list[dict]:
    return [json.loads(line[len("data: ") :]) for line in body.splitlines() if line.startswith("data: ")]


@pytest.fixture
def client(example_server):
    # No x-test-id here on purpose: the plugin's propagation adds this test's id.
    with httpx2.Client(base_url=example_server.url, timeout=30.0) as http:
        yield http


def test_happy_stream_carries_the_id_to_aimock_and_into_the_log(
    client, example_server, aimock, cvdiag_test_id: str, cvdiag_cli
) -> None:
    response = client.get("/chat", params={"q": "hello"})

    assert response.status_code == 200
    assert response.headers["x-test-id"] == cvdiag_test_id
    deltas = "".join(d.get("delta", "") for d in sse_data(response.text))
    assert deltas == "Hello from aimock! This answer streams in a few small chunks."

    (call,) = aimock.journal(cvdiag_test_id)
    assert call["path"] == "/v1/chat/completions"
    assert call["headers"]["x-aimock-context"] == "example"
    assert call["response"]["status"] == 200

    example_server.envelopes(cvdiag_test_id)
    events = timeline(cvdiag_cli, example_server, cvdiag_test_id)
    # heartbeats (every 0.2 s here) may fall anywhere in a call that a loaded machine slows
    assert [e["boundary"] for e in events if e["boundary"] != "backend.llm.call.heartbeat"] == [
        "backend.request.ingress",
        "backend.agent.enter",
        "backend.llm.call.start",
        "backend.sse.first_byte",
        "backend.llm.call.response",
        "backend.agent.exit",
        "backend.response.complete",
    ]
    assert {e["slug"] for e in events} == {"example"}
    (llm,) = by_boundary(events, "backend.llm.call.response")
    assert llm["outcome"] == "ok"
    assert llm["metadata"]["source"] == "http"  # the app has no llm_call: recorded at the HTTP client
    assert llm["metadata"]["finish_reason"] == "stop"
    assert llm["metadata"]["completion_tokens"] > 0
    assert llm["metadata"]["ttft_ms"] is not None
    assert diagnose(cvdiag_cli, example_server, cvdiag_test_id)["class"] == "ok"


def test_provider_500_is_an_llm_error(client, example_server, aimock, cvdiag_test_id, cvdiag_cli) -> None:
    aimock.chaos(cvdiag_test_id, dropRate=1)

    response = client.get("/chat", params={"q": "hello"})

    assert response.status_code == 502
    assert [c["response"]["status"] for c in aimock.journal(cvdiag_test_id)] == [500]
    events = example_server.envelopes(cvdiag_test_id)
    (llm,) = by_boundary(events, "backend.llm.call.response")
    assert llm["outcome"] == "err"
    assert (llm["metadata"]["source"], llm["metadata"]["http_status"], llm["metadata"]["attempt"]) == ("http", 500, 0)
    verdict = diagnose(cvdiag_cli, example_server, cvdiag_test_id)
    assert verdict["class"] == "llm-error"
    assert "500" in verdict["reason"]


def test_relayed_provider_429_is_an_llm_error_not_the_edge(
    client, example_server, aimock, cvdiag_test_id, cvdiag_cli
) -> None:
    aimock.chaos(cvdiag_test_id, rateLimitRate=1)

    response = client.get("/chat", params={"q": "hello"})

    assert response.status_code == 429
    assert response.headers["retry-after"] == "1"
    assert [c["response"]["status"] for c in aimock.journal(cvdiag_test_id)] == [429]
    events = example_server.envelopes(cvdiag_test_id)
    (complete,) = by_boundary(events, "backend.response.complete")
    assert complete["metadata"]["http_status"] == 429
    assert complete["edge_headers"]["retry-after"] == "1"  # the app relays it; no cf-ray, no via
    (llm,) = by_boundary(events, "backend.llm.call.response")
    assert (llm["outcome"], llm["metadata"]["http_status"], llm["metadata"]["retry_after_ms"]) == ("err", 429, 1000)
    verdict = diagnose(cvdiag_cli, example_server, cvdiag_test_id)
    assert verdict["class"] == "llm-error"
    assert "429" in verdict["reason"]


def test_provider_cutting_the_stream_is_an_llm_error_and_a_broken_stream(
    client, example_server, aimock, cvdiag_test_id, cvdiag_cli
) -> None:
    received = ""
    with pytest.raises(httpx2.HTTPError), client.stream("GET", "/chat", params={"q": "cut me off"}) as response:
        assert response.status_code == 200
        for text in response.iter_text():
            received += text

    assert sse_data(received)  # the first deltas arrived before the break
    (call,) = aimock.journal(cvdiag_test_id)
    assert call["response"]["interrupted"] is True
    events = example_server.envelopes(cvdiag_test_id)
    (aborted,) = by_boundary(events, "backend.sse.aborted")
    assert aborted["metadata"]["termination_kind"] == "chunk_error"
    (llm,) = by_boundary(events, "backend.llm.call.response")
    assert llm["outcome"] == "err"
    # the LLM failure is the root cause of the broken stream, so it wins (issue 4's precedence)
    assert diagnose(cvdiag_cli, example_server, cvdiag_test_id)["class"] == "llm-error"


def test_slow_provider_shows_heartbeats_and_is_llm_slow(
    client, example_server, aimock, cvdiag_test_id, cvdiag_cli
) -> None:
    aimock.chaos(cvdiag_test_id, latencyMs=LATENCY_MS)

    response = client.get("/chat", params={"q": "hello"})

    assert response.status_code == 200
    assert len(aimock.journal(cvdiag_test_id)) == 1
    events = example_server.envelopes(cvdiag_test_id)
    heartbeats = by_boundary(events, "backend.llm.call.heartbeat")
    assert heartbeats
    (llm,) = by_boundary(events, "backend.llm.call.response")
    assert llm["outcome"] == "ok"
    assert llm["metadata"]["latency_ms"] >= LATENCY_MS
    assert all(h["metadata"]["elapsed_ms_since_start"] <= llm["metadata"]["latency_ms"] for h in heartbeats)
    assert diagnose(cvdiag_cli, example_server, cvdiag_test_id, "--slow-s", SLOW_THRESHOLD_S)["class"] == "llm-slow"
    assert diagnose(cvdiag_cli, example_server, cvdiag_test_id)["class"] == "ok"  # under the default 30 s threshold


def test_client_hanging_up_mid_stream_is_a_client_disconnect(
    client, example_server, aimock, cvdiag_test_id, cvdiag_cli
) -> None:
    with client.stream("GET", "/chat", params={"q": "tell me a long story"}) as response:
        assert response.status_code == 200
        first = next(response.iter_lines())
        assert first.startswith("data: ")
    # leaving the block closed the connection after the first event

    assert len(aimock.journal(cvdiag_test_id)) == 1
    events = example_server.envelopes(cvdiag_test_id)
    (aborted,) = by_boundary(events, "backend.sse.aborted")
    assert aborted["metadata"]["termination_kind"] == "rst"
    (llm,) = by_boundary(events, "backend.llm.call.response")
    assert (llm["outcome"], llm["metadata"]["error_class"]) == ("timeout", "CancelledError")
    (agent,) = by_boundary(events, "backend.agent.exit")
    assert agent["metadata"]["terminal_outcome"] == "cancelled"
    verdict = diagnose(cvdiag_cli, example_server, cvdiag_test_id)
    assert verdict["class"] == "client-disconnect"
    assert "after the first byte" in verdict["reason"]


def test_every_test_id_in_the_log_reached_both_the_backend_and_aimock(
    client, example_server, aimock, cvdiag_test_id, cvdiag_cli
) -> None:
    """Whatever ran before in this session, every id the CLI finds in the server's log
    was also seen by aimock: propagation has no gaps."""
    assert client.get("/chat", params={"q": "hello"}).status_code == 200
    example_server.envelopes(cvdiag_test_id)

    result = cvdiag_cli("tests", str(example_server.log), "--json")
    assert result.returncode == 0, result.stderr
    rows = {row["test_id"]: row for row in json.loads(result.stdout)}
    assert cvdiag_test_id in rows
    for test_id, row in rows.items():
        assert "backend" in row["layers"]
        assert aimock.journal(test_id), f"aimock never saw {test_id}"
