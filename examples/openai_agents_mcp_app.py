"""The OpenAI Agents SDK with MCP tool servers behind cvdiag, with no code of cvdiag's
for the LLM or the tools: ``instrument_httpx()`` sees the LLM calls and the MCP traffic.

One agent per MCP server, each at ``/chat/NAME`` (``/chat`` is the first), connected for
the length of one answer as the SDK's docs show (``async with MCPServer...``). A server
is a URL (streamable HTTP) or a command line (stdio):

    EXAMPLE_MCP_SERVERS='orders=http://127.0.0.1:8001/mcp;local=python -m examples.mcp_server' \\
    CVDIAG_ENABLED=1 CVDIAG_TIER=verbose OPENAI_BASE_URL=http://127.0.0.1:4010/v1 OPENAI_API_KEY=mock \\
        uvicorn examples.openai_agents_mcp_app:app --port 8000

Settings: ``EXAMPLE_MCP_SERVERS`` (``NAME=URL-or-command``, ``;``-separated), and those of
``openai_agents_app``.
"""

from __future__ import annotations

import os
import shlex
from collections.abc import AsyncIterator

from agents import Agent, OpenAIResponsesModel
from agents.mcp import MCPServer, MCPServerStdio, MCPServerStreamableHttp

from examples.agent_sse import MODEL, Answer, agent_app
from examples.openai_agents_app import client, stream

SERVERS = dict(entry.split("=", 1) for entry in os.environ.get("EXAMPLE_MCP_SERVERS", "").split(";") if "=" in entry)


def mcp_server(name: str, target: str) -> MCPServer:
    if target.startswith(("http://", "https://")):
        return MCPServerStreamableHttp({"url": target}, name=name)
    command, *args = shlex.split(target)
    return MCPServerStdio({"command": command, "args": args}, name=name)


def mcp_agent(name: str, target: str) -> Answer:
    """The agent that uses the tools of the MCP server ``name``, connected per answer."""

    async def answer(message: str) -> AsyncIterator[str]:
        async with mcp_server(name, target) as server:
            agent = Agent(
                name="support",
                instructions="Answer the customer's question.",
                model=OpenAIResponsesModel(MODEL, openai_client=client),
                mcp_servers=[server],
            )
            async for delta in stream(agent, message):
                yield delta

    return answer


if not SERVERS:
    raise RuntimeError("EXAMPLE_MCP_SERVERS names no MCP server (NAME=URL-or-command;...)")
agents = {name: mcp_agent(name, target) for name, target in SERVERS.items()}
app = agent_app("openai-agents-mcp", "openai-agents-mcp-agent", MODEL, next(iter(agents.values())), more=agents)
