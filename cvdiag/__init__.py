"""cvdiag: explainable failures for ASGI agent backends.

This file is the whole public API. Names are imported on first use, so that the
``cvdiag`` command (the read side) starts without Starlette or structlog, and so
that importing cvdiag with nothing set is inert: no thread, no handler, no output.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .asgi import CvdiagMiddleware
    from .config import Settings, configure, get_settings
    from .context import RequestContext, current_context, request_context
    from .emitter import CvdiagError, emit, flush, stats
    from .ids import new_test_id, normalize_test_id
    from .llm_routes import register_llm_endpoint
    from .logcontext import CvdiagLogFilter, add_cvdiag_context
    from .propagation import copy_context, httpx_hooks, instrument_httpx, uninstrument_httpx, wrap
    from .schema import OUTBOUND_ALLOW_LIST, register_boundary
    from .scopes import LLMCall, agent_scope, llm_call
    from .scrubber import scrub

_WHERE = {
    "CvdiagMiddleware": "asgi",
    "Settings": "config",
    "configure": "config",
    "get_settings": "config",
    "RequestContext": "context",
    "current_context": "context",
    "request_context": "context",
    "CvdiagError": "emitter",
    "emit": "emitter",
    "flush": "emitter",
    "stats": "emitter",
    "new_test_id": "ids",
    "normalize_test_id": "ids",
    "register_llm_endpoint": "llm_routes",
    "CvdiagLogFilter": "logcontext",
    "add_cvdiag_context": "logcontext",
    "copy_context": "propagation",
    "httpx_hooks": "propagation",
    "instrument_httpx": "propagation",
    "uninstrument_httpx": "propagation",
    "wrap": "propagation",
    "OUTBOUND_ALLOW_LIST": "schema",
    "register_boundary": "schema",
    "LLMCall": "scopes",
    "agent_scope": "scopes",
    "llm_call": "scopes",
    "scrub": "scrubber",
}

__all__ = [
    "OUTBOUND_ALLOW_LIST",
    "CvdiagError",
    "CvdiagLogFilter",
    "CvdiagMiddleware",
    "LLMCall",
    "RequestContext",
    "Settings",
    "add_cvdiag_context",
    "agent_scope",
    "configure",
    "copy_context",
    "current_context",
    "emit",
    "flush",
    "get_settings",
    "httpx_hooks",
    "instrument_httpx",
    "llm_call",
    "new_test_id",
    "normalize_test_id",
    "register_boundary",
    "register_llm_endpoint",
    "request_context",
    "scrub",
    "stats",
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
