"""The current test id and slug on the application's own log lines.

Both are opt-in: cvdiag never installs them (it never changes the host's logging).
"""

from __future__ import annotations

import logging
from collections.abc import MutableMapping
from typing import Any

from cvdiag.write.context import current_context


def add_cvdiag_context(_logger: Any, _name: str, event_dict: MutableMapping[str, Any]) -> MutableMapping[str, Any]:
    """structlog processor: add ``test_id`` and ``slug`` when a context is bound."""
    ctx = current_context()
    if ctx is not None:
        event_dict.setdefault("test_id", ctx.test_id)
        event_dict.setdefault("slug", ctx.slug)
    return event_dict


class CvdiagLogFilter(logging.Filter):
    """stdlib filter: sets ``record.test_id`` and ``record.slug`` (``-`` outside a
    request), so a format string can say ``%(test_id)s``. It never drops a record."""

    def filter(self, record: logging.LogRecord) -> bool:
        ctx = current_context()
        record.test_id = ctx.test_id if ctx is not None else "-"
        record.slug = ctx.slug if ctx is not None else "-"
        return True
