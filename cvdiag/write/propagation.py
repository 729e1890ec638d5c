"""Outbound propagation: the test id travels from a request to the LLM calls it makes.

Two ways in. ``httpx_hooks()`` gives an ``event_hooks`` dict for one client the
application builds itself. ``instrument_httpx()`` wraps ``send`` on the ``Client`` and
``AsyncClient`` classes of both ``httpx`` and ``httpx2``, which is what makes the
``openai`` and ``anthropic`` SDKs (and Starlette's TestClient) carry the id with no code
change.

Why ``send`` at class level rather than injecting event hooks into ``__init__``: every
request of every client goes through ``send`` (``request``, ``stream``, the top-level
``httpx.get``), subclasses such as the SDKs' client wrappers inherit it, and a client
that was built at import time, before instrumentation, is covered too. Hooks added in
``__init__`` would miss exactly those module-level clients. ``send`` is public API in
both libraries, so this does not depend on private methods.

Only spec section 6's allow-list is ever added, only from the bound context, and never
over a header the caller set. Nothing here imports the emitter: propagation costs a
contextvar read per request and works whether or not emission is enabled.

The same wrapper recognises LLM calls (``llm_capture``, imported only when that is on:
``instrument_httpx(llm=False)`` or ``CVDIAG_LLM_CAPTURE=0`` leave it out).
"""

from __future__ import annotations

import contextvars
import functools
import importlib
import os
import sys
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any, ParamSpec, TypeVar

from cvdiag.contract.schema import OUTBOUND_ALLOW_LIST, SLUG_HEADER, TEST_ID_HEADER
from cvdiag.contract.trace_context import TRACEPARENT_HEADER
from cvdiag.write.config import get_settings
from cvdiag.write.context import RequestContext, current_context
from cvdiag.write.hooks import Patch

__all__ = [
    "httpx_hooks",
    "instrument_httpx",
    "is_instrumented",
    "outbound_headers",
    "uninstrument_httpx",
    "wrap",
]

P = ParamSpec("P")
R = TypeVar("R")

#: The client libraries whose classes ``instrument_httpx`` wraps, when installed.
_LIBRARIES: tuple[str, ...] = ("httpx", "httpx2")
_CLIENT_CLASSES: tuple[str, ...] = ("Client", "AsyncClient")
#: Headers taken from ``RequestContext.forward``; the id and slug come from the context itself.
#: ``traceparent`` only ever comes from a context made with one (the pytest plugin's test
#: trace): the middleware never puts an inbound one in ``forward``.
_FORWARDED: tuple[str, ...] = (
    *(h for h in OUTBOUND_ALLOW_LIST if h not in (TEST_ID_HEADER, SLUG_HEADER)),
    TRACEPARENT_HEADER,
)
_UNKNOWN_SLUG = "unknown"

_LLM_SWITCH = "CVDIAG_LLM_CAPTURE"
_OFF = frozenset({"0", "false", "no", "off"})


class _Instrumented:
    """What ``instrument_httpx`` installed; ``uninstrument_httpx`` is its reset."""

    __slots__ = ("llm_capture", "patches")

    def __init__(self) -> None:
        #: The ``send`` of every client class wrapped, in install order.
        self.patches: list[Patch] = []
        #: The ``_llm_capture`` module while LLM call recognition is on, else None.
        self.llm_capture: Any = None


_instrumented = _Instrumented()


def outbound_headers(ctx: RequestContext | None = None) -> dict[str, str]:
    """The allow-listed headers the current (or given) context sends on: id, slug, forwards."""
    ctx = ctx if ctx is not None else current_context()
    if ctx is None:
        return {}
    headers = {TEST_ID_HEADER: ctx.test_id}
    if ctx.slug and ctx.slug != _UNKNOWN_SLUG:
        headers[SLUG_HEADER] = ctx.slug
    forward = ctx.forward or {}
    for name in _FORWARDED:
        value = forward.get(name)
        if value is not None:
            headers[name] = value
    return headers


def _add_headers(request: Any) -> None:
    ctx = current_context()
    if ctx is None:
        return
    try:
        target: MutableMapping[str, str] = request.headers
        for name, value in outbound_headers(ctx).items():
            # httpx Headers lookups are case-insensitive: a caller's X-Test-Id wins.
            if name not in target:
                target[name] = value
    except Exception:
        # The headers are a courtesy to the test harness; they must never break the
        # application's own call. The test suite's strict mode wants to hear about it.
        if get_settings().strict:
            raise


def _request_hook(request: Any) -> None:
    _add_headers(request)


async def _async_request_hook(request: Any) -> None:
    _add_headers(request)


def httpx_hooks(asynchronous: bool = False) -> dict[str, list[Callable[[Any], Any]]]:
    """``event_hooks`` for one httpx/httpx2 client: ``Client(event_hooks=httpx_hooks())``.

    Pass ``asynchronous=True`` for an ``AsyncClient``, whose hooks must be coroutines.
    """
    return {"request": [_async_request_hook if asynchronous else _request_hook]}


