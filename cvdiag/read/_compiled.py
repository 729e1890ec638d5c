"""The compiled part of the read side (``_cfold.c``): the module, or None when it was not
built (no C compiler at install) or ``CVDIAG_COMPILED=0`` turns it off."""

from __future__ import annotations

from cvdiag.contract.compiled import compiled_module

CFOLD = compiled_module("cvdiag.read._cfold")
