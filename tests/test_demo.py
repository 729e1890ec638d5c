"""The README's first command: ``cvdiag demo`` runs offline and explains each scenario."""

from __future__ import annotations

import os
import subprocess
import sys


def test_demo_runs_the_scenarios_and_names_their_classes(tmp_path):
    log = tmp_path / "backend.log"
    env = {k: v for k, v in os.environ.items() if not k.startswith("CVDIAG")}
    env["NO_COLOR"] = "1"
    env["CVDIAG_TRACEBACK"] = "1"  # a crash shows itself (exit 3 and its traceback)
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


#: What each command the demo suggests shows (its first word after ``cvdiag``).
_SHOWS = {
    "diagnose": "client-disconnect",
    "report": "wrote cvdiag-demo-report.html: 4 tests, 2 failed, 3 with a waterfall",
    "compare": "A demo-happy-",
    "timeline": "verdict: server-error",
    "grep": '"boundary":"backend.llm.',
    "stats": "backend.request.ingress",
    "validate": " 0 invalid, 0 malformed lines",
}


def _every_suggested_command_works(out: str, cwd, env) -> None:
    """What the demo tells a new user to try next must work as printed."""
    import shlex

    suggested = out.split("Next, try:", 1)[1].strip().splitlines()
    assert sorted(shlex.split(line)[1] for line in suggested) == sorted(_SHOWS)
    for line in suggested:
        words = shlex.split(line.split("|", 1)[0], comments=True)
        assert words[0] == "cvdiag", line
        result = subprocess.run(
            [sys.executable, "-m", "cvdiag", *words[1:]], capture_output=True, text=True, timeout=120, env=env, cwd=cwd
        )
        assert result.returncode == 0, (line, result.stdout, result.stderr)
        assert _SHOWS[words[1]] in result.stdout, (line, result.stdout)
    page = (cwd / "cvdiag-demo-report.html").read_text()
    assert "<html" in page and "demo-hangup-" in page
