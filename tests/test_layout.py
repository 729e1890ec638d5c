"""The file tree is the architecture: each side imports only what it may.

contract <- write (the emit side) and read/diagnosis (the read side) <- face and the
pytest plugin. The read side must start without Starlette or structlog installed, and
neither side may reach into the other.
"""

from __future__ import annotations

import ast
import re
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


# A dialect module is pure (bytes and parsed JSON in, facts out): the standard library, the
# contract, its own package and the pure tool-failure patterns; no HTTP client, no SDK.
DIALECTS = PACKAGE / "write" / "dialects"
DIALECT_MAY_IMPORT = ("cvdiag.contract", "cvdiag.write.dialects", "cvdiag.write._tool_failures")
STDLIB_CLIENTS = ("http", "urllib.request", "socket", "ssl", "asyncio")


def _dialect_violations(root: Path) -> list[str]:
    bad = []
    for path in sorted(root.glob("*.py")):
        for line, name in _imports(path):
            top = name.split(".")[0]
            client = any(name == c or name.startswith(c + ".") for c in STDLIB_CLIENTS)
            if name == "__future__" or (top in sys.stdlib_module_names and not client):
                continue
            if not any(name == a or name.startswith(a + ".") for a in DIALECT_MAY_IMPORT):
                bad.append(f"{path.relative_to(PACKAGE.parent)}:{line} imports {name}")
    return bad


def test_dialect_modules_import_no_client_and_no_sdk() -> None:
    assert sorted(DIALECTS.glob("*.py")), "the dialect package is where the architecture says"
    assert _dialect_violations(DIALECTS) == []


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


def _module_name(path: Path) -> str:
    return ".".join(path.relative_to(PACKAGE.parent).with_suffix("").parts).removesuffix(".__init__")


def _import_graph() -> dict[str, set[str]]:
    """cvdiag module -> the cvdiag modules it imports by name, at any depth.

    A lazy import inside a function counts: it still hands control back to the module it
    names, and a circle through one is still a circle. ``from package import module``
    names both; a package is not taken to import its parents.
    """
    modules = {_module_name(p): p for p in PACKAGE.rglob("*.py")}
    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        graph[name] = {imported for _, imported in _imports(path) if imported in modules and imported != name}
    return graph


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Every import circle in ``graph``, each once, as the modules around it."""
    found: list[list[str]] = []
    state: dict[str, int] = {}  # 1: on the current path, 2: done

    def visit(node: str, path: list[str]) -> None:
        state[node] = 1
        for nxt in sorted(graph[node]):
            if state.get(nxt) == 1:
                found.append([*path[path.index(nxt) :], nxt])
            elif nxt not in state:
                visit(nxt, [*path, nxt])
        state[node] = 2

    for node in sorted(graph):
        if node not in state:
            visit(node, [node])
    return found


def test_the_cycle_finder_sees_a_circle_through_a_lazy_import() -> None:
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c", "a"]]
    assert _cycles({"a": {"b"}, "b": set(), "c": {"a", "b"}}) == []


def test_no_module_imports_itself_through_others() -> None:
    """Control flows one way: no cvdiag module reaches, through any import, back to itself."""
    graph = _import_graph()
    assert len(graph) > 50 and graph["cvdiag.face.cli"]
    assert _cycles(graph) == []


def test_every_module_the_architecture_names_exists() -> None:
    """docs/architecture.md's tree names modules by file: a rename must follow there."""
    doc = (PACKAGE.parent / "docs" / "architecture.md").read_text()
    tree = doc.split("```")[1]
    side, missing, named = "", [], 0
    for line in tree.splitlines():
        if m := re.match(r"^  (\w+)/", line):
            side = m.group(1)
        for name in re.findall(r"\b(\w+\.py)\b", line):
            here = PACKAGE / side / name if line.startswith("    ") or m else PACKAGE / name
            named += 1
            if not here.exists():
                missing.append(str(here.relative_to(PACKAGE.parent)))
    assert named > 40 and missing == []


