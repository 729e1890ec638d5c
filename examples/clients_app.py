"""LLM calls on transports other than httpx, behind cvdiag, with no LLM code of cvdiag's.

One app, the client picked by ``EXAMPLE_CLIENT``:

- ``aiohttp``: a hand-written chat-completions stream over aiohttp;
- ``requests``: the same over ``requests``, in worker threads (``asyncio.to_thread``
  copies the request's context into them, so the test id goes along);
- ``genai``: the Gemini SDK (``google-genai``), whose async calls go through aiohttp
  whenever aiohttp is installed;
- ``litellm``: ``litellm.acompletion`` (the OpenAI SDK on httpx, over LiteLLM's aiohttp
  transport: one call, seen at httpx);
- ``bedrock``: boto3 ``bedrock-runtime`` ``converse_stream`` in worker threads.

``cvdiag.instrument()`` is the one line; the answer streams as server-sent events
(``agent_sse``). A provider error is retried ``EXAMPLE_MAX_RETRIES`` times (the raw
clients here do it themselves, quickly; the SDKs with their own policy).

    CVDIAG_ENABLED=1 CVDIAG_TIER=verbose EXAMPLE_CLIENT=aiohttp OPENAI_BASE_URL=http://127.0.0.1:4010/v1 \\
        uvicorn examples.clients_app:app --port 8000

Settings: ``OPENAI_BASE_URL``/``OPENAI_API_KEY`` (aiohttp, requests, litellm),
``GEMINI_BASE_URL`` (genai), ``BEDROCK_URL`` (bedrock), and ``agent_sse``'s.
"""

from __future__ import annotations

import asyncio
import json
import os
from collections.abc import AsyncIterator
from types import SimpleNamespace
from typing import Any

import cvdiag
from examples.agent_sse import HEARTBEAT_S, MAX_RETRIES, MODEL, agent_app

cvdiag.instrument(heartbeat_s=HEARTBEAT_S)  # the one line: every client below is on the record

CLIENT = os.environ.get("EXAMPLE_CLIENT", "aiohttp")
OPENAI_URL = os.environ.get("OPENAI_BASE_URL", "http://127.0.0.1:4010/v1").rstrip("/")
AUTH = {"authorization": f"Bearer {os.environ.get('OPENAI_API_KEY', 'sk-placeholder')}"}
GEMINI_MODEL = os.environ.get("EXAMPLE_GEMINI_MODEL", "gemini-2.0-flash")
BEDROCK_MODEL = os.environ.get("EXAMPLE_BEDROCK_MODEL", "anthropic.claude-3-haiku-20240307-v1:0")
#: The raw clients' pause between attempts (the SDKs keep their own policy).
BACKOFF_S = 0.05
RETRIED = frozenset({429, 500, 502, 503, 504})


class ProviderRefused(Exception):
    """The provider's final HTTP error, in the shape ``agent_sse.provider_refusal`` reads."""

    def __init__(self, status_code: int, headers: Any) -> None:
        super().__init__(f"the provider answered {status_code}")
        self.status_code = status_code
        self.response = SimpleNamespace(headers=dict(headers or {}))


def _chat_body(message: str) -> dict:
    return {
        "model": MODEL,
        "stream": True,
        "stream_options": {"include_usage": True},
        "messages": [{"role": "user", "content": message}],
    }


def _delta(line: bytes) -> str:
    if not line.startswith(b"data:") or line.strip() == b"data: [DONE]":
        return ""
    choices = json.loads(line[5:]).get("choices") or [{}]
    return choices[0].get("delta", {}).get("content") or ""


async def aiohttp_answer(message: str) -> AsyncIterator[str]:
    import aiohttp

    async with aiohttp.ClientSession() as session:
        for attempt in range(MAX_RETRIES + 1):
            async with session.post(f"{OPENAI_URL}/chat/completions", json=_chat_body(message), headers=AUTH) as r:
                if r.status >= 400:
                    await r.read()
                    if r.status in RETRIED and attempt < MAX_RETRIES:
                        await asyncio.sleep(BACKOFF_S)
                        continue
                    raise ProviderRefused(r.status, r.headers)
                async for line in r.content:
                    if delta := _delta(line):
                        yield delta
                return


