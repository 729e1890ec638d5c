"""The tools every framework example offers the model. They misbehave as real tools do:
one raises, one is slow, one answers the same thing however often it is asked.

``EXAMPLE_TOOL_ERRORS`` says what a framework example does when a tool raises: ``raise``
(the default) fails the run; ``model`` hands the error back to the model as the tool's
result, each framework in its own documented way, and lets the run go on.
``EXAMPLE_SLOW_TOOL_S`` is how long ``check_stock`` takes (1.5 s).
"""

from __future__ import annotations

import os
import time

#: True when a tool's error goes back to the model instead of failing the run.
TOOL_ERRORS_TO_MODEL = os.environ.get("EXAMPLE_TOOL_ERRORS", "raise").strip().lower() == "model"
SLOW_TOOL_S = float(os.environ.get("EXAMPLE_SLOW_TOOL_S", "1.5"))


class OrderServiceDown(RuntimeError):
    """The order service behind the tool is unavailable."""


def lookup_order(order_id: str) -> str:
    """Look up the status of an order by its id."""
    raise OrderServiceDown(f"order service unavailable while looking up {order_id}")


def check_stock(sku: str) -> str:
    """Check how many items of a product are in stock."""
    time.sleep(SLOW_TOOL_S)  # a slow warehouse system; the frameworks run sync tools in a thread
    return f"3 items of {sku} in stock"


def track_parcel(parcel_id: str) -> str:
    """Track a parcel by its id."""
    return f"parcel {parcel_id} is in transit"


TOOLS = [lookup_order, check_stock, track_parcel]
