"""``cvdiag.instrument()``: every supported HTTP client, one call.

httpx and httpx2 through ``instrument_httpx`` (unchanged; whatever it installs comes
along), aiohttp through ``_aiohttp_capture``, urllib3 (and so ``requests`` and botocore,
whose only transport it is) through ``_urllib3_capture``, with Bedrock Runtime calls
read by ``_bedrock``. Each client can be left out, by keyword or by the environment
(``CVDIAG_INSTRUMENT_OFF=aiohttp,botocore``). A library that is not imported yet is not
imported here: a finder on ``sys.meta_path`` patches it right after its first import,
as Sentry's and OpenTelemetry's integrations do. Nothing here starts a thread; nothing
is written while cvdiag is disabled (propagation still works, as with httpx).
"""

from __future__ import annotations

import importlib.util
import os
import sys
import threading
from collections.abc import Callable
from importlib.machinery import ModuleSpec
from typing import Any

from cvdiag.write.propagation import instrument_httpx, uninstrument_httpx

__all__ = ["CLIENTS", "instrument", "uninstrument"]

#: What ``instrument`` can instrument (``requests`` is urllib3: it sends through it;
#: ``http.client`` is the standard library's, under ``urllib.request`` too).
CLIENTS: tuple[str, ...] = ("httpx", "aiohttp", "urllib3", "botocore", "http.client")
_OFF_ENV = "CVDIAG_INSTRUMENT_OFF"
_LLM_SWITCH = "CVDIAG_LLM_CAPTURE"
_FALSE = frozenset({"0", "false", "no", "off"})
_lock = threading.RLock()


class _AfterImport:
    """A ``sys.meta_path`` finder that runs a callback once a watched module has loaded.

    It finds nothing itself: it asks the finders after it for the module's spec and
    wraps that loader's ``exec_module`` (on the loader instance, which is the module's
    own) so the callback runs right after the module's code. The loader keeps its type.
    """

    def __init__(self) -> None:
        self.waiting: dict[str, Callable[[], None]] = {}

    def find_spec(self, fullname: str, path: Any = None, target: Any = None) -> ModuleSpec | None:
        callback = self.waiting.get(fullname)
        if callback is None:
            return None
        for finder in sys.meta_path:
            if finder is self or not hasattr(finder, "find_spec"):
                continue
            spec = finder.find_spec(fullname, path, target)
            if spec is None:
                continue
            loader = spec.loader
            execute = getattr(loader, "exec_module", None)
            if execute is not None:
                loader.exec_module = _then(execute, fullname, self)  # type: ignore[union-attr]
            return spec
        return None

    def ready(self, fullname: str) -> None:
        callback = self.waiting.pop(fullname, None)
        if callback is not None:
            try:
                callback()
            except Exception:
                from cvdiag.write.emitter import note_internal_error

                note_internal_error()


def _then(execute: Callable[[Any], None], fullname: str, hook: _AfterImport) -> Callable[[Any], None]:
    def exec_module(module: Any) -> None:
        execute(module)
        hook.ready(fullname)

    return exec_module


_after_import = _AfterImport()


def _switches(overrides: dict[str, bool | None]) -> dict[str, bool]:
    off = {name.strip().lower() for name in (os.environ.get(_OFF_ENV) or "").split(",") if name.strip()}
    if "requests" in off:
        off.add("urllib3")
    if "urllib" in off:
        off.add("http.client")
    return {name: (name not in off) if overrides.get(name) is None else bool(overrides[name]) for name in CLIENTS}


