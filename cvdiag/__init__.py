"""cvdiag: explainable failures for ASGI agent backends."""
