"""The pytest plugin: a test id per test, propagation, and the diagnosis in the failure report."""
