"""History across CI runs: one row per test per run, kept in DuckDB (a file, the default)
or PostgreSQL (one server for a team), and the questions asked of it (flaky tests and
the classes behind their failures, a test's runs, classes over time, two runs compared).

Part of the read side: it may use the contract, the read side and diagnosis, never the
emit side. ``record`` turns logs and a CI's environment into rows, ``store`` is the one
narrow interface both databases implement (``_duckdb``, ``_postgres``), and ``queries``
asks the questions in SQL both understand, so both give the same answers.
"""
