"""The hook toolkit (``cvdiag.write.hooks``): declared version ranges, one finder, one patch."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st

from cvdiag.write import hooks
from cvdiag.write.hooks import Hook, Patch, in_range
from cvdiag.write.instrumentation import HOOKS

ROOT = Path(__file__).resolve().parents[1]


def _python(code: str) -> str:
    """Run ``code`` in a fresh interpreter (nothing imported, nothing patched yet)."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout.strip()


def test_every_hook_declares_the_versions_it_supports_and_todays_are_in_them() -> None:
    for hook in HOOKS.values():
        assert (hook.distribution is None) == (hook.name == "http.client"), hook
        if hook.distribution is None:
            continue
        assert hook.supported.startswith(">="), hook
        found = hooks.version_of(hook.distribution)
        if found is not None:
            assert in_range(found, hook.supported), (hook.name, found, hook.supported)


def test_a_version_outside_the_declared_range_is_reported_and_nothing_is_patched() -> None:
    out = _python(
        """
import dataclasses, aiohttp
from aiohttp import ClientSession
import cvdiag
from cvdiag.write import hooks, instrumentation
bare = ClientSession._request
instrumentation.HOOKS["aiohttp"] = dataclasses.replace(instrumentation.HOOKS["aiohttp"], supported=">=1,<2")
states = cvdiag.instrument()
print(states["aiohttp"], hooks.refused["aiohttp"] == (aiohttp.__version__, ">=1,<2"),
      ClientSession._request is bare)
"""
    )
    assert out == "unsupported version True True"


def test_an_unsupported_botocore_leaves_urllib3_on_and_bedrock_unread() -> None:
    out = _python(
        """
import dataclasses
import cvdiag
from cvdiag.write import instrumentation, _urllib3_capture
instrumentation.HOOKS["botocore"] = dataclasses.replace(instrumentation.HOOKS["botocore"], supported="<1")
states = cvdiag.instrument()
print(states["botocore"], states["urllib3"], _urllib3_capture.reading.bedrock)
"""
    )
    assert out == "unsupported version on False"


def test_a_library_imported_later_is_hooked_by_the_one_finder_and_the_finder_leaves() -> None:
    out = _python(
        """
import sys, cvdiag
from cvdiag.write import hooks
states = cvdiag.instrument()
finders = [f for f in sys.meta_path if f is hooks.after_import]
from aiohttp import ClientSession
wrapped = ClientSession._request.__code__.co_filename.endswith("_aiohttp_capture.py")
cvdiag.uninstrument()
print(states["aiohttp"], len(finders), wrapped, hooks.after_import in sys.meta_path,
      ClientSession._request.__code__.co_filename.endswith("_aiohttp_capture.py"))
"""
    )
    assert out == "pending 1 True False False"


class _Library:
    def send(self) -> str:
        return "sent"


def test_a_patch_is_put_in_once_and_taken_out_only_while_it_is_ours() -> None:
    bare = _Library.__dict__["send"]
    patch = Patch(_Library, "send", around=lambda original: lambda self: "ours:" + original(self))
    assert patch.install() is True and patch.install() is False
    assert _Library().send() == "ours:sent"
    patch.uninstall()
    assert _Library.__dict__["send"] is bare
    patch.install()
    ours = _Library.__dict__["send"]
    _Library.send = lambda self: "theirs:" + ours(self)  # someone wraps ours
    theirs = _Library.__dict__["send"]
    patch.uninstall()
    assert _Library.__dict__["send"] is theirs  # theirs stays
    _Library.send = bare


def test_a_hook_whose_library_moved_its_internals_fails_and_is_counted() -> None:
    from cvdiag.write.emitter import stats

    before = stats()["internal_errors"]
    moved = Hook("moved", "json", Patch(_Library, "gone", lambda self: None).install, lambda: None)
    assert hooks.enable(moved) == "failed"
    assert stats()["internal_errors"] == before + 1


