"""The words that name an agent-level cause: frameworks' exceptions, providers' error
codes and finish reasons, in one table so that each entry is tested and documented once.

A text (an agent's ``error_class: error_message``, an exception caught by the backend,
an LLM call's ``error_type`` or ``error_class``) is looked up in ``WORDS`` in order,
and the first entry that matches names its class: order matters where one message holds
two names (the OpenAI Agents SDK's ``ModelBehaviorError`` about ``max_output_tokens`` is
a truncated answer, not an invalid one). Every entry quotes a real message and where it
comes from (tests/test_diagnose_agent.py checks each against its example).

Pure: no I/O. Part of the read side.
"""

from __future__ import annotations

from typing import NamedTuple

#: How much of a text is matched (agent.exit error_message is at most 256 characters,
#: backend.error.caught message_scrubbed at most 512).
MATCH_CHARS = 600


class Words(NamedTuple):
    """One way a cause is named: its class, the words (lower case; any of them matches),
    a real example and its origin.

    Plain words, not regular expressions: a substring test costs nothing to set up, where
    compiling the table's patterns cost the CLI's start-up a tenth of its instructions.
    ``llm_only``: the words are too common to trust outside an LLM call's own error (an
    app's ``NotFoundError`` is not a provider's missing model).
    """

    cls: str
    words: tuple[str, ...]
    example: str
    origin: str
    llm_only: bool = False


#: In precedence order within a text: the first entry that matches names the class.
WORDS: tuple[Words, ...] = (
    # -- context-overflow: the prompt did not fit the model's context window -------------
    Words("context-overflow", ("context_length_exceeded",), "context_length_exceeded",
          "OpenAI error code (openai/types/beta/session_turn_error.py)"),
    Words("context-overflow", ("maximum context length is",),
          "This model's maximum context length is 128000 tokens. However, your messages resulted in 130412 tokens.",
          "OpenAI Chat Completions 400 message"),
    Words("context-overflow", ("prompt is too long",), "prompt is too long: 208310 tokens > 200000 maximum",
          "Anthropic invalid_request_error message"),
    Words("context-overflow", ("exceeds the maximum number of tokens allowed",),
          "The input token count (1200000) exceeds the maximum number of tokens allowed (1048576).",
          "Gemini INVALID_ARGUMENT message"),
    Words("context-overflow", ("model_context_window_exceeded",), "model_context_window_exceeded",
          "Anthropic stop_reason (anthropic/types/stop_reason.py)"),
    Words("context-overflow", ("contextwindowexceeded",), "ModelContextWindowExceededError",
          "pydantic-ai exception class (pydantic_ai/exceptions.py); litellm's ContextWindowExceededError"),
    # -- agent-loop: a framework's turn, recursion or request limit -------------------------
    Words("agent-loop", ("graphrecursionerror", "recursion limit of"),
          "GraphRecursionError: Recursion limit of 25 reached without hitting a stop condition.",
          "LangGraph (langgraph/errors.py, langgraph/pregel/main.py)"),
    Words("agent-loop", ("maxturnsexceeded", "max turns ("), "MaxTurnsExceeded: Max turns (10) exceeded",
          "OpenAI Agents SDK (agents/exceptions.py, agents/run.py)"),
    Words("agent-loop", ("usagelimitexceeded", "would exceed the request_limit", "would exceed the tool_calls_limit"),
          "UsageLimitExceeded: The next request would exceed the request_limit of 50",
          "pydantic-ai (pydantic_ai/usage.py)"),
    # -- content-filtered: the provider refused or filtered the answer ----------------------
    Words("content-filtered", ("contentfilter", "content filter"),
          "ContentFilterFinishReasonError: Could not parse response content as the request was rejected by the "
          "content filter",
          "openai SDK (openai/_exceptions.py); pydantic-ai ContentFilterError 'Content filter triggered.'"),
    # -- output-truncated: the answer stopped on the token limit ----------------------------
    Words("output-truncated", ("outputtokenlimitexceeded", "incompletetoolcall"),
          "OutputTokenLimitExceeded", "pydantic-ai (pydantic_ai/exceptions.py)"),
    Words("output-truncated", ("lengthfinishreasonerror", "length limit was reached"),
          "LengthFinishReasonError: Could not parse response content as the length limit was reached",
          "openai SDK (openai/_exceptions.py)"),
    Words("output-truncated", ("max_output_tokens",),
          "ModelBehaviorError: Response incomplete: incomplete_details=max_output_tokens",
          "OpenAI Responses incomplete_details.reason, as the OpenAI Agents SDK reports it"),
    # -- output-invalid: structured output a framework gave up on ---------------------------
    Words("output-invalid", ("exceeded maximum retries", "exceeded maximum output retries"),
          "UnexpectedModelBehavior: Exceeded maximum output retries (1)",
          "pydantic-ai (pydantic_ai/_agent_graph.py, pydantic_ai/_tool_execution.py)"),
    Words("output-invalid", ("unexpectedmodelbehavior",), "UnexpectedModelBehavior",
          "pydantic-ai (pydantic_ai/exceptions.py)"),
    Words("output-invalid", ("modelbehaviorerror", "invalid json when parsing"),
          "ModelBehaviorError: Invalid JSON when parsing model output", "OpenAI Agents SDK (agents/util/_json.py)"),
    # -- llm-auth / llm-config: the provider refused the request itself ---------------------
    Words("llm-auth", ("modelauthenticationerror",), "ModelAuthenticationError",
          "pydantic-ai (pydantic_ai/exceptions.py)"),
    Words("llm-auth", ("authenticationerror", "permissiondenied", "invalid_api_key", "authentication_error",
                       "permission_error"),
          "AuthenticationError", "openai and anthropic SDKs (401, 403); error types invalid_api_key, "
          "authentication_error, permission_error", llm_only=True),
    Words("llm-config", ("modelnotfounderror",), "ModelNotFoundError", "pydantic-ai (pydantic_ai/exceptions.py)"),
    Words("llm-config", ("notfounderror", "model_not_found", "not_found_error", "badrequesterror",
                         "invalid_request_error", "unprocessableentityerror", "unsupported_parameter", "invalid_value"),
          "NotFoundError", "openai and anthropic SDKs (400, 404, 422); error types model_not_found, "
          "not_found_error, invalid_request_error", llm_only=True),
)  # fmt: skip

