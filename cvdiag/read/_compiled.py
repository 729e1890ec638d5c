"""The compiled part of the read side (``_cfold.c``): the module, or None when it was not
built (no C compiler at install), ``CVDIAG_COMPILED=0`` turns it off, or it keeps other
head roles than the declared layout (``contract.layout.ROLES``) or names its results
otherwise (``contract.layout.RESULTS``) or has no room for the counters the layout
declares (``contract.layout.COUNTED``): then it would read wrong fields, and it is refused,
saying so (a warning; the CLI says it reads at Python speed on big inputs)."""

from __future__ import annotations

import warnings
from types import ModuleType

from cvdiag.contract.compiled import compiled_module
from cvdiag.contract.layout import COUNTED, RESULTS, ROLES


def _disagreement(module: ModuleType) -> str | None:
    """What the module says that the declared layout does not, or None."""
    if tuple(getattr(module, "ROLES", ())) != ROLES:
        return f"keeps the head roles {getattr(module, 'ROLES', None)}, not contract.layout's {ROLES}"
    if getattr(module, "RESULTS", None) != RESULTS:
        return f"names its results {getattr(module, 'RESULTS', None)}, not contract.layout.RESULTS {RESULTS}"
    counters, room = len(set(COUNTED.values())), getattr(module, "COUNTERS", 0)
    if counters > room:
        return f"has room for {room} head-only counters, contract.layout.COUNTED needs {counters}"
    return None


#: The classes the compiled fold builds its results as, from the declaration: each field a
#: slot, read by name at a slot's speed (a structure's fields are read four times slower).
RESULT_CLASSES = {
    name: type(name, (), {"__slots__": fields, "__module__": __name__}) for name, fields in RESULTS.items()
}


def _configured(module: ModuleType) -> str | None:
    """What keeps the module from being configured from the declared layout, or None."""
    why = _disagreement(module)
    if why is None:
        try:
            module.set_result_classes(RESULT_CLASSES)
        except (AttributeError, ValueError) as e:
            return f"cannot build its results from contract.layout.RESULTS ({e})"
    return why


CFOLD = compiled_module("cvdiag.read._cfold")
_WHY = None if CFOLD is None else _configured(CFOLD)
if _WHY is not None:
    warnings.warn(f"cvdiag: cvdiag.read._cfold {_WHY}: running without it; rebuild it", RuntimeWarning, stacklevel=1)
    CFOLD = None
