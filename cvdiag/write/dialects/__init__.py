"""One module per provider dialect: everything cvdiag reads of one LLM wire format.

Each public module of this package declares ``DIALECTS``, a tuple of ``Dialect`` (see
``_base``): its routes, its stream events, its JSON answer, its tool calls asked and
answered. The table below is built from the package listing, so adding a provider is
adding one file. Dialect modules are pure: parsed JSON and bytes in, facts out; they
import no HTTP client and no SDK (``tests/test_layout.py`` checks it).
"""

from __future__ import annotations

import importlib
import pkgutil

from cvdiag.write.dialects._base import Dialect

__all__ = ["BY_API", "DIALECTS", "Dialect", "dialect_modules"]


def dialect_modules() -> list[str]:
    """The names of the dialect modules (every public module of this package)."""
    return sorted(info.name for info in pkgutil.iter_modules(__path__) if not info.name.startswith("_"))


def _load() -> tuple[Dialect, ...]:
    found: list[Dialect] = []
    for name in dialect_modules():
        found.extend(importlib.import_module(f"{__name__}.{name}").DIALECTS)
    return tuple(found)


#: Every dialect, and each by the ``api`` it writes.
DIALECTS: tuple[Dialect, ...] = _load()
BY_API: dict[str, Dialect] = {dialect.api: dialect for dialect in DIALECTS}
