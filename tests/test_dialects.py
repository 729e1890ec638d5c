"""A provider's wire format is one module of ``cvdiag.write.dialects``: adding a provider is
adding one file, which every reader finds by the package listing."""

from __future__ import annotations

import importlib
import json
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

from cvdiag.write import dialects
from cvdiag.write._llm_stream import API_NAMES
from cvdiag.write.dialects import BY_API, DIALECTS, Dialect, dialect_modules

PACKAGE = Path(dialects.__file__).parent


def test_every_dialect_module_declares_its_dialect_the_same_way() -> None:
    names = dialect_modules()
    assert names == sorted(p.stem for p in PACKAGE.glob("*.py") if not p.stem.startswith("_"))
    expected = {"anthropic", "bedrock", "gemini", "openai_chat", "openai_completions", "openai_embeddings"}
    assert expected | {"openai_responses"} <= set(names)
    for name in names:
        module = importlib.import_module(f"cvdiag.write.dialects.{name}")
        assert isinstance(module.API, str) and isinstance(module.FAMILY, str), name
        assert module.__doc__, f"{name} says which provider it reads"
        dialect = Dialect.of(module)
        for field in ("read_json", "tool_event", "tool_body", "tool_results", "turn_boundary", "path_route"):
            assert getattr(dialect, field) is None or callable(getattr(dialect, field)), (name, field)
        has_tools = [dialect.tool_array, dialect.tool_results, dialect.turn_boundary, dialect.tool_event]
        assert all(has_tools) or not any(has_tools), f"{name}: tool calls are declared whole or not at all"


def test_the_table_is_the_listing_and_covers_every_wire_format() -> None:
    modules = [importlib.import_module(f"cvdiag.write.dialects.{name}") for name in dialect_modules()]
    assert [d.api for d in DIALECTS] == [m.API for m in modules]
    assert set(API_NAMES) <= set(BY_API)
    assert len(BY_API) == len(DIALECTS), "each api is read by exactly one dialect"


_ACME = '''
"""Acme's in-house format (a test's provider)."""
from cvdiag.write.dialects._json import as_int, get
from cvdiag.write.dialects.openai_chat import STREAM

API = "acme.generate"
FAMILY = "acme"
PATH_SUFFIXES = ("/acme/generate",)
HOSTS = (("llm.acme.test", "acme"),)


def read_json(r, body):
    r.output_chars = len(get(body, "answer") or "")
    r.finish_reason = get(body, "why")
    r.prompt_tokens = as_int(get(body, "cost", "in"))
'''

_PROBE = """
import json
from cvdiag.write._llm_stream import AnswerReader
from cvdiag.write.llm_routes import recognise
route = recognise("POST", "llm.acme.test", "/v2/acme/generate", lambda: b'{"model": "rocket-1"}')
reader = AnswerReader(route.api, event_stream=False)
reader.feed(b'{"answer": "beep beep", "why": "done", "cost": {"in": 7}}')
reader.end()
print(json.dumps([route.provider, route.api, route.model, reader.output_chars, reader.finish_reason,
                  reader.prompt_tokens, reader.complete]))
"""


def test_adding_a_provider_is_adding_one_file(tmp_path: Path) -> None:
    """A scratch copy of the package with one more file in ``dialects/``: the routes and the
    answer reader find it, with no other edit."""
    shutil.copytree(PACKAGE.parents[1], tmp_path / "cvdiag", ignore=shutil.ignore_patterns("__pycache__"))
    (tmp_path / "cvdiag" / "write" / "dialects" / "acme.py").write_text(textwrap.dedent(_ACME))
    done = subprocess.run(
        [sys.executable, "-c", _PROBE], cwd=tmp_path, env={"PYTHONPATH": str(tmp_path)},
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == ["acme", "acme.generate", "rocket-1", 9, "done", 7, True]