def test_a_library_that_is_not_installed_is_missing_and_not_waited_for() -> None:
    absent = Hook("absent", "no_such_library_cvdiag", lambda: None, lambda: None, "no-such-library-cvdiag", ">=1")
    assert hooks.enable(absent) == "missing" and "no_such_library_cvdiag" not in hooks.after_import.waiting


releases = st.lists(st.integers(min_value=0, max_value=30), min_size=1, max_size=4)


@given(releases, releases)
def test_a_range_compares_releases_as_numbers_padded_with_zeros(version: list[int], bound: list[int]) -> None:
    width = max(len(version), len(bound))
    have, want = version + [0] * (width - len(version)), bound + [0] * (width - len(bound))
    text, limit = ".".join(map(str, version)), ".".join(map(str, bound))
    assert in_range(text, f">={limit}") == (have >= want)
    assert in_range(text, f"<{limit}") == (have < want)
    assert in_range(text + "rc1", f"=={limit}") == (have == want)
    assert in_range(text, f">={limit},<{limit}") is False


def test_the_urllib3_range_starts_where_the_watched_response_fits_urllib3() -> None:
    """The watched ``HTTPResponse`` calls ``_raw_read(amt, read1=)``: urllib3 2.0 and 2.1
    take no ``read1`` (the app's ``read()`` would get a TypeError) and 1.26 reads its body
    elsewhere (a call was started twice), so the range begins at 2.2 (measured on 2.1.0,
    1.26.20 and 2.2.0 with a real server: docs/propagation.md)."""
    import inspect

    from urllib3.response import HTTPResponse

    from cvdiag.write import _urllib3_capture

    supported = HOOKS["urllib3"].supported
    assert [in_range(v, supported) for v in ("1.26.20", "2.0.7", "2.1.0", "2.2.0", "2.8.0")] == [
        False,
        False,
        False,
        True,
        True,
    ]
    watched = _urllib3_capture._Watched
    for name in ("_raw_read", "_handle_chunk", "_update_chunk_length", "close"):
        assert name in watched.__dict__ and callable(getattr(HTTPResponse, name, None)), name
    assert "read1" in inspect.signature(HTTPResponse._raw_read).parameters


def test_a_refused_hook_leaves_the_hooks_beside_it_in_place() -> None:
    """A hook refused (not installed, or outside its range) undoes nothing: the MCP
    session (imported already) stays wrapped when the stdio spawn is refused, and the
    Agents SDK's spans are still read when OpenTelemetry's provider is refused (each pair
    shares its undo)."""
    out = _python(
        """
import dataclasses
from cvdiag.write import _mcp_capture, _span_evidence, instrumentation
_mcp_capture.STDIO_HOOK = dataclasses.replace(_mcp_capture.STDIO_HOOK, supported="<1")
instrumentation.HOOKS["otel"] = dataclasses.replace(instrumentation.HOOKS["otel"], supported="<1")
from mcp import ClientSession
import mcp.client.stdio as stdio
import cvdiag
states = cvdiag.instrument()
print(states["otel"], states["openai-agents"], _span_evidence.switch.on)
print(ClientSession.call_tool.__code__.co_filename.endswith("_mcp_capture.py"))
print(stdio._create_platform_compatible_process.__code__.co_filename.endswith("_mcp_capture.py"))
"""
    )
    assert out.splitlines() == ["unsupported version pending True", "True", "False"]


def test_the_stdio_spawn_is_hooked_only_where_the_sdk_has_it() -> None:
    """``_create_platform_compatible_process`` came with mcp 1.6 (1.2 to 1.5 spawn inline):
    there the session is wrapped and the spawn refused, not a failure counted."""
    import mcp.client.stdio

    from cvdiag.write._mcp_capture import SESSION_HOOK, STDIO_HOOK

    assert [in_range(v, STDIO_HOOK.supported) for v in ("1.5.0", "1.6.0")] == [False, True]
    assert [in_range(v, SESSION_HOOK.supported) for v in ("1.2.0", "1.5.0")] == [True, True]
    assert callable(mcp.client.stdio._create_platform_compatible_process)
