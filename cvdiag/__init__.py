"""cvdiag: explainable failures for ASGI agent backends.

This file is the whole public API. Names are imported on first use, so that the
``cvdiag`` command (the read side) starts without Starlette or structlog, and so
that importing cvdiag with nothing set is inert: no thread, no handler, no output.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from cvdiag.contract.ids import new_test_id, normalize_test_id
    from cvdiag.contract.schema import OUTBOUND_ALLOW_LIST, register_boundary
    from cvdiag.write.config import Settings, configure, get_settings
    from cvdiag.write.context import RequestContext, current_context, request_context
    from cvdiag.write.emitter import CvdiagError, emit, flush, stats
    from cvdiag.write.llm_routes import register_llm_endpoint
    from cvdiag.write.logcontext import CvdiagLogFilter, add_cvdiag_context
    from cvdiag.write.middleware import CvdiagMiddleware
    from cvdiag.write.propagation import copy_context, httpx_hooks, instrument_httpx, uninstrument_httpx, wrap
    from cvdiag.write.scopes import LLMCall, agent_scope, llm_call
    from cvdiag.write.scrubber import scrub

_WHERE = {
    "CvdiagMiddleware": "write.middleware",
    "Settings": "write.config",
    "configure": "write.config",
    "get_settings": "write.config",
    "RequestContext": "write.context",
    "current_context": "write.context",
    "request_context": "write.context",
    "CvdiagError": "write.emitter",
    "emit": "write.emitter",
    "flush": "write.emitter",
    "stats": "write.emitter",
    "new_test_id": "contract.ids",
    "normalize_test_id": "contract.ids",
    "register_llm_endpoint": "write.llm_routes",
    "CvdiagLogFilter": "write.logcontext",
    "add_cvdiag_context": "write.logcontext",
    "copy_context": "write.propagation",
    "httpx_hooks": "write.propagation",
    "instrument_httpx": "write.propagation",
    "uninstrument_httpx": "write.propagation",
    "wrap": "write.propagation",
    "OUTBOUND_ALLOW_LIST": "contract.schema",
    "register_boundary": "contract.schema",
    "LLMCall": "write.scopes",
    "agent_scope": "write.scopes",
    "llm_call": "write.scopes",
    "scrub": "write.scrubber",
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
