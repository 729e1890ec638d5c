"""Importing cvdiag with nothing set starts nothing and writes nothing (spec section 8)."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

PROBE = textwrap.dedent(
    """
    import logging, sys, threading
    handlers_before = list(logging.getLogger().handlers)
    import cvdiag, structlog
    from starlette.applications import Starlette
    from starlette.testclient import TestClient
    app = cvdiag.CvdiagMiddleware(Starlette())
    with cvdiag.agent_scope("a"), cvdiag.llm_call("openai", "m", heartbeat_s=0.01):
        cvdiag.emit("backend.agent.enter", {"agent_name": "a"})
    from cvdiag.write.config import get_settings
    assert not get_settings().enabled
    assert threading.active_count() == 1, threading.enumerate()
    assert logging.getLogger().handlers == handlers_before
    assert logging.getLogger("cvdiag").handlers == []
    assert not structlog.is_configured()
    assert cvdiag.stats()["emitted"] == 0
    print("INERT-OK")
    """
)


def test_import_with_nothing_set_is_inert():
    env = {k: v for k, v in os.environ.items() if not k.startswith("CVDIAG")}
    result = subprocess.run([sys.executable, "-c", PROBE], env=env, capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "INERT-OK"
    assert "CVDIAG" not in result.stdout + result.stderr


def test_enabled_server_writes_prefixed_lines_to_stdout():
    code = textwrap.dedent(
        """
        import cvdiag
        with cvdiag.request_context(test_id="sub-1"), cvdiag.agent_scope("a"):
            pass
        """
    )
    env = {**{k: v for k, v in os.environ.items() if not k.startswith("CVDIAG")}, "CVDIAG_ENABLED": "1"}
    result = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60)
    lines = result.stdout.splitlines()
    assert result.returncode == 0, result.stderr
    assert len(lines) == 2 and all(line.startswith('CVDIAG {"schema_version":1,"test_id":"sub-1"') for line in lines)


SILENT_PROBE = textwrap.dedent(
    """
    import cvdiag
    from starlette.applications import Starlette
    from starlette.responses import PlainTextResponse
    from starlette.routing import Route
    from starlette.testclient import TestClient
    cvdiag.configure()
    app = cvdiag.CvdiagMiddleware(Starlette(routes=[Route("/", lambda r: PlainTextResponse(""))]))
    with TestClient(app) as client:
        client.get("/", headers={"x-test-id": "t-1"})
    cvdiag.emit("backend.not.registered")
    cvdiag.flush()
    """
)


def test_disabled_prints_nothing_whatever_else_is_set():
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith("CVDIAG")},
        "CVDIAG_TIER": "bogus",
        "CVDIAG_DEBUG": "1",
        "CVDIAG_ENV": "production",
        "CVDIAG_QUEUE_SIZE": "lots",
        "CVDIAG_ENABLED": "0",
    }
    result = subprocess.run([sys.executable, "-c", SILENT_PROBE], env=env, capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    assert (result.stdout, result.stderr) == ("", "")


def test_import_loads_the_face_only():
    """``import cvdiag`` is cheap: its names are imported on first use, not before."""
    loaded = "sorted(m for m in sys.modules if m.startswith(('cvdiag', 'starlette', 'structlog')))"
    code = f"import sys, cvdiag; print(*{loaded})"
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert result.stdout.split() == ["cvdiag"], result.stderr
