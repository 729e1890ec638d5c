"""The rig of the agent-level end-to-end tests (issue 15): the framework apps of
``examples/`` under real uvicorn with aimock as their provider, one request at a time,
and what a user reads afterwards (the server's tool lines, ``cvdiag diagnose``).

The apps run with ``EXAMPLE_TOOL_ERRORS=model``: a tool that raises is handed back to
the model, each framework in its documented way, and the run goes on.
"""

from __future__ import annotations

import importlib.util
import json
import socket
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack
from dataclasses import dataclass

import httpx2
import pytest
from conftest import Aimock, ExampleServer, _cvdiag_cli, _unavailable, serve_app
from test_frameworks import deltas, sse_events

#: The slow tool's duration (``EXAMPLE_SLOW_TOOL_S``) and the threshold given to the CLI:
#: far enough apart that machine speed does not matter, short enough to keep the suite fast.
SLOW_TOOL_S = 1.5
SLOW_THRESHOLD_S = "1"
#: Servers booting at once: two overlap one's imports with the other's on a 2-core
#: machine; more only slow each boot down towards the start timeout.
BOOTS_AT_ONCE = 2


@dataclass(frozen=True)
class App:
    app: str  # module:attribute under examples/
    requires: tuple[str, ...]  # importable modules the app needs

    @property
    def missing(self) -> list[str]:
        return [m for m in self.requires if importlib.util.find_spec(m) is None]


APPS = {
    "langgraph": App("examples.langgraph_app:app", ("langgraph", "langchain_openai")),
    "pydantic-ai": App("examples.pydantic_ai_app:app", ("pydantic_ai",)),
    "openai-agents": App("examples.openai_agents_app:app", ("agents",)),
    "anthropic": App("examples.anthropic_app:app", ("anthropic",)),
    "mcp": App("examples.openai_agents_mcp_app:app", ("agents", "mcp")),
    "mcp-server": App("examples.mcp_server:app", ("mcp",)),
    "smolagents": App("examples.smolagents_app:app", ("smolagents", "openinference.instrumentation.smolagents")),
    "agno": App("examples.agno_app:app", ("agno", "openinference.instrumentation.agno")),
}


@dataclass(frozen=True)
class Run:
    """One request to a framework app: what the client got and what the server logged."""

    test_id: str
    response: httpx2.Response
    server: ExampleServer

    @property
    def events(self) -> list[dict]:
        return self.server.envelopes(self.test_id)

    def lines(self, boundary: str) -> list[dict]:
        return [e for e in self.events if e["boundary"] == boundary]

    @property
    def tools(self) -> list[dict]:
        """The tool call responses, in the order they were written."""
        return self.lines("backend.tool.call.response")

    @property
    def text(self) -> str:
        """The answer the client read."""
        return deltas(self.response.text)

    @property
    def sse_error(self) -> str | None:
        """The app's ``error`` event (the exception's class name), if the run failed."""
        return next((data["error"] for name, data in sse_events(self.response.text) if name == "error"), None)

    def listed(self) -> dict:
        """This test's row of the real ``cvdiag tests --json`` on the server's log."""
        result = _cvdiag_cli("tests", str(self.server.log), "--json")
        assert result.returncode == 0, result.stderr
        (row,) = [row for row in json.loads(result.stdout) if row["test_id"] == self.test_id]
        return row

    def diagnose(self, *extra: str) -> dict:
        """The verdict of the real ``cvdiag diagnose`` on the server's log."""
        result = _cvdiag_cli("diagnose", self.test_id, str(self.server.log), "--json", *extra)
        assert result.returncode == 0, result.stderr
        (verdict,) = json.loads(result.stdout)
        assert verdict["test_id"] == self.test_id
        return verdict


def free_port() -> int:
    """A loopback port with nothing listening on it: a server that was never started."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class Servers:
    """A module's servers, booted together and stopped at the module's end."""

    def __init__(self, aimock: Aimock, factory: pytest.TempPathFactory, config: pytest.Config) -> None:
        self._aimock, self._factory, self._config = aimock, factory, config
        self._stack = ExitStack()
        self.started: dict[str, ExampleServer] = {}

    def app_env(self) -> dict[str, str]:
        """A framework app's settings: aimock as every provider, tool errors to the model."""
        return {
            "OPENAI_BASE_URL": f"{self._aimock.url}/v1",
            "OPENAI_API_KEY": "sk-test-e2e-placeholder",
            "ANTHROPIC_BASE_URL": self._aimock.url,
            "ANTHROPIC_API_KEY": "sk-ant-test-e2e-placeholder",
            "OPENAI_AGENTS_DISABLE_TRACING": "1",
            "EXAMPLE_TOOL_ERRORS": "model",
            "EXAMPLE_SLOW_TOOL_S": str(SLOW_TOOL_S),
            "EXAMPLE_RECURSION_LIMIT": "10",  # LangGraph: 5 model calls, then GraphRecursionError
        }

    def start(self, apps: dict[str, tuple[str, dict[str, str]]]) -> None:
        """Boot ``{name: (kind in APPS, env)}`` (those whose packages are installed) and wait
        until each one answers."""
        serving = {
            name: serve_app(APPS[kind].app, env, self._factory.mktemp(name), self._config)
            for name, (kind, env) in apps.items()
            if not APPS[kind].missing
        }
        with ThreadPoolExecutor(max_workers=BOOTS_AT_ONCE) as pool:
            booting = {name: pool.submit(cm.__enter__) for name, cm in serving.items()}
        for cm in serving.values():
            self._stack.push(cm)
        for name, future in booting.items():
            self.started[name] = future.result()

    def server(self, name: str) -> ExampleServer:
        if name not in self.started:
            missing = APPS[name].missing
            _unavailable(f"{name} needs {', '.join(missing)}; install the extra: pip install -e '.[frameworks]'")
        return self.started[name]

    def __enter__(self) -> Servers:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._stack.close()


@pytest.fixture(name="ask")
def ask_fixture(servers: Servers, cvdiag_test_id: str) -> Callable[..., Run]:
    """``ask(app, message, route="/chat")``: one request to that app of the module's
    ``servers``, as a client would send it (import ``ask_fixture`` to use it)."""

    def run(app: str, message: str, route: str = "/chat") -> Run:
        server = servers.server(app)
        # No x-test-id here on purpose: the plugin's propagation adds this test's id.
        response = httpx2.get(f"{server.url}{route}", params={"q": message}, timeout=30.0)
        return Run(cvdiag_test_id, response, server)

    return run
