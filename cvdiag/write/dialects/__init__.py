"""One module per provider dialect: everything cvdiag reads of one LLM wire format.

Each public module of this package is one wire format. It declares ``API``, ``FAMILY``
and ``STREAM``, and when it has them its routes (``PATH_SUFFIXES``, ``HOSTS``,
``path_route``), its JSON answer (``read_json``), and its tool calls asked and answered
(``TOOL_MARKERS``, ``tool_event``, ``tool_body``, ``TOOL_ARRAY``, ``tool_results``,
``turn_boundary``); ``Dialect.of`` reads them (see ``_base``). The table below is built
from the package listing, so adding a provider is adding one file. Dialect modules are
pure: bytes and parsed JSON in, facts out; they import no HTTP client and no SDK
(``tests/test_layout.py`` checks it).
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
    return tuple(Dialect.of(importlib.import_module(f"{__name__}.{name}")) for name in dialect_modules())


#: Every dialect, and each by the ``api`` it writes.
DIALECTS: tuple[Dialect, ...] = _load()
BY_API: dict[str, Dialect] = {dialect.api: dialect for dialect in DIALECTS}
