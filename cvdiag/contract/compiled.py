"""The one switch of cvdiag's compiled parts (the read side's fold, the emit side's
envelope): a module built at install, or None when it was not built (no C compiler)
or ``CVDIAG_COMPILED=0`` turns it off. Each side names its own module; this one
imports neither."""

from __future__ import annotations

import importlib
import os
from types import ModuleType


def compiled_module(name: str) -> ModuleType | None:
    """The compiled module ``name`` (dotted), or None when it is off or not built."""
    if os.environ.get("CVDIAG_COMPILED", "1") == "0":
        return None
    try:
        return importlib.import_module(name)
    except ImportError:
        return None
