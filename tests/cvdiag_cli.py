"""Run the installed ``cvdiag`` command as a user would: a subprocess on real files."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path


def command() -> list[str]:
    """The console script next to this interpreter, else ``python -m cvdiag``."""
    script = Path(sys.executable).with_name("cvdiag")
    if script.exists():
        return [str(script)]
    found = shutil.which("cvdiag")
    return [found] if found else [sys.executable, "-m", "cvdiag"]


@dataclass
class Result:
    code: int
    out: str
    err: str


def run(
    *args: str | os.PathLike, stdin: bytes | None = None, env: dict[str, str] | None = None, timeout: float = 120
) -> Result:
    full_env = {k: v for k, v in os.environ.items() if k not in ("NO_COLOR", "CVDIAG_TRACEBACK")}
    full_env.update(env or {})
    proc = subprocess.run(
        [*command(), *map(str, args)],
        input=stdin if stdin is not None else b"",
        capture_output=True,
        env=full_env,
        timeout=timeout,
    )
    return Result(proc.returncode, proc.stdout.decode("utf-8", "replace"), proc.stderr.decode("utf-8", "replace"))


def on_a_terminal(
    *args: str | os.PathLike, env: dict[str, str], cwd: str | os.PathLike | None = None
) -> tuple[int, bytes]:
    """Run ``cvdiag`` with a pseudo-terminal as stdout and stderr, as a user at a terminal
    sees it: (exit code, everything written, CRLF read back as LF)."""
    import pty

    main, child = pty.openpty()
    proc = subprocess.run([*command(), *map(str, args)], stdout=child, stderr=child, env=env, cwd=cwd, timeout=60)
    os.close(child)
    out = b""
    while True:
        try:
            chunk = os.read(main, 65536)
        except OSError:  # the child side is closed and drained
            break
        if not chunk:
            break
        out += chunk
    os.close(main)
    return proc.returncode, out.replace(b"\r\n", b"\n")