def _when_imported(module: str, install: Callable[[], None]) -> str:
    """Run ``install`` now if ``module`` is loaded, else right after its first import."""
    if module in sys.modules and getattr(sys.modules[module], "__spec__", None) is not None:
        try:
            install()
        except Exception:  # a version whose internals moved: left alone, counted
            from cvdiag.write.emitter import count_internal_error

            count_internal_error()
            return "failed"
        return "on"
    if importlib.util.find_spec(module) is None:
        return "missing"
    _after_import.waiting[module] = install
    if _after_import not in sys.meta_path:
        sys.meta_path.insert(0, _after_import)
    return "pending"


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
    first imported), ``off``, ``missing`` (not installed) or ``failed`` (a version whose
    internals cvdiag does not know; counted in ``cvdiag.stats()["internal_errors"]``).

    ``otel`` (on unless ``CVDIAG_INSTRUMENT_OFF`` names ``otel``): the spans frameworks
    finish inside a request become envelopes (``cvdiag.write._otel_spans``), once the app
    imports OpenTelemetry and where its SDK is installed; its state is ``otel``'s. False
    leaves spans alone (what an earlier call attached stays until ``uninstrument()``).
    """
    if llm is None:
        llm = (os.environ.get(_LLM_SWITCH) or "").strip().lower() not in _FALSE
    if requests is not None and urllib3 is None:
        urllib3 = requests
    switches = _switches(
        {"httpx": httpx, "aiohttp": aiohttp, "urllib3": urllib3, "botocore": botocore, "http.client": http_client}
    )
    states: dict[str, str] = {}
    with _lock:
        if switches["httpx"]:
            found = any(importlib.util.find_spec(name) is not None for name in ("httpx", "httpx2"))
            if found:
                instrument_httpx(llm=llm, heartbeat_s=heartbeat_s)
            states["httpx"] = "on" if found else "missing"
        else:
            uninstrument_httpx()
            states["httpx"] = "off"
        if heartbeat_s is not None and llm:
            from cvdiag.write import _llm_capture

            _llm_capture.set_heartbeat_s(heartbeat_s)
        states["aiohttp"] = _aiohttp(switches["aiohttp"], llm)
        states["urllib3"] = _urllib3(switches["urllib3"], llm, switches["botocore"])
        botocore_found = importlib.util.find_spec("botocore") is not None
        if not botocore_found:
            states["botocore"] = "missing"
        elif switches["botocore"] and switches["urllib3"]:
            states["botocore"] = states["urllib3"]
        else:
            states["botocore"] = "off"
        states["http.client"] = _http_client(switches["http.client"], llm)
        if otel is None:
            otel = "otel" not in (os.environ.get(_OFF_ENV) or "").lower().replace(" ", "").split(",")
        states["otel"] = _otel(otel)
    return states


def _http_client(on: bool, llm: bool) -> str:
    """The standard library's client: always there, patched now (a private module does it)."""
    if not on:
        _uninstall("http.client", "cvdiag.write._httpclient_capture")
        return "off"
    from cvdiag.write import _httpclient_capture

    _httpclient_capture.install(llm=llm)
    return "on"


def _otel(on: bool) -> str:
    """Spans in the process: cvdiag's span processor on the app's provider once it imports
    OpenTelemetry, and its tracing processor in the OpenAI Agents SDK once imported."""
    if not on:  # not read from here on; an earlier instrument() keeps it until uninstrument()
        return "off"
    from cvdiag.write import _span_evidence

    _span_evidence.switch.on = True

    def install_tap() -> None:
        from cvdiag.write import _otel_spans

        _otel_spans.attach()

    def install_agents() -> None:
        _span_evidence.register_agents_tap()

    if importlib.util.find_spec("agents") is not None:
        _when_imported("agents", install_agents)
    if importlib.util.find_spec("opentelemetry.sdk") is None:
        return "missing"
    return _when_imported("opentelemetry.trace", install_tap)


def _stop_otel() -> None:
    _after_import.waiting.pop("opentelemetry.trace", None)
    _after_import.waiting.pop("agents", None)
    evidence = sys.modules.get("cvdiag.write._span_evidence")
    if evidence is not None:
        evidence.switch.on = False


def _aiohttp(on: bool, llm: bool) -> str:
    if not on:
        _uninstall("aiohttp", "cvdiag.write._aiohttp_capture")
        return "off"

    def install() -> None:
        from cvdiag.write import _aiohttp_capture

        _aiohttp_capture.install(llm=llm)

    return _when_imported("aiohttp", install)


def _urllib3(on: bool, llm: bool, bedrock: bool) -> str:
    if not on:
        _uninstall("urllib3", "cvdiag.write._urllib3_capture")
        return "off"

    def install() -> None:
        from cvdiag.write import _urllib3_capture

        _urllib3_capture.install(llm=llm, bedrock=bedrock)

    return _when_imported("urllib3", install)


def _uninstall(module: str, capture: str) -> None:
    _after_import.waiting.pop(module, None)
    loaded = sys.modules.get(capture)
    if loaded is not None:
        loaded.uninstall()


def uninstrument() -> None:
    """Undo ``instrument()``: every client back as it was, no import waited for."""
    with _lock:
        uninstrument_httpx()
        _uninstall("aiohttp", "cvdiag.write._aiohttp_capture")
        _uninstall("urllib3", "cvdiag.write._urllib3_capture")
        _uninstall("http.client", "cvdiag.write._httpclient_capture")
        _stop_otel()
        if _after_import in sys.meta_path and not _after_import.waiting:
            sys.meta_path.remove(_after_import)