#: Finish reasons (lower-cased) of an answer that stopped on the token limit ...
TRUNCATED_FINISH = frozenset({"length", "max_tokens", "max_output_tokens"})
#: ... and of one the provider refused or filtered (OpenAI, Anthropic, Gemini).
FILTERED_FINISH = frozenset(
    {"content_filter", "refusal", "safety", "prohibited_content", "blocklist", "spii", "recitation", "image_safety"}
)
#: ... and of one that did not fit the context window (Anthropic).
OVERFLOW_FINISH = frozenset({"model_context_window_exceeded"})

#: HTTP statuses of an LLM call the provider refused: the key, or the request itself.
AUTH_STATUSES = frozenset({401, 403})
CONFIG_STATUSES = frozenset({400, 404, 422})

#: An LLM call that failed with one of these and no HTTP status never reached the provider:
#: the app's own HTTP client failed (the classes of ``contract.otel._exceptions``'s
#: LOCAL_CLIENT_FAULTS, which tests/test_otel_diagnosis.py holds equal; not imported: its
#: patterns would cost every start-up).
LOCAL_CLIENT_CLASSES = frozenset({"RuntimeError", "PoolTimeout"})

#: pydantic-ai returns structured output through a tool of this name (and prefix):
#: a failed call of it is output that failed validation, not a failed tool.
OUTPUT_TOOL_PREFIX = "final_result"


def cause_of(text: str, *, from_llm: bool = False) -> str | None:
    """The class a text names (the first entry of ``WORDS`` that matches), or None."""
    low = text[:MATCH_CHARS].lower()
    for entry in WORDS:
        if (from_llm or not entry.llm_only) and any(word in low for word in entry.words):
            return entry.cls
    return None


def finish_cause(reason: str) -> str | None:
    """The class a final answer's finish reason names, or None for a normal stop."""
    low = reason.lower()
    if low in TRUNCATED_FINISH:
        return "output-truncated"
    if low in FILTERED_FINISH:
        return "content-filtered"
    if low in OVERFLOW_FINISH:
        return "context-overflow"
    return None
