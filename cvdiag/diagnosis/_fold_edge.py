"""Folding the edge headers any line may carry (cf-ray, cf-mitigated, via, retry-after):
the marks a CDN, a bot wall or a proxy leaves between the harness and the backend."""

from __future__ import annotations

import math
from collections.abc import Mapping

from cvdiag.diagnosis._convert import as_int, as_text
from cvdiag.diagnosis._facts import Facts
from cvdiag.diagnosis._picks import earliest
from cvdiag.diagnosis._shapes import MAX_STATUSES

_MAX_RAYS_PER_LAYER = 4
_MITIGATIONS = frozenset({"challenge", "jschallenge", "block"})
_PROXIES = ("squid", "varnish", "nginx-proxy")
# Where each boundary carries an HTTP status, for the retry-after sub-cause of edge-interference.
_STATUS_KEYS = {
    "backend.response.complete": "http_status",
    "probe.navigate.complete": "http_status",
    "probe.network.response": "status",
    "probe.network.error": "response_status",
    "aimock.response.complete": "http_status",
}


def fold_edge(ev: Facts, layer: str, boundary: str, md: Mapping, edge: Mapping, key: int | None) -> None:
    """Fold the edge headers of one envelope that has any."""
    mitigated = as_text(edge.get("cf-mitigated"))
    if mitigated and mitigated.strip().lower() in _MITIGATIONS:
        ev.edge_mitigated = earliest(ev.edge_mitigated, key, (layer, boundary, mitigated.strip().lower()))
    via = as_text(edge.get("via"))
    if via and any(proxy in via.lower() for proxy in _PROXIES):
        ev.edge_proxy = earliest(ev.edge_proxy, key, (layer, via))
    ray = as_text(edge.get("cf-ray"))
    if ray:
        _add_ray(ev, layer, ray, key)
    retry_after = as_text(edge.get("retry-after"))
    # The backend's own response headers are the app's, even relayed ones (a provider's
    # 429 with its cf-ray): only what reached the harness, or carries edge marks, counts.
    if not retry_after or layer == "backend" or not (ray or via or layer == "probe"):
        return
    status = as_int(md.get(_STATUS_KEYS.get(boundary, "")))
    if status is None or status < 400:
        return
    if ev.edge_retry is None:
        ev.edge_retry = {}
    pick = ev.edge_retry.get(status)
    if pick is None and len(ev.edge_retry) >= MAX_STATUSES:
        return
    ev.edge_retry[status] = earliest(pick, key, (layer, retry_after))


def _add_ray(ev: Facts, layer: str, ray: str, key: int | None) -> None:
    """Keep the few earliest distinct cf-rays per layer, whatever the arrival order (a
    ranking of several, not one first value: a keyless ray ranks after every keyed one)."""
    rank = key if key is not None else math.inf
    if ev.edge_rays is None:
        ev.edge_rays = {}
    rays = ev.edge_rays.setdefault(layer, {})
    if ray in rays:
        rays[ray] = min(rays[ray], rank)
        return
    rays[ray] = rank
    if len(rays) > _MAX_RAYS_PER_LAYER:
        del rays[max(rays, key=lambda r: (rays[r], r))]
