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
    _every_suggested_command_works(out, tmp_path, env)


def _every_suggested_command_works(out: str, cwd, env) -> None:
    """What the demo tells a new user to try next must work as printed."""
    import shlex

    suggested = out.split("Next, try:", 1)[1].strip().splitlines()
    assert any(" report " in line for line in suggested) and any(" compare " in line for line in suggested)
    for line in suggested:
        words = shlex.split(line.split("|", 1)[0], comments=True)
        assert words[0] == "cvdiag", line
        result = subprocess.run(
            [sys.executable, "-m", "cvdiag", *words[1:]], capture_output=True, text=True, timeout=120, env=env, cwd=cwd
        )
        assert result.returncode == 0, (line, result.stdout, result.stderr)
        assert result.stdout.strip(), line
    page = (cwd / "cvdiag-demo-report.html").read_text()
    assert "<html" in page and "demo-hangup-" in page
