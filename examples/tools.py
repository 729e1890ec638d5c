"""The tool every framework example offers the model: it fails, as real tools do."""

from __future__ import annotations


class OrderServiceDown(RuntimeError):
    """The order service behind the tool is unavailable."""


def lookup_order(order_id: str) -> str:
    """Look up the status of an order by its id."""
    raise OrderServiceDown(f"order service unavailable while looking up {order_id}")
