"""The metadata of backend.error.caught: type, scrubbed message, brief stack.

Spec section 3 bounds it: message at most 512 bytes, at most 8 frames of
{file, line} (innermost last) in 2,048 bytes, and says when anything was cut.
"""

from __future__ import annotations

import asyncio
import os
import sys
import traceback
from typing import Any

import orjson

from cvdiag.contract.scrubber import scrub
from cvdiag.write._caps import without_surrogates

#: What ends a request, a scope or an LLM exchange by cancellation rather than failure: a
#: task cancelled (client gone, timeout, shutdown) or a generator closed before its end.
CANCELLED = (asyncio.CancelledError, GeneratorExit)


def is_cancelled(error: BaseException | None) -> bool:
    """Cancellation on any event loop anyio supports: ``CANCELLED`` or trio's ``Cancelled``
    (looked up only where trio is already imported: cvdiag never imports it)."""
    if isinstance(error, CANCELLED):
        return True
    trio = sys.modules.get("trio")
    return trio is not None and isinstance(error, trio.Cancelled)


MESSAGE_MAX_BYTES = 512
STACK_MAX_FRAMES = 8
STACK_MAX_BYTES = 2048


def _cut_utf8(text: str, limit: int) -> tuple[str, bool]:
    try:
        raw = text.encode()
    except UnicodeEncodeError:  # lone surrogates, e.g. from a client's JSON
        text = without_surrogates(text)
        raw = text.encode()
    if len(raw) <= limit:
        return text, False
    return raw[: limit - 3].decode("utf-8", "ignore") + "...", True


def _short_path(filename: str, cwd: str) -> str:
    """Relative to the working directory when under it, else the base name: never a
    home directory or a site-packages path that says more than it needs to."""
    if filename.startswith(cwd + os.sep):
        return filename[len(cwd) + 1 :]
    return os.path.basename(filename)


def _cwd() -> str:
    """The working directory; a root no path is under when it was removed (a deploy)."""
    try:
        return os.getcwd()
    except OSError:
        return os.sep * 3


def _message(error: BaseException) -> str:
    """``str(error)``, or what went wrong when its ``__str__`` raised: the line is still written."""
    try:
        return str(error)
    except Exception as exc:
        return f"<str() raised {type(exc).__name__}>"


def stack_brief(error: BaseException) -> tuple[list[dict[str, Any]], bool]:
    frames = traceback.extract_tb(error.__traceback__)
    cut = len(frames) > STACK_MAX_FRAMES
    cwd = _cwd()
    brief = [{"file": _short_path(f.filename, cwd), "line": f.lineno} for f in frames[-STACK_MAX_FRAMES:]]
    while brief and len(orjson.dumps(brief)) > STACK_MAX_BYTES:
        brief.pop(0)  # keep the innermost frames, where it broke
        cut = True
    return brief, cut


def _named(error: BaseException) -> str:
    """The message; for an exception group (anyio's task groups: the ``mcp`` SDK, Starlette
    streaming), whose own says only how many it holds, its first real exception, by name."""
    leaf = error
    while isinstance(leaf, BaseExceptionGroup) and leaf.exceptions:
        leaf = leaf.exceptions[0]
    if leaf is error:
        return _message(error)
    text = _message(leaf)
    return f"{type(leaf).__name__}: {text}" if text else type(leaf).__name__


def error_metadata(error: BaseException) -> dict[str, Any]:
    message, message_cut = _cut_utf8(scrub(_named(error)), MESSAGE_MAX_BYTES)
    brief, stack_cut = stack_brief(error)
    return {
        "exception_type": type(error).__name__,
        "message_scrubbed": message,
        "stack_brief": brief,
        "truncated": message_cut or stack_cut,
    }
