"""The file tree is the architecture: each side imports only what it may.

contract <- write (the emit side) and read/diagnosis (the read side) <- face and the
pytest plugin. The read side must start without Starlette or structlog installed, and
neither side may reach into the other.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "cvdiag"

# package -> what its modules may never import (prefix match on the dotted name)
FORBIDDEN = {
    "contract": ("cvdiag.write", "cvdiag.read", "cvdiag.diagnosis", "cvdiag.face", "cvdiag.pytest_plugin",
                 "starlette", "structlog", "rich"),
    "write": ("cvdiag.read", "cvdiag.diagnosis", "cvdiag.face", "cvdiag.pytest_plugin", "rich"),
    "read": ("cvdiag.write", "cvdiag.face", "cvdiag.pytest_plugin", "starlette", "structlog", "rich"),
    "diagnosis": ("cvdiag.write", "cvdiag.read", "cvdiag.face", "cvdiag.pytest_plugin", "starlette", "structlog",
                  "rich"),
    "history": ("cvdiag.write", "cvdiag.face", "cvdiag.pytest_plugin", "starlette", "structlog", "rich"),
    "face": ("cvdiag.write", "cvdiag.pytest_plugin", "starlette", "structlog"),
}  # fmt: skip
# The demo's own backend is an app that uses cvdiag like any user would.
ALLOWED_FILES = {PACKAGE / "face" / "_demo_app.py"}


def _imports(path: Path) -> list[tuple[int, str]]:
    """Every module ``path`` imports, at any depth, relative imports made absolute."""
    here = ".".join(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    package = here if path.name == "__init__.py" else here.rpartition(".")[0]
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join(parts + ([base] if base else []))
            found.append((node.lineno, base))
            found += [(node.lineno, f"{base}.{alias.name}") for alias in node.names]
    return found


def _violations(side: str) -> list[str]:
    bad = []
    for path in sorted((PACKAGE / side).rglob("*.py")):
        if path in ALLOWED_FILES:
            continue
        for line, name in _imports(path):
            if any(name == f or name.startswith(f + ".") for f in FORBIDDEN[side]):
                bad.append(f"{path.relative_to(PACKAGE.parent)}:{line} imports {name}")
    return bad


@pytest.mark.parametrize("side", sorted(FORBIDDEN))
def test_each_side_imports_only_what_the_architecture_allows(side: str) -> None:
    assert _violations(side) == []


def test_every_module_lives_in_a_side_package() -> None:
    top = sorted(p.name for p in PACKAGE.glob("*.py"))
    assert top == ["__init__.py", "__main__.py", "testing.py"]


def test_the_read_side_and_the_command_load_no_emit_side_starlette_or_structlog() -> None:
    modules = sorted(
        ".".join(p.relative_to(PACKAGE.parent).with_suffix("").parts).removesuffix(".__init__")
        for side in ("contract", "read", "diagnosis", "history", "face")
        for p in (PACKAGE / side).rglob("*.py")
        if p not in ALLOWED_FILES
    )
    code = (
        "import importlib, sys\n"
        f"for name in {modules!r}:\n"
        "    importlib.import_module(name)\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in ('starlette', 'structlog')"
        " or m.startswith('cvdiag.write')))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert len(modules) > 20 and out.strip() == "[]"
