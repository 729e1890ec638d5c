"""Which outgoing HTTP requests are LLM API calls, and to whom.

``recognise`` looks at the method, host and path first (cheap string tests, no body),
and only for a path that names an LLM API does it look into the request body, for the
model and whether a stream was asked for (a bounded regex search, never a JSON parse
of a prompt). Recognised: OpenAI chat completions, Responses, completions and
embeddings on any host (OpenAI, Azure deployments, OpenRouter, Groq, Together, vLLM,
Ollama's and LiteLLM's OpenAI-compatible paths), Anthropic messages, Gemini
``generateContent`` / ``streamGenerateContent``; plus the routes an application
registers with ``register_llm_endpoint`` for an in-house gateway.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

from cvdiag.write._llm_stream import API_NAMES
from cvdiag.write.dialects import DIALECTS

__all__ = ["LLMRoute", "clear_llm_endpoints", "recognise", "register_llm_endpoint"]

#: Host suffix -> provider name; an unknown host gets ``<family>-compatible``.
_HOST_PROVIDERS: tuple[tuple[str, str], ...] = tuple(host for d in DIALECTS for host in d.hosts)
_FAMILY = {d.api: d.family for d in DIALECTS}
#: Path suffix -> api, most specific first (``/chat/completions`` before ``/completions``).
_SUFFIXES: tuple[tuple[str, str], ...] = tuple(
    sorted(((suffix, d.api) for d in DIALECTS for suffix in d.path_suffixes), key=lambda pair: -len(pair[0]))
)
#: The formats whose path names the model and the stream (Gemini), by their path's marker.
_PATH_ROUTED = tuple(d for d in DIALECTS if d.path_route is not None)
_AZURE_DEPLOYMENT = re.compile(r"/deployments/([^/]{1,128})/")
#: The body is searched for the model and stream flag only up to this size.
_BODY_SCAN_MAX = 8 << 20
_MODEL = re.compile(rb'"model"\s*:\s*"([^"\\]{1,128})"')
_STREAM_TRUE = re.compile(rb'"stream"\s*:\s*true')


@dataclass(frozen=True, slots=True)
class LLMRoute:
    """An outgoing request recognised as an LLM call."""

    provider: str
    api: str
    model: str | None
    stream: bool


@dataclass(frozen=True, slots=True)
class _Endpoint:
    path: str
    api: str
    provider: str
    host: str | None


_endpoints: list[_Endpoint] = []


def register_llm_endpoint(path: str, *, api: str, provider: str, host: str | None = None) -> None:
    """Recognise POSTs whose path ends with ``path`` as LLM calls speaking ``api``.

    For an in-house gateway: ``register_llm_endpoint("/llm/v2/chat", api="chat.completions",
    provider="acme-gateway", host="llm.internal")``. ``api`` names the wire format the
    gateway speaks, one of ``chat.completions``, ``responses``, ``completions``,
    ``embeddings``, ``messages``, ``generate_content``; ``host``, when given, must match
    exactly (case-insensitive). Registered endpoints are tried before the built-in ones.
    Raises ValueError on a bad definition.
    """
    if api not in API_NAMES:
        raise ValueError(f"api must be one of {', '.join(API_NAMES)}, got {api!r}")
    if not isinstance(path, str) or not path.startswith("/"):
        raise ValueError(f"path must be a URL path starting with '/', got {path!r}")
    if not isinstance(provider, str) or not provider.strip():
        raise ValueError("provider must be a non-empty name")
    endpoint = _Endpoint(path.rstrip("/") or "/", api, provider.strip()[:64], host.lower() if host else None)
    if endpoint not in _endpoints:
        _endpoints.insert(0, endpoint)


def clear_llm_endpoints() -> None:
    """Forget every ``register_llm_endpoint`` (for tests)."""
    _endpoints.clear()


def _provider(host: str, api: str) -> str:
    for suffix, name in _HOST_PROVIDERS:
        if host.endswith(suffix):
            return name
    return f"{_FAMILY[api]}-compatible"


def _api_of(path: str) -> str | None:
    for suffix, api in _SUFFIXES:
        if path.endswith(suffix):
            return api
    return None


def _body_facts(read_body: Callable[[], bytes | None]) -> tuple[str | None, bool]:
    content = read_body()
    if not content:
        return None, False
    window = content[:_BODY_SCAN_MAX]
    model = _MODEL.search(window)
    return (model.group(1).decode("utf-8", "replace") if model else None), bool(_STREAM_TRUE.search(window))


def recognise(method: str, host: str, path: str, read_body: Callable[[], bytes | None]) -> LLMRoute | None:
    """The LLM route of a request, or None when it is not an LLM call.

    ``read_body`` gives the request body when it is in memory (None for a streamed
    upload); it is called only for a request whose path names an LLM API.
    Only a POST to an LLM path is looked at further; for the generic OpenAI-style paths
    the body must name a model too, so an unrelated ``POST /embeddings`` is left alone.
    """
    if method != "POST":
        return None
    path = path.rstrip("/")
    host = host.lower()
    for endpoint in _endpoints:
        if path.endswith(endpoint.path) and (endpoint.host is None or endpoint.host == host):
            model, stream = _body_facts(read_body)
            return LLMRoute(endpoint.provider, endpoint.api, model, stream)
    for dialect in _PATH_ROUTED:
        if dialect.path_marker is not None and dialect.path_marker in path:
            found = dialect.path_route(path)  # type: ignore[misc]
            return LLMRoute(_provider(host, dialect.api), dialect.api, *found) if found is not None else None
    api = _api_of(path)
    if api is None:
        return None
    model, stream = _body_facts(read_body)
    if model is None:
        deployment = _AZURE_DEPLOYMENT.search(path)
        if deployment is None:
            return None
        model = deployment.group(1)
    return LLMRoute(_provider(host, api), api, model, stream)