# -- hooks only through the toolkit ------------------------------------------------------------

HOOK_TOOLKIT = PACKAGE / "write" / "hooks.py"
#: Names that hold a library's class or module where a patch is put in by hand.
_OWNER_NAMES = frozenset({"cls", "klass", "owner", "client_class"})


#: Library state set by hand that is no patch, with why it may be.
_NOT_HOOKS = {
    # OpenTelemetry lets a provider be set once: cvdiag's stand-in gives the slot back
    # when the app sets its own (write/_otel_spans.py, _set_provider).
    "trace_api._TRACER_PROVIDER",
    "trace_api._TRACER_PROVIDER_SET_ONCE._done",
}


def _dotted(node: ast.expr) -> tuple[str, str]:
    """The root name of an attribute chain and the whole chain (``a.b.c`` -> a, a.b.c)."""
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    root = node.id if isinstance(node, ast.Name) else ""
    return root, ".".join([root, *reversed(parts)])


def _hand_made_hooks(path: Path) -> list[str]:
    """Where a module hooks a library itself: touches ``sys.meta_path``, or sets an
    attribute of an imported third-party module or class (``trace_api.x = ...``,
    ``setattr(SomeClient, ...)``, ``cls.send = ...``)."""
    tree = ast.parse(path.read_text(), str(path))
    foreign = set(_OWNER_NAMES)
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            foreign |= {(alias.asname or alias.name).split(".")[0] for alias in node.names}
        elif (
            isinstance(node, ast.ImportFrom)
            and not node.level
            and not (node.module or "").startswith(("cvdiag", "__future__"))
        ):
            foreign |= {alias.asname or alias.name for alias in node.names}
    foreign -= {"cvdiag"}
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and node.attr == "meta_path":
            found.append(f"{node.lineno}: sys.meta_path")
        targets: list[ast.expr] = []
        if isinstance(node, ast.Assign):
            targets = node.targets
        elif isinstance(node, ast.AugAssign):
            targets = [node.target]
        elif isinstance(node, ast.Call) and getattr(node.func, "id", None) in ("setattr", "delattr") and node.args:
            targets = [ast.Attribute(value=node.args[0], attr="*")]
        for target in targets:
            root, chain = _dotted(target) if isinstance(target, ast.Attribute) else ("", "")
            if root in foreign and chain not in _NOT_HOOKS:
                found.append(f"{node.lineno}: sets {chain}")
    return [f"{path.name}:{where}" for where in found]


def test_libraries_are_hooked_only_through_the_toolkit() -> None:
    """One finder, one patch registry (``write/hooks.py``): a module that patched a
    library by hand would skip the declared version ranges and the undo."""
    found = [bad for path in sorted(PACKAGE.rglob("*.py")) if path != HOOK_TOOLKIT for bad in _hand_made_hooks(path)]
    assert found == []


def test_the_hook_rule_sees_a_hand_made_patch(tmp_path: Path) -> None:
    sample = tmp_path / "cvdiag" / "write" / "_sample_hook.py"
    sample.parent.mkdir(parents=True)
    sample.write_text(
        "import sys\nimport httpx\nfrom opentelemetry import trace as trace_api\nfrom aiohttp import ClientSession\n"
        "httpx.Client.send = None\ntrace_api._set_tracer_provider = None\nsetattr(ClientSession, '_request', None)\n"
        "sys.meta_path.insert(0, None)\nfor cls in (): cls.send = None\nresponse = object()\nresponse.x = 1\n"
    )
    found = [bad.split(":", 1)[1] for bad in _hand_made_hooks(sample)]
    assert sorted(found) == sorted(
        [
            "5: sets httpx.Client.send",
            "6: sets trace_api._set_tracer_provider",
            "7: sets ClientSession.*",
            "8: sys.meta_path",
            "9: sets cls.send",
        ]
    )
