"""Log content is shown, never obeyed: terminal escapes, BEL, CR and rich markup in a
log reach no terminal raw, piped or on a tty, with or without colour."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest
from cvdiag_cli import on_a_terminal, run
from logkit import compact, errored, happy, write
from pytestkit import INNER

pytest_plugins = ["pytester"]

TID = "0190a9c0-1a2b-7c3d-8e4f-5a6b7c8d9e77"
OTHER = "0190a9c0-1a2b-7c3d-8e4f-5a6b7c8d9e78"
#: A window-title OSC ended by BEL, a clear-screen CSI, a C1 CSI, CR and rich markup.
#: Then a bidi override, a line separator and a non-character (spoofing; invalid in XML).
SLUG = "evil\x1b]0;pwned\x07[bold red]x[/]\u202etxt.exe\u2028\ufffe"
DEMO = "d\x1b[2J\r\x9b31m"
MESSAGE = "boom \x1b[31mred\x1b[0m \x07 bell\roverwrite [link=http://x]click[/link] \x7f"
#: What rich itself writes on a terminal: SGR colours and nothing else.
RICH_SGR = re.compile(rb"\x1b\[[0-9;]*m")
#: C0 but \n, DEL, C1, bidi controls, line/paragraph separators and U+FFFE/U+FFFF, in UTF-8.
CONTROL = re.compile(
    rb"[\x00-\x09\x0b-\x1f\x7f]|\xc2[\x80-\x9f]|\xe2\x80[\x8e\x8f\xa8-\xae]|\xe2\x81[\xa6-\xa9]|\xef\xbf[\xbe\xbf]"
)


@pytest.fixture
def evil_log(tmp_path: Path) -> Path:
    events = [*errored(TID), *happy(OTHER, 5.0)]
    for env in events:
        env["slug"] = SLUG
        env["demo"] = DEMO
    events[1]["metadata"]["message_scrubbed"] = MESSAGE
    events[1]["metadata"]["exception_type"] = "Err\x1b[5m"
    lines = [f"CVDIAG {compact(e)}" for e in events]
    lines.append('CVDIAG {"schema_version":1,"test_id":"\x1b[31mcut')  # a malformed line: a note on stderr
    return write(tmp_path / "app\x1b[7m.log", lines)


#: The slug as a user sees it: every control character escaped, the markup as typed.
SLUG_SHOWN = "evil\\x1b]0;pwned\\x07[bold red]x[/]\\u202etxt.exe\\u2028\\ufffe"
#: Each command, its exit code, and texts a user sees in what it prints (stdout or stderr).
COMMANDS = [
    pytest.param(args, code, seen, id=" ".join(args))
    for args, code, seen in [
        (("tests",), 0, (TID, OTHER, SLUG_SHOWN, "server-error")),
        (("tests", "--no-class"), 0, (TID, OTHER, SLUG_SHOWN)),
        (("timeline", TID), 0, (f"test {TID}  slug {SLUG_SHOWN}", "backend.error.caught")),
        (("timeline", TID, "--with-logs"), 0, (f"test {TID}", "exception_type=Err\\x1b[5m")),
        (("diagnose", TID), 0, (f"test {TID}", "verdict: server-error")),
        (("diagnose", "--all"), 0, (TID, OTHER, "server-error")),
        (("stats",), 0, (SLUG_SHOWN, "backend.error.caught", "llm_latency_ms")),
        (("validate",), 1, (f"slug '{SLUG_SHOWN}", "checked 9 envelopes: 9 invalid, 1 malformed line")),
        (("compare", OTHER, TID), 0, (f"A {OTHER}  ok", f"B {TID}  server-error")),
        (("timeline", "0190a9c0-1a2b-7c3d-8e4f-5a6b7c8d9e7"), 1, (f"matches 2 test ids: {TID}, {OTHER}",)),
    ]
]


def _run(args: tuple[str, ...], path: Path, env: dict[str, str]) -> tuple[int, bytes, bytes]:
    full = {k: v for k, v in os.environ.items() if k != "NO_COLOR"}
    r = run(*args, path, env={**full, "COLUMNS": "200", **env})  # the slug whole, whatever runs the tests
    return r.code, r.out.encode(), r.err.encode()


def _on_a_terminal(args: tuple[str, ...], path: Path) -> tuple[int, bytes]:
    env = {k: v for k, v in os.environ.items() if k != "NO_COLOR"}
    env.update({"TERM": "xterm-256color", "COLUMNS": "200"})
    return on_a_terminal(*args, path, env=env)


def _assert_clean(data: bytes, what: str) -> None:
    found = CONTROL.search(data)
    assert found is None, f"{what}: raw control byte {found.group()!r} in {data!r}"


@pytest.mark.parametrize(("args", "code", "seen"), COMMANDS)
@pytest.mark.parametrize("env", [{}, {"NO_COLOR": "1"}, {"TERM": "dumb"}], ids=["pipe", "no-color", "dumb"])
def test_piped_output_holds_no_control_characters(
    evil_log: Path, args: tuple[str, ...], code: int, seen: tuple[str, ...], env: dict[str, str]
) -> None:
    exit_code, out, err = _run(args, evil_log, env)
    _assert_clean(out, "stdout")
    _assert_clean(err, "stderr")
    assert b"\x1b" not in out + err
    assert exit_code == code, err
    shown = (out + err).decode()
    assert all(text in shown for text in seen), shown


@pytest.mark.parametrize(("args", "code", "seen"), COMMANDS)
def test_a_terminal_gets_rich_colours_but_log_text_stays_text(
    evil_log: Path, args: tuple[str, ...], code: int, seen: tuple[str, ...]
) -> None:
    exit_code, out = _on_a_terminal(args, evil_log)
    _assert_clean(RICH_SGR.sub(b"", out), "terminal")
    assert exit_code == code, out
    shown = RICH_SGR.sub(b"", out).decode()
    assert all(text in shown for text in seen), shown


def test_what_a_user_sees_is_the_escaped_text(evil_log: Path) -> None:
    _, out, err = _run(("timeline", TID), evil_log, {})
    text = out.decode()
    assert "slug evil\\x1b]0;pwned\\x07[bold red]x[/]" in text  # markup shown as typed
    assert "exception_type=Err\\x1b[5m" in text
    _, _, err = _run(("tests",), evil_log, {})
    assert "app\\x1b[7m.log:10: cut or not JSON" in err.decode()  # the file name in the malformed-line note
    rich = _on_a_terminal(("timeline", TID), evil_log)[1].decode()
    assert "[bold red]x[/]" in rich and "[link=http://x]click[/link]" in RICH_SGR.sub(b"", rich.encode()).decode()


def test_the_pytest_failure_section_escapes_log_content(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        """
        import cvdiag

        def test_fails():
            with cvdiag.agent_scope("agent\\x1b]0;title\\x07[bold]x"):
                pass
            raise AssertionError("failed")
        """
    )
    result = pytester.runpytest(*INNER)
    result.assert_outcomes(failed=1)
    section = result.stdout.str().split(" cvdiag ", 1)[1]
    assert "agent_name=agent\\x1b]0;title\\x07[bold]x" in section
    assert "\x1b" not in section and "\x07" not in section


def test_junit_of_a_hostile_log_is_well_formed_xml(evil_log: Path) -> None:
    from xml.dom import minidom

    _, out, _ = _run(("tests", "--format", "junit"), evil_log, {})
    doc = minidom.parseString(out)  # raises on a character XML 1.0 cannot hold
    names = sorted(c.getAttribute("name") for c in doc.getElementsByTagName("testcase"))
    assert names == sorted([TID, OTHER])
    assert "\\u202e" in doc.getElementsByTagName("testcase")[0].getAttribute("classname")
