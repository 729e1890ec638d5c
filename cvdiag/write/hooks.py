"""How cvdiag hooks a library, in one place: the versions each hook supports, one finder
that runs a hook right after its library's first import, and one way to put a wrapper in
place of a library's attribute and take it back out.

A hook is installed only when the installed distribution's version is in the range it
declares (``instrument()`` then says ``unsupported version``), as OpenTelemetry's
instrumentors check ``instrumentation_dependencies()`` first. A library that is not
imported yet is not imported here: the finder installs the hook after the app imports it,
as Sentry's and OpenTelemetry's integrations do. Nothing here raises into the app.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import re
import sys
import threading
from collections.abc import Callable
from dataclasses import dataclass
from importlib.machinery import ModuleSpec
from typing import Any

__all__ = [
    "ON",
    "UNSUPPORTED",
    "Hook",
    "Patch",
    "after_import",
    "check",
    "disable",
    "enable",
    "in_range",
    "refused",
    "version_of",
]

ON, PENDING, MISSING, FAILED, UNSUPPORTED = "on", "pending", "missing", "failed", "unsupported version"
_CLAUSE = re.compile(r"\s*(>=|<=|==|>|<)\s*(\d+(?:\.\d+)*)\s*$")
_RELEASE = re.compile(r"\d+(?:\.\d+)*")


@dataclass(frozen=True)
class Hook:
    """One library's hook: installed once ``module`` is imported, if the version of
    ``distribution`` (None: part of Python) is in ``supported`` (``">=3.8,<4"``)."""

    name: str
    module: str
    install: Callable[[], None]
    uninstall: Callable[[], None]
    distribution: str | None = None
    supported: str = ""


def version_of(distribution: str) -> str | None:
    """The installed version of a distribution, or None when it is not installed."""
    try:
        return importlib.metadata.version(distribution)
    except importlib.metadata.PackageNotFoundError:
        return None


def _release(version: str) -> tuple[int, ...]:
    found = _RELEASE.match(version.strip())
    return tuple(int(part) for part in found.group().split(".")) if found else ()


def in_range(version: str, supported: str) -> bool:
    """Whether a version's release (``3.14.5``, ``2.0.0rc1`` as ``2.0.0``) meets every
    comma-separated clause of ``supported`` (``>=``, ``>``, ``<``, ``<=``, ``==``). A
    clause that does not parse is a mistake of cvdiag's: ValueError."""
    release = _release(version)
    if not release:
        return False
    for clause in filter(None, (part.strip() for part in supported.split(","))):
        found = _CLAUSE.match(clause)
        if found is None:
            raise ValueError(f"not a version clause: {clause!r}")
        op, bound = found.group(1), _release(found.group(2))
        width = max(len(release), len(bound))
        have, want = release + (0,) * (width - len(release)), bound + (0,) * (width - len(bound))
        if not {">=": have >= want, "<=": have <= want, "==": have == want, ">": have > want, "<": have < want}[op]:
            return False
    return True


class _AfterImport:
    """The ``sys.meta_path`` finder that runs callbacks once a watched module has loaded.

    It finds nothing itself: it asks the finders after it for the module's spec and wraps
    that loader's ``exec_module`` (on the loader instance, the module's own) so the
    callbacks run right after the module's code. The loader keeps its type (a resource
    reader or ``isinstance`` check on it still works). It leaves ``sys.meta_path`` once
    nothing is waited for.
    """

    def __init__(self) -> None:
        self.waiting: dict[str, list[Callable[[], None]]] = {}
        self.lock = threading.RLock()

    def wait_for(self, module: str, callback: Callable[[], None]) -> None:
        with self.lock:
            callbacks = self.waiting.setdefault(module, [])
            if callback not in callbacks:
                callbacks.append(callback)
            if self not in sys.meta_path:
                sys.meta_path.insert(0, self)

    def stop_waiting(self, module: str, callback: Callable[[], None] | None = None) -> None:
        """Forget one callback of a module (or all of them)."""
        with self.lock:
            callbacks = self.waiting.get(module, [])
            if callback is None:
                callbacks.clear()
            elif callback in callbacks:
                callbacks.remove(callback)
            if not callbacks:
                self.waiting.pop(module, None)
            if not self.waiting and self in sys.meta_path:
                sys.meta_path.remove(self)

    def find_spec(self, fullname: str, path: Any = None, target: Any = None) -> ModuleSpec | None:
        if fullname not in self.waiting:
            return None
        for finder in sys.meta_path:
            if finder is self or not hasattr(finder, "find_spec"):
                continue
            spec = finder.find_spec(fullname, path, target)
            if spec is None:
                continue
            execute = getattr(spec.loader, "exec_module", None)
            if execute is not None:
                spec.loader.exec_module = _then(execute, fullname, self)  # type: ignore[union-attr]
            return spec
        return None

    def ready(self, fullname: str) -> None:
        with self.lock:
            callbacks = self.waiting.pop(fullname, [])
            if not self.waiting and self in sys.meta_path:
                sys.meta_path.remove(self)
        for callback in callbacks:
            _quietly(callback)


