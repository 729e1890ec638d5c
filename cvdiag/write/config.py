"""Settings from the environment (spec section 4) and ``configure()``.

Reading settings starts nothing: no thread, no handler. The emitter reads the current
``Settings`` on every envelope, so a change takes effect on the next one.
"""

from __future__ import annotations

import inspect
import logging
import os
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import ParamSpec

from cvdiag.contract.schema import Tier
from cvdiag.write.context import set_default_slug

_P = ParamSpec("_P")

DEFAULT_QUEUE_SIZE = 10_000
#: Debug disarms itself after this long or this many envelopes (spec section 4).
DEBUG_MAX_SECONDS = 600.0
DEBUG_MAX_ENVELOPES = 10_000
#: Deployment labels under which debug may be armed; anything else fails closed.
DEBUG_SAFE_LABELS = frozenset({"development", "dev", "test", "testing", "staging", "local", "ci", "preview"})
_LABEL_FALLBACKS = ("SHOWCASE_ENV", "RAILWAY_ENVIRONMENT_NAME", "PYTHON_ENV", "ENVIRONMENT")
_TRUE = frozenset({"1", "true", "yes", "on"})
_FALSE = frozenset({"0", "false", "no", "off"})

log = logging.getLogger("cvdiag")


@dataclass(frozen=True, slots=True)
class Settings:
    """One whole configuration. ``tier`` is the effective tier after the debug guard."""

    enabled: bool = False
    tier: Tier = Tier.DEFAULT
    requested_tier: Tier = Tier.DEFAULT
    env_label: str | None = None
    debug_allow_list: frozenset[str] = frozenset()
    stdout: bool = True
    file: str | None = None
    queue_size: int = DEFAULT_QUEUE_SIZE
    strict: bool = False
    slug: str | None = None
    #: Every envelope also an OTLP log record (``CVDIAG_OTLP``; docs/opentelemetry.md).
    otlp: bool = False
    #: ... and spans of requests, agents, LLM attempts and tool calls (``CVDIAG_OTLP_SPANS``).
    otlp_spans: bool = False
    #: When debug was armed (monotonic seconds); the disarm clock starts here.
    debug_armed_at: float = field(default=0.0, compare=False)

    def tier_for(self, slug: str) -> Tier:
        """The tier for one service: debug only for allow-listed slugs when a list is set."""
        if self.tier is Tier.DEBUG and self.debug_allow_list and slug not in self.debug_allow_list:
            return Tier.VERBOSE
        return self.tier


def _truthy(raw: str | None) -> bool:
    return raw is not None and raw.strip().lower() in _TRUE


def _env_label(environ: Mapping[str, str]) -> str | None:
    for name in ("CVDIAG_ENV", *_LABEL_FALLBACKS):
        value = (environ.get(name) or "").strip()
        if value:
            return value
    return None


def _warn_unclear_switch(environ: Mapping[str, str], enabled: bool) -> None:
    """``CVDIAG_ENABLED=maybe`` (neither on nor off) is a slip to say, not a silent "off":
    the one warning a disabled cvdiag gives, so that the user is not left wondering."""
    for name in ("CVDIAG_ENABLED", "CVDIAG_BACKEND_EMITTER"):
        raw = (environ.get(name) or "").strip()
        if raw and raw.lower() not in _TRUE | _FALSE:
            state = "on (the other switch is)" if enabled else "off"
            log.warning("cvdiag: %s=%r is neither on (1, true, yes, on) nor off (0, false, no, off); cvdiag is %s",
                        name, raw[:32], state)  # fmt: skip


def _requested_tier(environ: Mapping[str, str], warnings: list[str]) -> Tier:
    raw = environ.get("CVDIAG_TIER")
    tier = Tier.parse(raw) if raw and raw.strip() else Tier.DEFAULT
    if tier is None:
        warnings.append(f"cvdiag: CVDIAG_TIER={raw[:64]!r} is not default, verbose or debug; using default")
        tier = Tier.DEFAULT
    if _truthy(environ.get("CVDIAG_VERBOSE")):
        tier = max(tier, Tier.VERBOSE)
    if _truthy(environ.get("CVDIAG_DEBUG")):
        tier = Tier.DEBUG
    return tier


def _guard_debug(requested: Tier, label: str | None) -> Tier:
    """Debug only under a safe deployment label; otherwise fail closed to default."""
    if requested is not Tier.DEBUG:
        return requested
    if label is not None and label.strip().lower() in DEBUG_SAFE_LABELS:
        return Tier.DEBUG
    why = (
        "no deployment label is set"
        if label is None
        else f"the deployment label {label.strip()[:64]!r} is not a safe one"
    )
    log.warning(
        "cvdiag: debug tier refused because %s (set CVDIAG_ENV to one of %s); using default tier",
        why,
        ", ".join(sorted(DEBUG_SAFE_LABELS)),
    )
    return Tier.DEFAULT


def _slug_list(raw: str | Iterable[str] | None) -> frozenset[str]:
    if raw is None:
        return frozenset()
    items = raw.split(",") if isinstance(raw, str) else raw
    return frozenset(s.strip().lower() for s in items if s and s.strip())


