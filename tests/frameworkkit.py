"""The ``frameworks`` extra in unit tests: a test (or a whole module) that needs one of
its packages skips, saying which, when it is not installed; with ``CVDIAG_REQUIRE_E2E=1``
(CI, which installs the extra) a missing package is a failure instead.

Call ``need`` before a module's imports of the package, or at the top of a test.
"""

from __future__ import annotations

import importlib
import os
from types import ModuleType

import pytest


def _required() -> bool:
    return os.environ.get("CVDIAG_REQUIRE_E2E", "").strip().lower() in ("1", "true", "yes", "on")


def need(module: str) -> ModuleType:
    """``module`` imported, or a skip with the reason (a loud failure when required)."""
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        reason = f"{module} is not installed ({exc}); pip install -e '.[frameworks]'"
        if _required():
            pytest.fail(f"framework tests required (CVDIAG_REQUIRE_E2E=1) but {reason}", pytrace=False)
        pytest.skip(
            f"framework tests skipped: {reason} (CVDIAG_REQUIRE_E2E=1 makes this a failure)", allow_module_level=True
        )
