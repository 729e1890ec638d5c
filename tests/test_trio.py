"""cvdiag under trio (hypercorn's trio worker): a request that answers 200 without
cvdiag answers 200 with it, with its heartbeats and no open call left behind (issue 18 item 8)."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import time

import httpx
import orjson
import pytest
import trio
from emitkit import capture
from serverkit import free_port, wait_until_serving

import cvdiag
from cvdiag.write.scopes import current_llm_call

APP = textwrap.dedent(
    """
    import anyio
    from starlette.applications import Starlette
    from starlette.responses import JSONResponse
    from starlette.routing import Route

    import cvdiag
    from cvdiag.write.scopes import current_llm_call

    async def answer(request):
        async with cvdiag.agent_scope("planner"):
            async with cvdiag.llm_call("openai", "gpt-4o-mini", heartbeat_s=0.05) as call:
                await anyio.sleep(0.3)
                call.record(response_token_count=3)
        return JSONResponse({"answer": 42, "open_call_after": current_llm_call() is not None})

    app = cvdiag.CvdiagMiddleware(Starlette(routes=[Route("/answer", answer)]), slug="trio-app")
    """
)


def _serve(tmp_path, enabled: bool):
    (tmp_path / "trioapp.py").write_text(APP)
    port = free_port()
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(tmp_path), os.getcwd()]),
        "CVDIAG_ENABLED": "1" if enabled else "0",
        "CVDIAG_TIER": "verbose",
        "CVDIAG_FILE": str(tmp_path / "cvdiag.ndjson"),
        "CVDIAG_STDOUT": "0",
    }
    hypercorn = [sys.executable, "-m", "hypercorn", "--worker-class", "trio", "--bind", f"127.0.0.1:{port}"]
    proc = subprocess.Popen([*hypercorn, "trioapp:app"], env=env, cwd=tmp_path, stderr=subprocess.PIPE)
    return proc, f"http://127.0.0.1:{port}"


@pytest.mark.parametrize("enabled", [False, True], ids=["without-cvdiag", "with-cvdiag"])
def test_llm_call_under_hypercorns_trio_worker_answers_as_without_cvdiag(tmp_path, enabled: bool):
    proc, base = _serve(tmp_path, enabled)
    try:
        wait_until_serving(base, proc)
        response = httpx.get(base + "/answer", headers={"x-test-id": "trio-1"}, timeout=10)
        time.sleep(0.3)
    finally:
        proc.terminate()
        _, stderr = proc.communicate(timeout=15)
    assert response.status_code == 200, stderr.decode()[-2000:]
    assert response.json() == {"answer": 42, "open_call_after": False}
    log = tmp_path / "cvdiag.ndjson"
    if not enabled:
        assert not log.exists()
        return
    events = [orjson.loads(line) for line in log.read_bytes().splitlines()]
    names = [e["boundary"] for e in events if e["test_id"] == "trio-1"]
    assert names.count("backend.llm.call.heartbeat") >= 2, names
    ends = [n for n in names if n in ("backend.llm.call.response", "backend.agent.exit", "backend.response.complete")]
    assert ends == ["backend.llm.call.response", "backend.agent.exit", "backend.response.complete"], names
    call = next(e for e in events if e["boundary"] == "backend.llm.call.response")
    assert call["outcome"] == "ok" and call["metadata"]["response_token_count"] == 3


def test_a_cancelled_llm_call_under_trio_is_a_timeout_and_leaves_no_open_call():
    async def main() -> tuple[bool, bool]:
        with trio.move_on_after(0.1):
            async with cvdiag.agent_scope("planner"), cvdiag.llm_call("openai", "gpt-4o-mini", heartbeat_s=0.02):
                await trio.sleep(5)
        return current_llm_call() is None, True

    with capture("verbose") as cap:
        assert trio.run(main) == (True, True)
        call = cap.one("backend.llm.call.response")
        agent = cap.one("backend.agent.exit")
    assert (call["outcome"], call["metadata"]["error_class"]) == ("timeout", "CancelledError")
    assert agent["metadata"]["terminal_outcome"] == "cancelled"
    assert len(cap.of("backend.llm.call.heartbeat")) >= 2
