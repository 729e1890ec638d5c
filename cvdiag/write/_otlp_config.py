"""Where OTLP export goes, from the standard ``OTEL_EXPORTER_OTLP_*`` variables.

Read once when export starts. Every problem is one line for the ``cvdiag`` logger,
naming the variable (never a header's value): a wrong endpoint or an unknown protocol
turns that signal's export off, a malformed header is left out; the log sink is never
affected.
"""

from __future__ import annotations

import re
import urllib.parse
from collections.abc import Mapping
from dataclasses import dataclass, field

PROTOBUF = "http/protobuf"
JSON = "http/json"
PROTOCOLS = (PROTOBUF, JSON)
DEFAULT_ENDPOINT = "http://localhost:4318"
DEFAULT_TIMEOUT_S = 10.0
#: The signal paths of OTLP/HTTP, appended to ``OTEL_EXPORTER_OTLP_ENDPOINT``.
PATHS = {"logs": "/v1/logs", "traces": "/v1/traces"}
_TOKEN = re.compile(r"^[!#$%&'*+.^_`|~0-9A-Za-z-]+$")


@dataclass(frozen=True, slots=True)
class Target:
    """One signal's destination: None of it when that signal's export is off."""

    signal: str
    url: str | None
    protocol: str
    headers: Mapping[str, str]
    timeout_s: float
    problems: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class Resource:
    """The resource attributes records and spans carry (``OTEL_SERVICE_NAME``,
    ``OTEL_RESOURCE_ATTRIBUTES``: a ``test.id`` set by the pytest plugin among them)."""

    attributes: tuple[tuple[str, str], ...] = field(default=())


def _var(environ: Mapping[str, str], signal: str, name: str) -> tuple[str, str | None]:
    """The per-signal variable when set, else the general one: (its name, its value)."""
    specific = f"OTEL_EXPORTER_OTLP_{signal.upper()}_{name}"
    value = (environ.get(specific) or "").strip()
    if value:
        return specific, value
    general = f"OTEL_EXPORTER_OTLP_{name}"
    return general, (environ.get(general) or "").strip() or None


def _headers(raw: str, variable: str, problems: list[str]) -> dict[str, str]:
    """``k=v,k2=v2`` with URL-encoded values (the OTLP exporter spec); a bad entry is left out."""
    headers: dict[str, str] = {}
    for number, entry in enumerate(raw.split(","), 1):
        if not entry.strip():
            continue
        key, sep, value = entry.partition("=")
        key = urllib.parse.unquote(key).strip()
        value = urllib.parse.unquote(value).strip()
        if not sep or not _TOKEN.match(key):
            problems.append(f"{variable}: entry {number} is not name=value with a valid header name; left out")
        elif any(c in value for c in "\r\n\0"):
            problems.append(f"{variable}: the value of {key[:64]!r} holds a line break or NUL; left out")
        else:
            headers[key] = value
    return headers


def target(signal: str, environ: Mapping[str, str]) -> Target:
    """The destination of ``signal`` (``logs`` or ``traces``)."""
    problems: list[str] = []
    name, protocol = _var(environ, signal, "PROTOCOL")
    protocol = (protocol or PROTOBUF).lower()
    url: str | None
    if protocol not in PROTOCOLS:
        problems.append(
            f"{name}={protocol[:32]!r} is not one cvdiag sends ({', '.join(PROTOCOLS)}); {signal} not exported"
        )
        url = None
    else:
        specific = f"OTEL_EXPORTER_OTLP_{signal.upper()}_ENDPOINT"
        given = (environ.get(specific) or "").strip()
        variable = specific
        if not given:
            variable = "OTEL_EXPORTER_OTLP_ENDPOINT"
            base = (environ.get(variable) or DEFAULT_ENDPOINT).strip()
            given = base.rstrip("/") + PATHS[signal]
        url = given
        try:
            parts = urllib.parse.urlsplit(given)
            parts.port  # noqa: B018 (raises on a port that is not a number)
            good = parts.scheme in ("http", "https") and bool(parts.hostname)
        except ValueError:  # a malformed IPv6 host, a port that is not a number
            good = False
        if not good:
            problems.append(f"{variable}={given[:128]!r} is not an http(s) URL; {signal} not exported")
            url = None
    headers: dict[str, str] = {}
    for variable in ("OTEL_EXPORTER_OTLP_HEADERS", f"OTEL_EXPORTER_OTLP_{signal.upper()}_HEADERS"):
        raw = environ.get(variable)
        if raw:
            headers.update(_headers(raw, variable, problems))
    name, raw_timeout = _var(environ, signal, "TIMEOUT")
    timeout_s = DEFAULT_TIMEOUT_S
    if raw_timeout:
        try:
            timeout_s = max(0.001, float(raw_timeout) / 1000.0)
        except ValueError:
            problems.append(f"{name}={raw_timeout[:32]!r} is not milliseconds; using {DEFAULT_TIMEOUT_S:.0f} s")
    return Target(signal, url, protocol, headers, timeout_s, tuple(problems))


def resource(environ: Mapping[str, str], version: str) -> Resource:
    """``service.name`` and the ``OTEL_RESOURCE_ATTRIBUTES`` entries (malformed ones skipped)."""
    found: dict[str, str] = {}
    for entry in (environ.get("OTEL_RESOURCE_ATTRIBUTES") or "").split(","):
        key, sep, value = entry.partition("=")
        key = urllib.parse.unquote(key).strip()
        if sep and key:
            found[key] = urllib.parse.unquote(value).strip()[:256]
    service = (environ.get("OTEL_SERVICE_NAME") or "").strip()
    if service:
        found["service.name"] = service[:256]
    found.setdefault("service.name", "unknown_service")
    found["telemetry.sdk.name"] = "cvdiag"
    found["telemetry.sdk.language"] = "python"
    found["telemetry.sdk.version"] = version
    return Resource(tuple(found.items()))
