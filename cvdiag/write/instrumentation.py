"""``cvdiag.instrument()``: every supported HTTP client, one call.

httpx and httpx2 through ``instrument_httpx`` (unchanged; whatever it installs comes
along), aiohttp through ``_aiohttp_capture``, urllib3 (and so ``requests`` and botocore,
whose only transport it is) through ``_urllib3_capture``, with Bedrock Runtime calls
read by ``_bedrock``. Each client can be left out, by keyword or by the environment
(``CVDIAG_INSTRUMENT_OFF=aiohttp,botocore``). Every seam is a ``hooks.Hook`` in
``HOOKS``, with the versions it supports: a library that is not imported yet is not
imported here (the hooks' finder installs it right after its first import), and one
outside its range is left alone. Nothing here starts a thread; nothing is written while
cvdiag is disabled (propagation still works, as with httpx).
"""

from __future__ import annotations

import importlib
import importlib.util
import os
import sys
import threading
from collections.abc import Callable

from cvdiag.write import hooks
from cvdiag.write.hooks import Hook
from cvdiag.write.propagation import instrument_httpx, uninstrument_httpx

__all__ = ["CLIENTS", "HOOKS", "instrument", "uninstrument"]

#: What ``instrument`` can instrument (``requests`` is urllib3: it sends through it;
#: ``http.client`` is the standard library's, under ``urllib.request`` too).
CLIENTS: tuple[str, ...] = ("httpx", "aiohttp", "urllib3", "botocore", "http.client")
_OFF_ENV = "CVDIAG_INSTRUMENT_OFF"
_LLM_SWITCH = "CVDIAG_LLM_CAPTURE"
_FALSE = frozenset({"0", "false", "no", "off"})
_lock = threading.RLock()


class _Asked:
    """What the latest ``instrument()`` asked for: each hook's install reads it when it
    runs, which may be at a later import."""

    __slots__ = ("bedrock", "heartbeat_s", "llm")

    def __init__(self) -> None:
        self.llm = True
        self.bedrock = True
        self.heartbeat_s: float | None = None


_asked = _Asked()


def _capture(name: str) -> object | None:
    """A capture module, only if something imported it (else nothing was installed)."""
    return sys.modules.get(f"cvdiag.write.{name}")


def _uninstall_of(capture: str) -> Callable[[], None]:
    """The undo of a capture module's hook: its ``uninstall``, if it was ever imported."""

    def uninstall() -> None:
        module = _capture(capture)
        if module is not None:
            module.uninstall()  # type: ignore[attr-defined]

    return uninstall


def _install_httpx() -> None:
    instrument_httpx(llm=_asked.llm, heartbeat_s=_asked.heartbeat_s)


def _install_aiohttp() -> None:
    from cvdiag.write import _aiohttp_capture

    _aiohttp_capture.install(llm=_asked.llm)


def _install_urllib3() -> None:
    from cvdiag.write import _urllib3_capture

    _urllib3_capture.install(llm=_asked.llm, bedrock=_asked.bedrock)


def _install_http_client() -> None:
    from cvdiag.write import _httpclient_capture

    _httpclient_capture.install(llm=_asked.llm)


def _nothing() -> None:
    """botocore has no hook of its own: its requests go through urllib3's, which reads
    Bedrock's routes only while botocore's version is supported."""


def _install_otel() -> None:
    from cvdiag.write import _otel_spans

    _otel_spans.attach()


def _install_agents() -> None:
    from cvdiag.write import _span_evidence

    _span_evidence.register_agents_tap()


def _stop_reading_spans() -> None:
    """A processor cannot be taken back out of a provider: it stays and passes through."""
    evidence = _capture("_span_evidence")
    if evidence is not None:
        evidence.switch.on = False  # type: ignore[attr-defined]


#: Every library seam ``instrument()`` hooks, with the versions it supports (as
#: OpenTelemetry's instrumentors declare them). The MCP session hook is
#: ``_mcp_capture.SESSION_HOOK`` (installed with LLM capture, by ``instrument_httpx``).
HOOKS: dict[str, Hook] = {
    hook.name: hook
    for hook in (
        Hook("httpx", "httpx", _install_httpx, uninstrument_httpx, "httpx", ">=0.23,<1"),
        Hook("aiohttp", "aiohttp", _install_aiohttp, _uninstall_of("_aiohttp_capture"), "aiohttp", ">=3.8,<4"),
        Hook("urllib3", "urllib3", _install_urllib3, _uninstall_of("_urllib3_capture"), "urllib3", ">=2.2,<3"),
        Hook("botocore", "botocore", _nothing, _nothing, "botocore", ">=1.31,<2"),
        Hook("http.client", "http.client", _install_http_client, _uninstall_of("_httpclient_capture")),
        Hook("otel", "opentelemetry.trace", _install_otel, _stop_reading_spans, "opentelemetry-sdk", ">=1.20,<2"),
        Hook("openai-agents", "agents", _install_agents, _stop_reading_spans, "openai-agents", ">=0.1,<1"),
    )
}


def _switches(overrides: dict[str, bool | None]) -> dict[str, bool]:
    off = {name.strip().lower() for name in (os.environ.get(_OFF_ENV) or "").split(",") if name.strip()}
    if "requests" in off:
        off.add("urllib3")
    if "urllib" in off:
        off.add("http.client")
    return {name: (name not in off) if overrides.get(name) is None else bool(overrides[name]) for name in CLIENTS}


