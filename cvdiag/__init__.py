"""cvdiag: explainable failures for ASGI agent backends.

This file lists the calls an application makes. Names are imported on first use, so
that the ``cvdiag`` command (the read side) starts without Starlette or structlog, and
so that importing cvdiag with nothing set is inert: no thread, no handler, no output.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from cvdiag.contract.schema import register_boundary
    from cvdiag.write.config import configure
    from cvdiag.write.context import current_context, request_context
    from cvdiag.write.emitter import emit, flush, stats
    from cvdiag.write.instrumentation import instrument, uninstrument
    from cvdiag.write.llm_routes import register_llm_endpoint
    from cvdiag.write.middleware import CvdiagMiddleware
    from cvdiag.write.propagation import instrument_httpx, uninstrument_httpx, wrap
    from cvdiag.write.scopes import agent_scope, llm_call

# What an application calls. Types, exceptions, logging hooks and helpers stay in their
# modules (listed in docs/configuration.md, "Beyond the top level"); test helpers are
# in ``cvdiag.testing``.
_WHERE = {
    "CvdiagMiddleware": "write.middleware",
    "configure": "write.config",
    "current_context": "write.context",
    "request_context": "write.context",
    "emit": "write.emitter",
    "flush": "write.emitter",
    "stats": "write.emitter",
    "register_llm_endpoint": "write.llm_routes",
    "instrument": "write.instrumentation",
    "uninstrument": "write.instrumentation",
    "instrument_httpx": "write.propagation",
    "uninstrument_httpx": "write.propagation",
    "wrap": "write.propagation",
    "register_boundary": "contract.schema",
    "agent_scope": "write.scopes",
    "llm_call": "write.scopes",
}

__all__ = [
    "CvdiagMiddleware",
    "agent_scope",
    "configure",
    "current_context",
    "emit",
    "flush",
    "instrument",
    "instrument_httpx",
    "llm_call",
    "register_boundary",
    "register_llm_endpoint",
    "request_context",
    "stats",
    "uninstrument",
    "uninstrument_httpx",
    "wrap",
]


def __getattr__(name: str) -> Any:
    module = _WHERE.get(name)
    if module is None:
        raise AttributeError(f"module 'cvdiag' has no attribute {name!r}")
    value = getattr(importlib.import_module(f".{module}", __name__), name)
    globals()[name] = value  # later lookups skip this function
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_WHERE))
