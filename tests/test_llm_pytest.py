"""Under the pytest plugin, LLM calls are recognised with no code: a test's failure
report names the provider's failure."""

from __future__ import annotations

import pytest
from pytestkit import INNER

pytest_plugins = ["pytester"]


def test_failure_report_names_the_llm_calls_a_test_made(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        """
        import httpx2

        ERROR = b'{"error": {"message": "down", "type": "server_error", "code": null}}'

        def provider(request):
            return httpx2.Response(500, content=ERROR, headers={"content-type": "application/json"})

        def test_agent_answers(cvdiag_events):
            client = httpx2.Client(transport=httpx2.MockTransport(provider))
            for _ in range(2):
                client.post("https://api.openai.com/v1/chat/completions", json={"model": "gpt-4o-mini"})
            calls = cvdiag_events.of("backend.llm.call.response")
            assert [(c["metadata"]["provider"], c["metadata"]["attempt"]) for c in calls] == [
                ("openai", 0),
                ("openai", 1),
            ]
            assert False, "the agent gave no answer"
        """
    )
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("COLUMNS", "200")  # the section is drawn at pytest's width: whole lines here
        result = pytester.runpytest(*INNER)
    result.assert_outcomes(failed=1)
    # The failure is the test's own last assert: the checks on the attempts before it held.
    result.stdout.fnmatch_lines(["*AssertionError: the agent gave no answer*"])
    result.stdout.no_fnmatch_line("*TypeError*")
    result.stdout.fnmatch_lines(["*llm-error*openai/gpt-4o-mini failed: 2 attempts, all HTTP 500 (server_error)*"])