def instrument(
    *,
    httpx: bool | None = None,
    aiohttp: bool | None = None,
    urllib3: bool | None = None,
    requests: bool | None = None,
    botocore: bool | None = None,
    llm: bool | None = None,
    heartbeat_s: float | None = None,
    http_client: bool | None = None,
    otel: bool | None = None,
) -> dict[str, str]:
    """Instrument every supported HTTP client that is installed: the allow-listed headers
    (the test id first) go out on every request, and LLM calls write backend.llm.call.*.

    Each keyword turns one client off (``False``) or forces it on; by default a client
    is on unless ``CVDIAG_INSTRUMENT_OFF`` names it. ``requests`` is another name for
    ``urllib3``; ``botocore=False`` keeps urllib3 but stops reading Bedrock calls
    (botocore sends through urllib3, so ``urllib3=False`` leaves botocore out too).
    ``llm`` and ``heartbeat_s`` are as for ``instrument_httpx``. ``http_client``: the
    standard library's client (``urllib.request``; ``urllib`` in the environment's list).
    Idempotent and undone by
    ``uninstrument()``. Returns each client's state: ``on``, ``pending`` (patched when
    first imported), ``off``, ``missing`` (not installed), ``unsupported version``
    (installed outside the range its hook declares in ``HOOKS``: left alone;
    ``cvdiag.write.hooks.refused`` has the version found and the range) or ``failed`` (a
    version whose internals moved; counted in ``cvdiag.stats()["internal_errors"]``).

    ``otel`` (on unless ``CVDIAG_INSTRUMENT_OFF`` names ``otel``): the spans frameworks
    finish inside a request become envelopes (``cvdiag.write._otel_spans``), once the app
    imports OpenTelemetry and where its SDK is installed; its state is ``otel``'s, and the
    OpenAI Agents SDK's tracing processor's is ``openai-agents``'s. False leaves spans
    alone (what an earlier call attached stays until ``uninstrument()``).
    """
    if llm is None:
        llm = (os.environ.get(_LLM_SWITCH) or "").strip().lower() not in _FALSE
    if requests is not None and urllib3 is None:
        urllib3 = requests
    switches = _switches(
        {"httpx": httpx, "aiohttp": aiohttp, "urllib3": urllib3, "botocore": botocore, "http.client": http_client}
    )
    if otel is None:
        otel = "otel" not in (os.environ.get(_OFF_ENV) or "").lower().replace(" ", "").split(",")
    states: dict[str, str] = {}
    with _lock:
        _asked.llm, _asked.heartbeat_s = llm, heartbeat_s
        botocore_state = _botocore(switches["botocore"] and switches["urllib3"])
        _asked.bedrock = switches["botocore"] and botocore_state != hooks.UNSUPPORTED
        states["httpx"] = _httpx(switches["httpx"])
        if heartbeat_s is not None and llm:
            from cvdiag.write import _llm_capture

            _llm_capture.set_heartbeat_s(heartbeat_s)
        for name in ("aiohttp", "urllib3", "http.client"):
            states[name] = hooks.enable(HOOKS[name]) if switches[name] else _off(HOOKS[name])
        states["botocore"] = states["urllib3"] if botocore_state is None else botocore_state
        states["otel"], states["openai-agents"] = _otel(otel)
    return states


def _httpx(on: bool) -> str:
    """httpx and httpx2 are patched now, as ``instrument_httpx`` always did (the SDKs
    import them anyway); httpx2 alone has no httpx version to check."""
    if not on:
        return _off(HOOKS["httpx"])
    if importlib.util.find_spec("httpx") is None:
        if importlib.util.find_spec("httpx2") is None:
            return hooks.MISSING
        _install_httpx()
        return hooks.ON
    importlib.import_module("httpx")
    return hooks.enable(HOOKS["httpx"])


def _botocore(on: bool) -> str | None:
    """botocore's own state where it is not urllib3's (its calls are read in urllib3's
    hook): missing, off, or an unsupported version; None when it follows urllib3."""
    refusal = hooks.check(HOOKS["botocore"])
    if refusal == hooks.MISSING:
        return refusal
    if not on:
        return "off"
    return refusal


def _off(hook: Hook) -> str:
    hooks.disable(hook)
    return "off"


def _otel(on: bool) -> tuple[str, str]:
    """Spans in the process: cvdiag's span processor on the app's provider once it imports
    OpenTelemetry, and its tracing processor in the OpenAI Agents SDK once imported."""
    if not on:  # not read from here on; an earlier instrument() keeps it until uninstrument()
        return "off", "off"
    from cvdiag.write import _span_evidence

    _span_evidence.switch.on = True
    agents = hooks.enable(HOOKS["openai-agents"])
    if importlib.util.find_spec("opentelemetry.sdk") is None:
        return hooks.MISSING, agents
    return hooks.enable(HOOKS["otel"]), agents


def uninstrument() -> None:
    """Undo ``instrument()``: every client back as it was, no import waited for."""
    with _lock:
        for hook in HOOKS.values():
            hooks.disable(hook)
