"""Write the scrubber's held-out corpus from secret-scanner rule facts, with a fixed seed.

    .venv/bin/python tools/make_scrub_holdout.py [--seed 2026] [--out tests/data/scrub_holdout.jsonl]

Every record is built from facts (prefixes, alphabets, lengths, cookie names, URL
shapes, id formats) taken from public rule sets (gitleaks, trufflehog, detect-secrets,
GitHub secret scanning) and protocol documents, and placed in contexts the way logs
and exceptions write them; nothing is tuned to a single string. The same seed gives
the same file byte for byte. Score it with
``tools/score_scrub.py --corpus tests/data/scrub_holdout.jsonl``.
"""

from __future__ import annotations

import argparse
import json
import random
import string
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from secret_shapes import ALNUM, CONTEXTS, HEX, SHAPES, URLSAFE, draw

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "tests" / "data" / "scrub_holdout.jsonl"
LOWER_DIGITS = string.ascii_lowercase + string.digits
B64 = ALNUM + "+/"

Record = dict[str, object]


def _rand(rng: random.Random, alphabet: str, low: int, high: int | None = None) -> str:
    return "".join(rng.choice(alphabet) for _ in range(rng.randint(low, high or low)))


def _record(family: str, text: str, secrets: list[str], keep: list[str]) -> Record:
    return {"family": family, "text": text, "secrets": secrets, "keep": keep}


def _user(rng: random.Random) -> str:
    return rng.choice(["admin", "deploy", "svc-agent", "bob", "ci", "alice.w", "root", "api"]) + _rand(
        rng, "0123456789", 0, 2
    )


def _password(rng: random.Random) -> str:
    # Passwords of every kind, letters-only included: a password need not look random.
    kind = rng.randrange(3)
    if kind == 0:
        return _rand(rng, ALNUM + "!#%^*-_", 10, 24)
    if kind == 1:
        return _rand(rng, string.ascii_lowercase, 8, 14)
    return rng.choice(["Summer", "Winter", "Tiger", "Falcon"]) + _rand(rng, "0123456789", 2, 4) + rng.choice("!?#")


# --- secrets ---------------------------------------------------------------------------


def key_shapes(rng: random.Random) -> Iterator[Record]:
    for name, parts in SHAPES.items():
        for _ in range(3):
            key = draw(parts, rng)
            yield _record(f"key:{name}", rng.choice(CONTEXTS).format(k=key), [key], [])


def auth_tuples(rng: random.Random) -> Iterator[Record]:
    forms = [
        'requests.get("https://api.example.com/v1/items", auth=("{u}", "{p}"))',
        "session.auth = ('{u}', '{p}')",
        "httpx.Client(auth=('{u}', '{p}'), timeout=10)",
        'HTTPBasicAuth("{u}", "{p}")',
        "aiohttp.BasicAuth('{u}', '{p}')",
        "httpx.BasicAuth(username='{u}', password='{p}')",
        "kwargs={{'auth': ('{u}', '{p}'), 'verify': True}}",
    ]
    yield from _password_forms(rng, "auth:python_tuple", forms)


def curl_users(rng: random.Random) -> Iterator[Record]:
    forms = [
        "curl -u {u}:{p} https://registry.example.com/v2/_catalog",
        "curl --user '{u}:{p}' -X POST https://ci.example.com/job/build",
        'curl -s -u "{u}:{p}" https://api.example.com/health',
        "wget --user={u} --password={p} https://files.example.com/a.tgz",
        "curl --proxy-user {u}:{p} -x http://proxy:3128 https://example.com",
    ]
    yield from _password_forms(rng, "auth:cli_user", forms)


def _password_forms(rng: random.Random, family: str, forms: list[str]) -> Iterator[Record]:
    for form in forms:
        for _ in range(2):
            pw = _password(rng)
            yield _record(family, form.format(u=_user(rng), p=pw), [pw], [])


def webhooks(rng: random.Random) -> Iterator[Record]:
    upper = string.ascii_uppercase + string.digits
    for _ in range(4):
        token = _rand(rng, ALNUM, 24)
        path = f"T{_rand(rng, upper, 8, 10)}/B{_rand(rng, upper, 8, 10)}/{token}"
        context = rng.choice(
            [
                "POST https://hooks.slack.com/services/{}",
                'SLACK_WEBHOOK_URL="https://hooks.slack.com/services/{}"',
                "notify via https://hooks.slack.com/services/{} failed: 404",
            ]
        )
        yield _record("webhook:slack", context.format(path), [token], ["hooks.slack.com"])
    for _ in range(2):
        token = _rand(rng, ALNUM, 24, 32)
        team, trigger = _rand(rng, upper, 9), _rand(rng, string.digits, 13)
        text = f"workflow trigger https://hooks.slack.com/triggers/T{team}/{trigger}/{token}"
        yield _record("webhook:slack", text, [token], ["hooks.slack.com"])
    for host in ("discord.com", "discordapp.com", "canary.discord.com", "discord.com"):
        token = _rand(rng, URLSAFE, 68)
        text = f"webhook_url = 'https://{host}/api/webhooks/{_rand(rng, string.digits, 18, 19)}/{token}'"
        yield _record("webhook:discord", text, [token], [host])


