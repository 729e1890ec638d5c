"""The README's first command: ``cvdiag demo`` runs offline and explains each scenario."""

from __future__ import annotations

import os
import subprocess
import sys


def test_demo_runs_the_scenarios_and_names_their_classes(tmp_path):
    log = tmp_path / "backend.log"
    env = {k: v for k, v in os.environ.items() if not k.startswith("CVDIAG")}
    env["NO_COLOR"] = "1"
    result = subprocess.run(
        [sys.executable, "-m", "cvdiag", "demo", "--log", str(log)],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
    )
    assert result.returncode == 0, result.stderr
    out = result.stdout
    rows = {line.split()[0].rsplit("-", 1)[0]: line for line in out.splitlines() if line.startswith("demo-")}
    assert rows["demo-happy"].split()[-1] == "ok"
    assert rows["demo-hangup"].split()[-1] == "client-disconnect"
    assert rows["demo-error"].split()[-1] == "server-error"
    assert rows["demo-slow"].split()[-1] == "llm-slow"
    assert "verdict: client-disconnect" in out and "termination_kind=rst" in out
    assert "\x1b[" not in out  # piped output has no escape codes
    text = log.read_text()
    assert "CVDIAG {" in text and "Uvicorn running" in text  # a real, mixed server log