def _then(execute: Callable[[Any], None], fullname: str, finder: _AfterImport) -> Callable[[Any], None]:
    def exec_module(module: Any) -> None:
        execute(module)
        finder.ready(fullname)

    return exec_module


def _quietly(callback: Callable[[], None]) -> bool:
    """Run a hook's install; a version whose internals moved is left alone and counted."""
    try:
        callback()
    except Exception:
        from cvdiag.write.emitter import count_internal_error

        count_internal_error()
        return False
    return True


#: The one finder every hook waits with.
after_import = _AfterImport()

#: Why each hook last refused: its name -> (the version found, the range it supports).
refused: dict[str, tuple[str, str]] = {}


def check(hook: Hook) -> str | None:
    """Why the hook cannot be installed, ``missing`` or ``unsupported version`` (noted in
    ``refused``), or None when it can."""
    loaded = _loaded(hook.module)
    # The top-level package only: finding ``mcp.client.session`` would import ``mcp``.
    if not loaded and importlib.util.find_spec(hook.module.partition(".")[0]) is None:
        return MISSING
    version = version_of(hook.distribution) if hook.distribution is not None else None
    if version is None and hook.distribution is not None and not loaded:
        return MISSING
    if version is not None and not in_range(version, hook.supported):
        refused[hook.name] = (version, hook.supported)
        return UNSUPPORTED
    refused.pop(hook.name, None)
    return None


def enable(hook: Hook) -> str:
    """Install a hook now if its module is loaded, else right after its first import:
    ``on``, ``pending``, ``missing`` (not installed), ``unsupported version`` (installed
    outside the declared range: nothing patched, ``refused`` says why) or ``failed`` (its
    internals moved; counted in ``cvdiag.stats()["internal_errors"]``)."""
    refusal = check(hook)
    if refusal is not None:  # nothing of it was put in: hooks sharing its undo stay
        after_import.stop_waiting(hook.module, hook.install)
        return refusal
    if _loaded(hook.module):
        return ON if _quietly(hook.install) else FAILED
    after_import.wait_for(hook.module, hook.install)
    return PENDING


def _loaded(module: str) -> bool:
    return module in sys.modules and getattr(sys.modules[module], "__spec__", None) is not None


def disable(hook: Hook) -> None:
    """Stop waiting for the hook's module and undo what the hook installed."""
    after_import.stop_waiting(hook.module, hook.install)
    _quietly(hook.uninstall)


class Patch:
    """One attribute of a library's class or module replaced by cvdiag's wrapper: put in
    once, taken out only while it is still ours (someone who wrapped it since keeps
    theirs, and ours then passes through, ``on`` being False).

    ``wrapper`` is used as it is and reads ``original`` on every call; or ``around``
    makes the wrapper from the original when it is installed.
    """

    __slots__ = ("around", "attr", "on", "original", "owner", "wrapper")

    def __init__(self, owner: Any, attr: str, wrapper: Any = None, *, around: Callable[[Any], Any] | None = None):
        self.owner, self.attr, self.wrapper, self.around = owner, attr, wrapper, around
        self.on = False
        self.original: Any = owner.__dict__.get(attr)

    def install(self) -> bool:
        """Wrap the attribute (once); True when this call wrapped it. LookupError when
        the library has no such attribute (a version whose internals moved)."""
        current = self.owner.__dict__.get(self.attr)
        if current is None:
            raise LookupError(f"{getattr(self.owner, '__name__', self.owner)!r} has no {self.attr!r}")
        self.on = True
        if current is self.wrapper:
            return False
        self.original = current
        if self.around is not None:
            self.wrapper = self.around(current)
        setattr(self.owner, self.attr, self.wrapper)
        return True

    def uninstall(self) -> None:
        """Restore the attribute, unless someone wrapped ours since (then ours passes through)."""
        self.on = False
        if self.wrapper is not None and self.owner.__dict__.get(self.attr) is self.wrapper:
            setattr(self.owner, self.attr, self.original)