def _queue_size(raw: str | None, warnings: list[str]) -> int:
    try:
        return max(1, int(raw)) if raw else DEFAULT_QUEUE_SIZE
    except ValueError:
        warnings.append(f"cvdiag: CVDIAG_QUEUE_SIZE={raw[:32]!r} is not a number; using {DEFAULT_QUEUE_SIZE}")
        return DEFAULT_QUEUE_SIZE


def build_settings(
    *,
    enabled: bool | None = None,
    tier: str | Tier | None = None,
    environ: Mapping[str, str] | None = None,
    stdout: bool | None = None,
    file: str | os.PathLike[str] | None = None,
    env: str | None = None,
    debug_allow_list: str | Iterable[str] | None = None,
    queue_size: int | None = None,
    strict: bool | None = None,
    slug: str | None = None,
    otlp: bool | None = None,
    otlp_spans: bool | None = None,
) -> Settings:
    """Settings from explicit arguments, the rest read from ``environ``.

    Bad values are warned about only when enabled: a disabled cvdiag prints nothing.
    """
    environ = os.environ if environ is None else environ
    warnings: list[str] = []
    if enabled is None:
        enabled = _truthy(environ.get("CVDIAG_ENABLED")) or _truthy(environ.get("CVDIAG_BACKEND_EMITTER"))
        _warn_unclear_switch(environ, enabled)
    if tier is None:
        requested = _requested_tier(environ, warnings)
    elif isinstance(tier, Tier):
        requested = tier
    else:
        parsed = Tier.parse(tier)
        if parsed is None:
            raise ValueError(f"tier must be 'default', 'verbose' or 'debug', got {tier!r}")
        requested = parsed
    label = env if env is not None else _env_label(environ)
    if stdout is None:
        stdout = (environ.get("CVDIAG_STDOUT") or "").strip().lower() not in _FALSE
    if file is None:
        file = environ.get("CVDIAG_FILE") or None
    if queue_size is None:
        queue_size = _queue_size(environ.get("CVDIAG_QUEUE_SIZE"), warnings)
    effective = _guard_debug(requested, label) if enabled else requested
    if enabled:
        for warning in warnings:
            log.warning("%s", warning)
    return Settings(
        enabled=bool(enabled),
        tier=effective,
        requested_tier=requested,
        env_label=label,
        debug_allow_list=_slug_list(
            debug_allow_list if debug_allow_list is not None else environ.get("CVDIAG_DEBUG_ALLOW_LIST")
        ),
        stdout=bool(stdout),
        file=os.fspath(file) if file else None,
        queue_size=queue_size,
        strict=strict if strict is not None else _truthy(environ.get("CVDIAG_STRICT")),
        slug=slug if slug is not None else (environ.get("CVDIAG_SLUG") or None),
        otlp=otlp if otlp is not None else _truthy(environ.get("CVDIAG_OTLP")),
        otlp_spans=otlp_spans if otlp_spans is not None else _truthy(environ.get("CVDIAG_OTLP_SPANS")),
        debug_armed_at=time.monotonic(),
    )


class _Current:
    """The one mutable holder of the active settings (read on every envelope)."""

    __slots__ = ("debug_count", "settings")

    def __init__(self, settings: Settings) -> None:
        self.reset(settings)

    def reset(self, settings: Settings) -> None:
        """Make ``settings`` active with a fresh debug budget."""
        self.settings = settings
        self.debug_count = 0


_current = _Current(Settings())
#: The holder itself, for the emit path and the middleware: ``current.settings`` is
#: ``get_settings()`` without a Python frame (a frame costs more than the read).
current = _current


def get_settings() -> Settings:
    """The active configuration."""
    return _current.settings


def apply_settings(settings: Settings) -> Settings:
    """Make ``settings`` the active configuration exactly (e.g. to restore a saved one)."""
    _current.reset(settings)
    set_default_slug(settings.slug)
    return settings


def _applying(build: Callable[_P, Settings]) -> Callable[_P, Settings]:
    """``build``'s arguments, its result made active: one argument list for both."""

    def configure(*args: _P.args, **kwargs: _P.kwargs) -> Settings:
        """Replace the whole configuration: arguments given win, the rest is read from
        ``environ`` (default ``os.environ``). ``configure()`` re-reads the environment.

        Takes ``build_settings``' arguments. Raises ValueError only for an explicit ``tier``
        that is not a tier name; the debug guard applies however debug was asked for.
        """
        try:
            signature.bind(*args, **kwargs)
        except TypeError as exc:  # named for the call the user made, not the one behind it
            raise TypeError(f"configure(): {exc}") from None
        return apply_settings(build(*args, **kwargs))

    signature = inspect.signature(build)
    configure.__signature__ = signature  # type: ignore[attr-defined]
    return configure


configure = _applying(build_settings)


def count_debug_envelope() -> None:
    """Disarm debug after its budget of time or envelopes (called per debug-tier envelope)."""
    _current.debug_count += 1
    s = _current.settings
    if _current.debug_count > DEBUG_MAX_ENVELOPES or time.monotonic() - s.debug_armed_at > DEBUG_MAX_SECONDS:
        log.warning(
            "cvdiag: debug tier disarmed after %d envelopes / %.0f s; using default tier",
            _current.debug_count,
            time.monotonic() - s.debug_armed_at,
        )
        _current.settings = replace(s, tier=Tier.DEFAULT)


apply_settings(build_settings())
