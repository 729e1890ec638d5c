"""Inner pytest sessions, for the tests of the pytest plugin: the options they all run with.

An inner session loads every installed plugin again. Hypothesis's and LangSmith's (which
imports the whole LangSmith client) cost seconds a session and are not under test, and
the cache would write into the test's folder.
"""

from __future__ import annotations

#: ``-p`` options for every inner session, in this process (pytester) or another one.
INNER = ("-p", "no:hypothesispytest", "-p", "no:langsmith_plugin", "-p", "no:cacheprovider")