async def requests_answer(message: str) -> AsyncIterator[str]:
    import requests

    session = requests.Session()
    url = f"{OPENAI_URL}/chat/completions"
    for attempt in range(MAX_RETRIES + 1):
        r = await asyncio.to_thread(session.post, url, json=_chat_body(message), headers=AUTH, stream=True, timeout=30)
        try:
            if r.status_code >= 400:
                await asyncio.to_thread(getattr, r, "content")
                if r.status_code in RETRIED and attempt < MAX_RETRIES:
                    await asyncio.sleep(BACKOFF_S)
                    continue
                raise ProviderRefused(r.status_code, r.headers)
            lines = r.iter_lines()
            while (line := await asyncio.to_thread(next, lines, None)) is not None:
                if delta := _delta(line):
                    yield delta
            return
        finally:
            r.close()


def _genai_client() -> Any:
    from google import genai
    from google.genai import types

    retry = types.HttpRetryOptions(attempts=MAX_RETRIES + 1, initial_delay=BACKOFF_S, max_delay=BACKOFF_S, jitter=0)
    base_url = os.environ.get("GEMINI_BASE_URL")
    options = types.HttpOptions(api_version="v1beta", base_url=base_url, retry_options=retry)
    return genai.Client(api_key=os.environ.get("GEMINI_API_KEY", "placeholder"), http_options=options)


async def genai_answer(message: str) -> AsyncIterator[str]:
    from google.genai import errors

    client = _genai_client()
    try:
        async for chunk in await client.aio.models.generate_content_stream(model=GEMINI_MODEL, contents=message):
            if chunk.text:
                yield chunk.text
    except errors.APIError as exc:
        raise ProviderRefused(exc.code, getattr(exc.response, "headers", None)) from exc


async def litellm_answer(message: str) -> AsyncIterator[str]:
    import litellm

    response = await litellm.acompletion(
        model=f"openai/{MODEL}",
        api_base=OPENAI_URL,
        api_key=AUTH["authorization"].split()[-1],
        messages=[{"role": "user", "content": message}],
        stream=True,
        stream_options={"include_usage": True},
        max_retries=MAX_RETRIES,
    )
    async for chunk in response:
        if chunk.choices and chunk.choices[0].delta.content:
            yield chunk.choices[0].delta.content


def _bedrock_client() -> Any:
    import boto3
    import botocore.config

    config = botocore.config.Config(retries={"total_max_attempts": MAX_RETRIES + 1, "mode": "standard"})
    return boto3.client(
        "bedrock-runtime",
        region_name="us-east-1",
        endpoint_url=os.environ.get("BEDROCK_URL"),
        aws_access_key_id="AKIDEXAMPLE",
        aws_secret_access_key="placeholder",
        config=config,
    )


async def bedrock_answer(message: str) -> AsyncIterator[str]:
    from botocore.exceptions import ClientError

    messages = [{"role": "user", "content": [{"text": message}]}]
    try:
        response = await asyncio.to_thread(_bedrock.converse_stream, modelId=BEDROCK_MODEL, messages=messages)
    except ClientError as exc:
        meta = exc.response.get("ResponseMetadata", {})
        raise ProviderRefused(meta.get("HTTPStatusCode", 502), meta.get("HTTPHeaders")) from exc
    stream = response["stream"]
    events = iter(stream)
    try:
        while (event := await asyncio.to_thread(next, events, None)) is not None:
            if "contentBlockDelta" in event:
                yield event["contentBlockDelta"]["delta"].get("text", "")
    finally:
        stream.close()


ANSWERS = {
    "aiohttp": aiohttp_answer,
    "requests": requests_answer,
    "genai": genai_answer,
    "litellm": litellm_answer,
    "bedrock": bedrock_answer,
}
_bedrock = _bedrock_client() if CLIENT == "bedrock" else None
app = agent_app(f"clients-{CLIENT}", f"{CLIENT}-agent", MODEL, ANSWERS[CLIENT])
