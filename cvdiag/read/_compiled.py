"""The compiled part of the read side (``_cfold.c``): the module, or None when it was not
built (no C compiler at install) or ``CVDIAG_COMPILED=0`` turns it off."""

from __future__ import annotations

import os
from types import ModuleType


def _load() -> ModuleType | None:
    if os.environ.get("CVDIAG_COMPILED", "1") == "0":
        return None
    try:
        from cvdiag.read import _cfold
    except ImportError:
        return None
    return _cfold


CFOLD = _load()
