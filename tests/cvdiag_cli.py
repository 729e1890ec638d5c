"""Run the installed ``cvdiag`` command as a user would: a subprocess on real files.

Every run sets ``CVDIAG_TRACEBACK=1`` and fails the test when the command exits 3 (an
internal error) unless the test expects that: a crash can never pass for "nothing found".
"""

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


INTERNAL_ERROR = 3


def _checked(code: int, output: str, *, internal_error: bool) -> int:
    if not internal_error:
        assert code != INTERNAL_ERROR, f"cvdiag crashed (exit 3):\n{output}"
    return code


@dataclass
class Result:
    code: int
    out: str
    err: str


def run(
    *args: str | os.PathLike,
    stdin: bytes | None = None,
    env: dict[str, str] | None = None,
    timeout: float = 120,
    cwd: str | os.PathLike | None = None,
    internal_error: bool = False,
    _bare: bool = False,
) -> Result:
    """Run ``cvdiag ARGS`` piped; ``internal_error``: the test expects exit 3."""
    full_env = {k: v for k, v in os.environ.items() if k != "NO_COLOR"}
    full_env.update({"CVDIAG_TRACEBACK": "1", **(env or {})})
    proc = subprocess.run(
        [*([] if _bare else command()), *map(str, args)],
        input=stdin if stdin is not None else b"",
        capture_output=True,
        env=full_env,
        cwd=cwd,
        timeout=timeout,
    )
    err = proc.stderr.decode("utf-8", "replace")
    code = _checked(proc.returncode, err, internal_error=internal_error)
    return Result(code, proc.stdout.decode("utf-8", "replace"), err)


def on_a_terminal(
    *args: str | os.PathLike, env: dict[str, str], cwd: str | os.PathLike | None = None
) -> tuple[int, bytes]:
    """Run ``cvdiag`` with a pseudo-terminal as stdout and stderr, as a user at a terminal
    sees it: (exit code, everything written, CRLF read back as LF)."""
    import pty

    main, child = pty.openpty()
    env = {**env, "CVDIAG_TRACEBACK": "1"}
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
    out = out.replace(b"\r\n", b"\n")
    return _checked(proc.returncode, out.decode("utf-8", "replace"), internal_error=False), out


_PEAK_WRAPPER = (
    "import resource, subprocess, sys\n"
    "code = subprocess.call(sys.argv[1:])\n"
    "sys.stderr.write('\\npeak-kb %d\\n' % resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)\n"
    "sys.exit(code)\n"
)


def run_peak(*args: str | os.PathLike, stdin: bytes | None = None, timeout: float = 120) -> tuple[Result, float]:
    """``run``, and the peak resident memory of the real ``cvdiag`` process in MB (its
    ``VmHWM``, from ``getrusage`` in a fresh parent that has no other child)."""
    r = run(sys.executable, "-c", _PEAK_WRAPPER, *command(), *args, stdin=stdin, timeout=timeout, _bare=True)
    err, _, peak = r.err.rstrip("\n").rpartition("\npeak-kb ")
    return Result(r.code, r.out, err), int(peak) / 1024


def run_in_process(argv: list[str]) -> tuple[int, str, str]:
    """``cvdiag ARGV`` through ``cli.main`` in this process (much faster than a
    subprocess, for property tests): (exit code, stdout, stderr)."""
    import contextlib
    import io

    from cvdiag.face import cli

    out = io.TextIOWrapper(io.BytesIO(), encoding="utf-8")
    err = io.TextIOWrapper(io.BytesIO(), encoding="utf-8")
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = cli.main(argv)
    out.flush()
    err.flush()
    return code, out.buffer.getvalue().decode(), err.buffer.getvalue().decode()  # type: ignore[attr-defined]
