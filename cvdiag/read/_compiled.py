"""The compiled part of the read side (``_cfold.c``): the module, or None when it was not
built (no C compiler at install), ``CVDIAG_COMPILED=0`` turns it off, or it keeps other
head roles than the declared layout (``contract.layout.ROLES``): then it would read wrong
fields, and it is refused, saying so."""

from __future__ import annotations

import warnings

from cvdiag.contract.compiled import compiled_module
from cvdiag.contract.layout import ROLES

CFOLD = compiled_module("cvdiag.read._cfold")
if CFOLD is not None and tuple(getattr(CFOLD, "ROLES", ())) != ROLES:
    warnings.warn(
        f"cvdiag: cvdiag.read._cfold keeps the head roles {getattr(CFOLD, 'ROLES', None)}, not contract.layout's"
        f" {ROLES}: running without it; rebuild it",
        RuntimeWarning,
        stacklevel=1,
    )
    CFOLD = None
