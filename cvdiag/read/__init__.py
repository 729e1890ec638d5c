"""The read side: finding ``CVDIAG`` lines in any log and correlating them by test id.

It imports the contract and never the emit side, Starlette or structlog, so the
``cvdiag`` command starts fast and runs where the backend's dependencies are absent.
"""
