"""Inner pytest sessions, for the tests of the pytest plugin: the options they all run with.

An inner session loads every installed plugin again. Hypothesis's and LangSmith's (which
imports the whole LangSmith client) cost seconds a session and are not under test, and
the cache would write into the test's folder.
"""

from __future__ import annotations

#: ``-p`` options for every inner session, in this process (pytester) or another one.
INNER = ("-p", "no:hypothesispytest", "-p", "no:langsmith_plugin", "-p", "no:cacheprovider")

#: A Starlette app behind the middleware whose ``/chat`` calls a model in an agent scope and
#: answers 502 when the model fails (``?q=break``): the inner sessions' app under test.
INNER_APP = """
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.responses import JSONResponse, PlainTextResponse
from starlette.routing import Route
from starlette.testclient import TestClient

import cvdiag


async def chat(request):
    async with cvdiag.agent_scope("inner-agent", model_id="gpt-4o-mini"):
        try:
            async with cvdiag.llm_call("openai", "gpt-4o-mini") as call:
                if request.query_params.get("q") == "break":
                    raise ConnectionError("provider down")
                call.record(3, finish_reason="stop")
        except ConnectionError:
            return JSONResponse({"error": "the model provider failed"}, status_code=502)
    return PlainTextResponse("hello")


app = Starlette(routes=[Route("/chat", chat)], middleware=[Middleware(cvdiag.CvdiagMiddleware, slug="inner")])
"""