SESSION_COOKIES: dict[str, Callable[[random.Random], str]] = {
    "connect.sid": lambda r: "s%3A" + _rand(r, URLSAFE, 32) + "." + _rand(r, B64, 43),
    "PHPSESSID": lambda r: _rand(r, LOWER_DIGITS, 26),
    "JSESSIONID": lambda r: _rand(r, HEX.upper(), 32),
    "sessionid": lambda r: _rand(r, LOWER_DIGITS, 32),
    "_session_id": lambda r: _rand(r, HEX, 32),
    "laravel_session": lambda r: "eyJpdiI6" + _rand(r, B64, 120, 200) + "%3D",
    "_rails_session": lambda r: _rand(r, B64, 60, 120) + "--" + _rand(r, HEX, 40),
    "_myapp_session": lambda r: _rand(r, B64, 40, 80) + "--" + _rand(r, HEX, 40),
    "ASP.NET_SessionId": lambda r: _rand(r, string.ascii_lowercase + "012345", 24),
    "ci_session": lambda r: _rand(r, LOWER_DIGITS, 40),
    "session": lambda r: "eyJ" + _rand(r, URLSAFE, 30) + "." + _rand(r, URLSAFE, 6) + "." + _rand(r, URLSAFE, 27),
}


def session_cookies(rng: random.Random) -> Iterator[Record]:
    forms = [
        ("{{'{n}': '{v}'}}", False),
        ('{{"{n}": "{v}", "theme": "dark"}}', False),
        ("requests.get(url, cookies={{'{n}': '{v}'}})", False),
        ("<RequestsCookieJar[<Cookie {n}={v} for app.example.com/>]>", False),
        ("Cookie: theme=dark; {n}={v}; lang=en", False),
        ("Set-Cookie: {n}={v}; Path=/; HttpOnly; Secure; SameSite=Lax", True),
        ("{{'name': '{n}', 'value': '{v}', 'domain': 'app.example.com', 'path': '/'}}", False),
    ]
    for name, make in SESSION_COOKIES.items():
        for form, attributes in rng.sample(forms, 3):
            value = make(rng)
            keep = ["Path=/", "HttpOnly", "SameSite=Lax", f"{name}="] if attributes else []
            yield _record("cookie:session", form.format(n=name, v=value), [value], keep)


def _ssn(rng: random.Random) -> str:
    area = rng.choice([n for n in range(1, 900) if n != 666])
    return f"{area:03d} {rng.randint(1, 99):02d} {rng.randint(1, 9999):04d}"


def _nino(rng: random.Random) -> str:
    first, second = rng.choice("ABCEGHJKLMNOPRSTWXYZ"), rng.choice("ABCEGHJKLMNPRSTWXYZ")
    while first + second in ("BG", "GB", "NK", "KN", "TN", "NT", "ZZ"):
        second = rng.choice("ABCEGHJKLMNPRSTWXYZ")
    digits = " ".join(_rand(rng, string.digits, 2) for _ in range(3))
    return f"{first}{second} {digits} {rng.choice('ABCD')}"


def national_ids(rng: random.Random) -> Iterator[Record]:
    forms = ["customer SSN {v} on file", "ssn: {v}", "KYC check failed for {v}", "{{'national_id': '{v}'}}"]
    for make, family in ((_ssn, "pii:ssn_spaced"), (_nino, "pii:nino")):
        for form in forms:
            value = make(rng)
            yield _record(family, form.format(v=value), [value], [])


# --- harmless text that must survive ---------------------------------------------------


def set_cookie_attributes(rng: random.Random) -> Iterator[Record]:
    for name in ("theme", "csrftoken", "__Host-id", "lang", "_ga"):
        value = _rand(rng, ALNUM, 12, 32)
        date = f"{rng.choice(['Mon', 'Tue', 'Wed'])}, {rng.randint(10, 28)} Oct 2026 07:28:00 GMT"
        attributes = "Max-Age=3600; Domain=example.com; Path=/; Secure; HttpOnly; SameSite=Strict"
        text = f"Set-Cookie: {name}={value}; Expires={date}; {attributes}"
        keep = [
            f"{name}=",
            f"Expires={date}",
            "Max-Age=3600",
            "Domain=example.com",
            "Path=/",
            "Secure",
            "HttpOnly",
            "SameSite=Strict",
        ]
        yield _record("harmless:set_cookie_attributes", text, [value], keep)


def placeholders(rng: random.Random) -> Iterator[Record]:
    names = ["OPENAI_API_KEY", "DB_PASSWORD", "GITHUB_TOKEN", "ANTHROPIC_API_KEY", "SLACK_WEBHOOK", "NPM_TOKEN"]
    forms = [
        ("token: {p}", "${{{{ secrets.{n} }}}}"),
        ("password={p}", "${{{n}}}"),
        ('api_key: "{p}"', "${{{n}}}"),
        ("Authorization: Bearer {p}", "${{{{ secrets.{n} }}}}"),
        ("env: {{'{n}': '{p}'}}", "${{{n}:-}}"),
        ("export SECRET_KEY={p}", "${{{n}}}"),
        ("with: {{ api-key: {p} }}", "${{{{ secrets.{n} }}}}"),
    ]
    for form, placeholder in forms:
        name = rng.choice(names)
        value = placeholder.format(n=name)
        yield _record("harmless:placeholder", form.format(p=value, n=name), [], [value])


