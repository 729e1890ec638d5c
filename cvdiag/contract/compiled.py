"""The one switch of cvdiag's compiled parts (the read side's fold, the emit side's
envelope): a module built at install, or None when it was not built (no C compiler),
``CVDIAG_COMPILED=0`` turns it off, or it was built from another source than the one
beside it (a checkout changed since ``build_ext``: it refuses to load, and says so).
Each side names its own module; this one imports neither."""

from __future__ import annotations

import contextlib
import hashlib
import importlib
import os
import warnings
from pathlib import Path
from types import ModuleType


def compiled_module(name: str) -> ModuleType | None:
    """The compiled module ``name`` (dotted), or None when it is off, not built or stale."""
    if os.environ.get("CVDIAG_COMPILED", "1") == "0":
        return None
    try:
        module = importlib.import_module(name)
    except ImportError:
        return None
    why = stale(module)
    if why is None:
        return module
    if name not in _SAID:  # once per module, however many modules ask for it
        _SAID.add(name)
        with contextlib.suppress(Exception):  # warnings as errors: off all the same, never a crash
            warnings.warn(why, RuntimeWarning, stacklevel=2)
    return None


_SAID: set[str] = set()


def source_hash(source: Path) -> str:
    """What ``setup.py`` builds into a module as its ``SOURCE_HASH``: the start of the
    SHA-256 of its C source's bytes."""
    return hashlib.sha256(source.read_bytes()).hexdigest()[:16]


def stale(module: ModuleType, source: Path | None = None) -> str | None:
    """Why ``module`` must not run, or None: its ``.c`` source (beside it, as in a checkout
    or an sdist; a wheel ships none, and then there is nothing to compare) is not the one
    it was built from."""
    if source is None:
        built = Path(getattr(module, "__file__", None) or "")
        source = built.with_name(module.__name__.rpartition(".")[2] + ".c")
    try:
        want = source_hash(source)
    except OSError:
        return None
    have = getattr(module, "SOURCE_HASH", "")
    if have == want:
        return None
    return (
        f"cvdiag: {module.__name__} was built from another {source.name} than the one beside it"
        f" (built {have or 'with no hash'}, source {want}): running without it; rebuild it with"
        " `python setup.py build_ext --inplace` (or reinstall)"
    )
