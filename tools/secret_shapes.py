"""Documented shapes of real credentials, as data: prefix, alphabet and length per part.

The facts (prefixes, alphabets, lengths) come from public secret-scanner rule sets
(gitleaks rules, trufflehog detectors, detect-secrets plugins, GitHub's secret-scanning
pattern list) and the providers' own key formats. Nothing here is a real key: both
the property tests (``tests/test_scrub_shapes.py``, through hypothesis) and the seeded
holdout generator (``tools/make_scrub_holdout.py``) draw random keys from these parts.
"""

from __future__ import annotations

import random
import string

ALNUM = string.ascii_letters + string.digits
URLSAFE = ALNUM + "_-"
UPPER_B32 = string.ascii_uppercase + "234567"
HEX = "0123456789abcdef"
LETTERS = string.ascii_letters
DIGITS = string.digits

# A part is a literal string or (alphabet, min length, max length).
Part = str | tuple[str, int, int]

SHAPES: dict[str, tuple[Part, ...]] = {
    "openai-legacy": ("sk-", (ALNUM, 48, 48)),
    "openai-project": ("sk-proj-", (URLSAFE, 156, 156)),
    "openai-svcacct": ("sk-svcacct-", (URLSAFE, 156, 156)),
    "openai-admin": ("sk-admin-", (URLSAFE, 100, 120)),
    "anthropic": ("sk-ant-api03-", (URLSAFE, 93, 93), "AA"),
    "anthropic-admin": ("sk-ant-admin01-", (URLSAFE, 93, 93), "AA"),
    "openrouter": ("sk-or-v1-", (HEX, 64, 64)),
    "google-api": ("AIza", (URLSAFE, 35, 35)),
    "google-oauth": ("ya29.", (URLSAFE, 60, 180)),
    "github-classic": ("ghp_", (ALNUM, 36, 36)),
    "github-oauth": ("gho_", (ALNUM, 36, 36)),
    "github-app": ("ghs_", (ALNUM, 36, 36)),
    "github-fine": ("github_pat_", (ALNUM, 22, 22), "_", (ALNUM, 59, 59)),
    "gitlab-pat": ("glpat-", (URLSAFE, 20, 20)),
    "slack-bot": ("xoxb-", (DIGITS, 10, 13), "-", (DIGITS, 10, 13), "-", (ALNUM, 24, 24)),
    "slack-user": ("xoxp-", (DIGITS, 10, 13), "-", (DIGITS, 10, 13), "-", (DIGITS, 10, 13), "-", (HEX, 32, 32)),
    "aws-access-key": ("AKIA", (UPPER_B32, 16, 16)),
    "aws-session-key": ("ASIA", (UPPER_B32, 16, 16)),
    "huggingface": ("hf_", (LETTERS, 34, 34)),
    "groq": ("gsk_", (ALNUM, 52, 52)),
    "replicate": ("r8_", (ALNUM, 37, 37)),
    "xai": ("xai-", (ALNUM, 80, 80)),
    "perplexity": ("pplx-", (ALNUM, 48, 48)),
    "stripe-live": ("sk_live_", (ALNUM, 24, 99)),
    "stripe-restricted": ("rk_test_", (ALNUM, 24, 99)),
    "stripe-webhook": ("whsec_", (ALNUM, 32, 32)),
    "npm": ("npm_", (ALNUM, 36, 36)),
    "jwt": ("eyJ", (URLSAFE, 12, 40), ".eyJ", (URLSAFE, 12, 80), ".", (URLSAFE, 43, 43)),
}


def draw(parts: tuple[Part, ...], rng: random.Random) -> str:
    """One random key of the given shape."""
    out = []
    for part in parts:
        if isinstance(part, str):
            out.append(part)
        else:
            alphabet, low, high = part
            out.append("".join(rng.choice(alphabet) for _ in range(rng.randint(low, high))))
    return "".join(out)


# Every context the scrubber handles, with {k} where the key goes.
CONTEXTS: tuple[str, ...] = (
    "error: key {k} rejected",
    "using {k}.",
    "(key: {k})",
    "api_key={k}&model=gpt-4o-mini",
    "OPENAI_API_KEY={k}",
    '{{"key": "{k}", "model": "gpt-4o-mini"}}',
    '{{"note": "{k}"}}',
    "{{'token': '{k}', 'retries': 3}}",
    "{{'value': '{k}'}}",
    "Authorization: Bearer {k}",
    "x-api-key: {k}",
    "GET https://api.example.com/v1/{k}/chat HTTP/1.1",
    "https://api.example.com/v1/models?key={k}&alt=json",
    "redirect=/cb%3Fkey%3D{k}",
    "client = OpenAI(api_key='{k}')",
    "{k}",
)