def arns(rng: random.Random) -> Iterator[Record]:
    region = rng.choice(["us-east-1", "eu-west-2", "ap-southeast-1"])
    account = _rand(rng, string.digits, 12)
    suffix = _rand(rng, ALNUM, 6)
    for arn in (
        f"arn:aws:secretsmanager:{region}:{account}:secret:prod/db-password-{suffix}",
        f"arn:aws:secretsmanager:{region}:{account}:secret:api_token-{suffix}",
        f"arn:aws:kms:{region}:{account}:key/" + "-".join(_rand(rng, HEX, n) for n in (8, 4, 4, 4, 12)),
        f"arn:aws:ssm:{region}:{account}:parameter/prod/openai/api_key",
        f"arn:aws:iam::{account}:role/agent-runtime",
    ):
        yield _record("harmless:arn", f"AccessDeniedException: not authorized on resource {arn}", [], [arn])


def sigv4_scopes(rng: random.Random) -> Iterator[Record]:
    for _ in range(4):
        key = "AKIA" + _rand(rng, string.ascii_uppercase + "234567", 16)
        day = f"2026{rng.randint(1, 12):02d}{rng.randint(10, 28)}"
        scope = f"{day}/{rng.choice(['us-east-1', 'eu-central-1'])}/{rng.choice(['s3', 'bedrock', 'sts'])}/aws4_request"
        sig = _rand(rng, HEX, 64)
        text = (
            f"Authorization: AWS4-HMAC-SHA256 Credential={key}/{scope}, SignedHeaders=host;x-amz-date, Signature={sig}"
        )
        yield _record("harmless:sigv4_scope", text, [key, sig], [scope, "SignedHeaders=host;x-amz-date"])
        url_scope = scope.replace("/", "%2F")
        text = f"GET https://b.s3.amazonaws.com/o?X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Credential={key}%2F{url_scope}&X-Amz-Signature={sig}"
        yield _record("harmless:sigv4_scope", text, [key, sig], [url_scope])


_WEBKIT = "AppleWebKit/537.36 (KHTML, like Gecko)"


def user_agents(rng: random.Random) -> Iterator[Record]:
    for _ in range(6):
        major = rng.randint(100, 131)
        ua = rng.choice(
            [
                f"Mozilla/5.0 (Windows NT 10.0; Win64; x64) {_WEBKIT} Chrome/{major}.0.0.0 Safari/537.36",
                f"Mozilla/5.0 (Macintosh; Intel Mac OS X 10_15_7) {_WEBKIT} Chrome/{major}.0.0.0 Safari/537.36"
                f" Edg/{major}.0.0.0",
                f"Mozilla/5.0 (X11; Linux x86_64; rv:{major}.0) Gecko/20100101 Firefox/{major}.0",
                f"Mozilla/5.0 (Linux; Android 14) {_WEBKIT} Chrome/{major}.0.{rng.randint(1000, 6999)}"
                f".{rng.randint(10, 199)} Mobile Safari/537.36",
            ]
        )
        yield _record("harmless:user_agent", f"user-agent: {ua}", [], [ua])


def masked_values(rng: random.Random) -> Iterator[Record]:
    forms = [
        ("Incorrect API key provided: {m}.", "sk-proj-****{t}"),
        ("api_key={m}", "sk-...{t}"),
        ("using key {m}", "sk-ant-api03-…{t}"),
        ("aws_access_key_id = {m}", "AKIA************{T}"),
        ("token {m} rejected", "ghp_************************************"),
        ('{{"password": "{m}", "user": "bob"}}', "********"),
        ("Authorization: Bearer {m}", "***"),
        ("OPENAI_API_KEY={m}", "sk-xxxxxxxxxxxxxxxxxxxxxxxx"),
        ("secret={m}", "<redacted>"),
        ("key {m} expired", "sk-…{t}"),
    ]
    for form, mask in forms:
        value = mask.format(t=_rand(rng, ALNUM, 4), T=_rand(rng, string.ascii_uppercase, 4))
        yield _record("harmless:masked", form.format(m=value), [], [value])


FAMILIES = (
    key_shapes,
    auth_tuples,
    curl_users,
    webhooks,
    session_cookies,
    national_ids,
    set_cookie_attributes,
    placeholders,
    arns,
    sigv4_scopes,
    user_agents,
    masked_values,
)


def generate(seed: int) -> list[Record]:
    rng = random.Random(seed)
    return [record for family in FAMILIES for record in family(rng)]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seed", type=int, default=2026)
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args(argv)
    records = generate(args.seed)
    with args.out.open("w", encoding="utf-8") as f:
        for record in records:
            f.write(json.dumps(record, ensure_ascii=False) + "\n")
    print(f"wrote {len(records)} records to {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