def _wrap_sync_send(original: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(original)
    def send(self: Any, request: Any, *args: Any, **kwargs: Any) -> Any:
        if _instrumented.patches:
            _add_headers(request)
            capture = _instrumented.llm_capture
            if capture is not None and not args:
                exchange = capture.begin(request, _library(self))
                if exchange is not None:
                    return capture.send_sync(exchange, original, self, request, kwargs)
        return original(self, request, *args, **kwargs)

    return send


def _wrap_async_send(original: Callable[..., Awaitable[Any]]) -> Callable[..., Awaitable[Any]]:
    @functools.wraps(original)
    async def send(self: Any, request: Any, *args: Any, **kwargs: Any) -> Any:
        if _instrumented.patches:
            _add_headers(request)
            capture = _instrumented.llm_capture
            if capture is not None and not args:
                exchange = capture.begin(request, _library(self))
                if exchange is not None:
                    return await capture.send_async(exchange, original, self, request, kwargs)
        return await original(self, request, *args, **kwargs)

    return send


@functools.cache
def _library_of(client_type: type) -> str:
    """``httpx`` or ``httpx2``: the library a client class (or an SDK's subclass of one) is from."""
    for klass in client_type.__mro__:
        library = klass.__module__.split(".", 1)[0]
        if library in _LIBRARIES:
            return library
    return "httpx"


def _library(client: Any) -> str:
    return _library_of(type(client))


def _client_classes() -> list[type]:
    classes = []
    for name in _LIBRARIES:
        try:
            module = importlib.import_module(name)
        except ImportError:
            continue
        classes.extend(getattr(module, cls) for cls in _CLIENT_CLASSES if hasattr(module, cls))
    return classes


def is_instrumented() -> bool:
    """True between ``instrument_httpx()`` and ``uninstrument_httpx()``."""
    return bool(_instrumented.patches)


def instrument_httpx(*, llm: bool | None = None, heartbeat_s: float | None = None) -> bool:
    """Make every httpx and httpx2 client, existing or future, send the allow-listed headers
    and report the LLM calls it makes (backend.llm.call.*, see docs/propagation.md), the tool
    calls those carry and MCP tool calls, over HTTP and through the ``mcp`` SDK's
    ``ClientSession`` (backend.tool.call.*).

    ``llm=False`` keeps propagation only; by default LLM recognition is on unless the
    environment says ``CVDIAG_LLM_CAPTURE=0``. ``heartbeat_s`` sets the interval of the
    heartbeats of a recognised call (default 10 s). Idempotent for propagation; returns
    True when this call installed it, False when it already was (the LLM switch and
    interval given are applied either way). Libraries that are not installed are skipped.
    """
    if llm is None:
        llm = (os.environ.get(_LLM_SWITCH) or "").strip().lower() not in _OFF
    if llm:
        from cvdiag.write import _llm_capture as llm_capture  # the emit side, only when asked for

        _instrumented.llm_capture = llm_capture
        if heartbeat_s is not None:
            llm_capture.set_heartbeat_s(heartbeat_s)
        llm_capture._mcp_capture.install_session()  # MCP tool calls of the mcp SDK's sessions (stdio)
    else:
        _instrumented.llm_capture = None
        _uninstall_mcp_session()
    if _instrumented.patches:
        return False
    for client_class in dict.fromkeys(_client_classes()):  # a class both libraries export: once
        wrap = _wrap_async_send if client_class.__name__ == "AsyncClient" else _wrap_sync_send
        patch = Patch(client_class, "send", around=wrap)
        patch.install()
        _instrumented.patches.append(patch)
    return True


def _uninstall_mcp_session() -> None:
    mcp_capture = sys.modules.get("cvdiag.write._mcp_capture")
    if mcp_capture is not None:  # not imported: never installed
        mcp_capture.uninstall_session()


def uninstrument_httpx() -> None:
    """Undo ``instrument_httpx()``: restore the original ``send`` methods.

    A class whose ``send`` was wrapped again by someone else after us keeps that outer
    wrapper (removing it would undo their instrumentation); our inner wrapper then
    passes requests through untouched because it checks that propagation is installed.
    """
    _instrumented.llm_capture = None
    _uninstall_mcp_session()
    while _instrumented.patches:
        _instrumented.patches.pop().uninstall()


def wrap(fn: Callable[P, R]) -> Callable[P, R]:
    """``fn`` bound to the context current now, for threads and executors.

    ``executor.submit(cvdiag.wrap(work), item)`` runs ``work`` with the request's test
    id even though executor threads start with an empty context. Each call runs in its
    own copy of the captured context, so the wrapper may be called concurrently (one
    ``Context`` object cannot be entered by two threads at once) and changes made by one
    call never leak into another.
    """
    captured = contextvars.copy_context()

    @functools.wraps(fn)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
        return captured.copy().run(fn, *args, **kwargs)

    return wrapper
