"""The scripts of ``tools/`` (not a package), loaded as modules for the tests that use them."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parent.parent


def load_tool(name: str) -> ModuleType:
    """``tools/NAME.py`` run once as the module ``NAME`` (registered, so its dataclasses and
    pickles resolve)."""
    spec = importlib.util.spec_from_file_location(name, ROOT / "tools" / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module
