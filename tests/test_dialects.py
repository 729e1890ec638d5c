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


def test_every_dialect_module_declares_its_dialects_the_same_way() -> None:
    names = dialect_modules()
    assert names == sorted(p.stem for p in PACKAGE.glob("*.py") if not p.stem.startswith("_"))
    assert {"anthropic", "bedrock", "gemini", "openai_chat", "openai_responses"} <= set(names)
    for name in names:
        module = importlib.import_module(f"cvdiag.write.dialects.{name}")
        declared = module.DIALECTS
        assert isinstance(declared, tuple) and declared, name
        assert all(isinstance(d, Dialect) for d in declared), name
        assert module.__doc__, f"{name} says which provider it reads"


def test_the_table_is_the_listing_and_covers_every_wire_format() -> None:
    modules = [importlib.import_module(f"cvdiag.write.dialects.{name}") for name in dialect_modules()]
    listed = [d for module in modules for d in module.DIALECTS]
    assert list(DIALECTS) == listed
    assert set(API_NAMES) <= set(BY_API)
    assert len(BY_API) == len(DIALECTS), "each api is read by exactly one dialect"


_ACME = '''
"""Acme's in-house format (a test's provider)."""
from cvdiag.write.dialects._base import Dialect, as_int, get
from cvdiag.write.dialects.openai_chat import DIALECTS as _OPENAI


def _read_json(r, body):
    r.output_chars = len(get(body, "answer") or "")
    r.finish_reason = get(body, "why")
    r.prompt_tokens = as_int(get(body, "cost", "in"))


DIALECTS = (
    Dialect(
        api="acme.generate",
        family="acme",
        stream=_OPENAI[0].stream,
        path_suffixes=("/acme/generate",),
        hosts=(("llm.acme.test", "acme"),),
        read_json=_read_json,
    ),
)
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
