"""The per-request context, carried by a contextvar.

The identity of a request is one immutable value in its own ContextVar (structlog's
PR #302 explains why a shared dict-in-a-var leaks); mutable per-request state, such
as the SSE sequence number, lives in the middleware's locals.
"""

from __future__ import annotations

import contextvars
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from types import MappingProxyType

from cvdiag.contract.ids import DEMO_RAW_MAX_CHARS, normalize_test_id, sanitize_slug
from cvdiag.contract.schema import DEFAULT_DEMO

#: The ``forward`` of a request that sent none of the forwarded headers.
EMPTY_FORWARD: Mapping[str, str] = MappingProxyType({})


@dataclass(frozen=True, slots=True)
class RequestContext:
    """Who a request is: the join key and where it runs.

    ``forward`` holds allow-listed inbound headers (x-diag-run-id, x-diag-hops,
    x-aimock-strict) to pass on to outbound calls; the id and slug are forwarded too.
    """

    test_id: str
    trace_id: str
    slug: str
    demo: str = DEFAULT_DEMO
    forward: Mapping[str, str] = field(default_factory=lambda: EMPTY_FORWARD)


_NEW = object.__new__
# The slots' own setters: a frozen dataclass's ``__init__`` goes through
# ``object.__setattr__`` once per field, which costs twice as much on every request.
_SET_TEST_ID = RequestContext.test_id.__set__  # type: ignore[attr-defined]
_SET_TRACE_ID = RequestContext.trace_id.__set__  # type: ignore[attr-defined]
_SET_SLUG = RequestContext.slug.__set__  # type: ignore[attr-defined]
_SET_DEMO = RequestContext.demo.__set__  # type: ignore[attr-defined]
_SET_FORWARD = RequestContext.forward.__set__  # type: ignore[attr-defined]


def make_context(test_id: str, slug: str, demo: str, forward: Mapping[str, str]) -> RequestContext:
    """``RequestContext(test_id, test_id, slug, demo, forward)``, for the middleware's hot
    path: the same frozen value, made without the dataclass ``__init__``."""
    ctx = _NEW(RequestContext)
    _SET_TEST_ID(ctx, test_id)
    _SET_TRACE_ID(ctx, test_id)
    _SET_SLUG(ctx, slug)
    _SET_DEMO(ctx, demo)
    _SET_FORWARD(ctx, forward)
    return ctx


_current: contextvars.ContextVar[RequestContext | None] = contextvars.ContextVar("cvdiag_request", default=None)


class _Default:
    """The slug an application configured (``configure(slug=)``); see ``resolve_slug``."""

    __slots__ = ("slug",)

    def __init__(self) -> None:
        self.slug: str | None = None


_default = _Default()


def current_context() -> RequestContext | None:
    """The bound request context, or None outside any."""
    return _current.get()


#: ``current_context`` and ``bind`` without a Python frame, for the emit path and the
#: middleware (a frame costs more than the read or the set).
context_now = _current.get
bind_now = _current.set


def set_default_slug(slug: str | None) -> None:
    _default.slug = sanitize_slug(slug) if slug else None


def resolve_slug(*candidates: str | bytes | None) -> str:
    """The first candidate that sanitizes to a valid slug, else the configured one, else ``unknown``."""
    for candidate in candidates:
        slug = sanitize_slug(candidate)
        if slug:
            return slug
    return _default.slug or "unknown"


def new_context(
    *,
    test_id: str | bytes | None = None,
    slug: str | bytes | None = None,
    demo: str = DEFAULT_DEMO,
    forward: Mapping[str, str] | None = None,
) -> RequestContext:
    """A context whose id is adopted from ``test_id`` or minted (spec section 5)."""
    tid = normalize_test_id(test_id)
    return RequestContext(
        test_id=tid,
        trace_id=tid,
        slug=resolve_slug(slug),
        demo=(demo or DEFAULT_DEMO)[:DEMO_RAW_MAX_CHARS],  # the emitter scrubs it, then cuts it
        forward=MappingProxyType(dict(forward)) if forward else EMPTY_FORWARD,
    )


def bind(ctx: RequestContext) -> contextvars.Token[RequestContext | None]:
    """Bind ``ctx``; give the token to ``unbind``."""
    return _current.set(ctx)


def unbind(token: contextvars.Token[RequestContext | None]) -> None:
    """Reset a ``bind``. A reset from another context (a task or thread that copied
    this one) raises ValueError in contextvars; there the binding dies with that
    context anyway, so it is ignored rather than raised into the application."""
    try:  # noqa: SIM105 (contextlib.suppress costs three times as much, on every request)
        _current.reset(token)
    except (ValueError, RuntimeError):
        pass


@contextmanager
def request_context(
    *, test_id: str | None = None, slug: str | None = None, demo: str = DEFAULT_DEMO
) -> Iterator[RequestContext]:
    """Bind a context outside HTTP (workers, scripts, tests) for the ``with`` block."""
    ctx = new_context(test_id=test_id, slug=slug, demo=demo)
    tokens = bind(ctx)
    try:
        yield ctx
    finally:
        unbind(tokens)
