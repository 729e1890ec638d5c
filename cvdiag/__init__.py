"""cvdiag: explainable failures for ASGI agent backends.

Importing cvdiag with nothing set is inert: no thread, no handler, no output.
"""

from .asgi import CvdiagMiddleware
from .config import Settings, configure, get_settings
from .context import RequestContext, current_context, request_context
from .emitter import CvdiagError, emit, flush, stats
from .ids import new_test_id, normalize_test_id
from .logcontext import CvdiagLogFilter, add_cvdiag_context
from .schema import OUTBOUND_ALLOW_LIST, register_boundary
from .scopes import LLMCall, agent_scope, llm_call
from .scrub import scrub

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
    "current_context",
    "emit",
    "flush",
    "get_settings",
    "llm_call",
    "new_test_id",
    "normalize_test_id",
    "register_boundary",
    "request_context",
    "scrub",
    "stats",
]
