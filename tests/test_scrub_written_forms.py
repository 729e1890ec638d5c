"""Secrets in the written forms a host's logs hold (issue 18): Python bytes after a
sensitive key, raw header pairs, argv lists, a DSN whose password holds "@", JSON with
``\\u0022`` escapes, blanks after ``Authorization:``, a JWE, ``pass=``, ``?key=`` and a
double URL-encoded ``api_key``. Every form in property tests: any secret, removed, and
the scrubbed text stable under a second scrub."""

from __future__ import annotations

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from cvdiag.contract.scrubber import REDACTED, scrub

#: What a secret looks like to these tests: letters and digits, long enough to matter.
SECRETS = st.text(alphabet="abcdefghijkmnopqrstuvwxyzABCDEFGHJKLMNPQRSTUVWXYZ23456789", min_size=10, max_size=48)
HEADER_NAMES = st.sampled_from(
    ["authorization", "Authorization", "x-api-key", "api-key", "x-goog-api-key", "proxy-authorization", "cookie"]
)
KEYS = st.sampled_from(["token", "api_key", "apiKey", "password", "secret", "access_token", "client_secret"])
QUOTES = st.sampled_from(["'", '"'])

FORMS = {
    "bytes in a dict repr": lambda key, secret, q: f"{{b{q}{key}{q}: b{q}{secret}{q}, b{q}host{q}: b{q}api{q}}}",
    "bytes in kwargs": lambda key, secret, q: f"call(url, {key}=b{q}{secret}{q}, timeout=30)",
    "bytes after a colon": lambda key, secret, q: f"{key}: b{q}{secret}{q}",
    "raw header pairs": lambda key, secret, q: f"[(b{q}{key}{q}, b{q}{secret}{q}), (b{q}accept{q}, b{q}*/*{q})]",
    "Headers(raw=…)": lambda key, secret, q: f"Headers(raw=[(b{q}{key}{q}, b{q}{secret}{q})])",
    "str header pairs": lambda key, secret, q: f"[({q}{key}{q}, {q}{secret}{q})]",
    "argv list": lambda key, secret, q: f"[{q}cli{q}, {q}--{key}{q}, {q}{secret}{q}, {q}-v{q}]",
    "json with \\u0022": lambda key, secret, q: f"{{\\u0022{key}\\u0022: \\u0022{secret}\\u0022}}",
    "blanks after the colon": lambda key, secret, q: f"{key}:{' ' * 12}{secret}",
}


@pytest.mark.parametrize("form", FORMS, ids=list(FORMS))
@given(key=st.one_of(KEYS, HEADER_NAMES), secret=SECRETS, quote=QUOTES)
@settings(max_examples=60, deadline=None)
def test_a_secret_in_each_written_form_is_removed_and_stays_removed(form, key, secret, quote):
    text = FORMS[form](key, secret, quote)
    out = scrub(text)
    assert secret not in out and REDACTED in out, out
    assert scrub(out) == out


@given(
    user=st.from_regex(r"[a-z]{2,10}", fullmatch=True),
    secret=SECRETS,
    more=SECRETS,
    host=st.sampled_from(["db", "db.internal:5432"]),
)
@settings(max_examples=100, deadline=None)
def test_a_dsn_password_holding_at_signs_is_removed_whole(user, secret, more, host):
    text = f"connect postgres://{user}:{secret}@{more}@{host}/app failed"
    out = scrub(text)
    assert secret not in out and more not in out, out
    assert out == f"connect postgres://{REDACTED}@{host}/app failed"
    assert scrub(out) == out


@given(secret=SECRETS, param=st.sampled_from(["api_key", "access_token", "password"]))
@settings(max_examples=100, deadline=None)
def test_double_url_encoded_secrets_are_removed(secret, param):
    text = f"redirect=%2Fcb%3F{param}%253D{secret}"
    out = scrub(text)
    assert secret not in out and out.startswith("redirect=%2Fcb%3F"), out
    assert scrub(out) == out


@given(secret=SECRETS, before=st.sampled_from(["?", "&"]))
@settings(max_examples=100, deadline=None)
def test_a_key_query_parameter_is_removed(secret, before):
    text = f"GET https://maps.example.com/api/geocode?q=paris{before if before == '&' else '&'}key={secret}&z=1"
    out = scrub(text)
    assert secret not in out and "q=paris" in out and "&z=1" in out, out


@given(secret=SECRETS.filter(lambda s: not s.isdigit()))  # digits alone after pass= are a count
@settings(max_examples=100, deadline=None)
def test_pass_is_a_password_but_a_count_after_it_is_not(secret):
    out = scrub(f"user=bob pass={secret} host=db1")
    assert secret not in out and "host=db1" in out
    assert scrub("tests pass=12 fail=0") == "tests pass=12 fail=0"


B64URL = st.text(alphabet="abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_", min_size=8, max_size=80)


@given(key=st.one_of(st.just(""), B64URL), iv=B64URL, ciphertext=B64URL, tag=B64URL)
@example(key="", iv="00000000", ciphertext="00000000", tag="sk-00000")  # a part that is a key shape of its own
@settings(max_examples=150, deadline=None)
def test_a_bare_jwe_loses_all_five_parts(key, iv, ciphertext, tag):
    jwe = f"eyJhbGciOiJSU0EtT0FFUCIsImVuYyI6IkEyNTZHQ00ifQ.{key}.{iv}.{ciphertext}.{tag}"
    out = scrub(f"cookie value {jwe} end")
    assert out == f"cookie value {REDACTED} end"


@pytest.mark.parametrize("signature", ["sk-00000000", "AIza" + "0" * 24, "ghp_" + "a1" * 10])
def test_a_jwt_whose_signature_looks_like_a_key_goes_whole(signature):
    jwt = f"eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.{signature}"
    assert scrub(f"token {jwt} end") == f"token {REDACTED} end"


@pytest.mark.parametrize(
    ("text", "leak"),
    [
        ("{\\u0022apiKey\\u0022: \\u0022sk-proj-Vb7Qw2Lm9Xr4Tz6Kp1Nc8Hd3Jf5Gs0Ya2Ue7\\u0022}", "Vb7Qw2Lm9Xr4"),
        ("id=\\u0022eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxIn0.c2lnbmF0dXJlX2Zvcl90ZXN0\\u0022", "c2lnbmF0dXJl"),
        ("Authorization:        Qa1Ws2Ed3Rf4Tg5Yh6", "Qa1Ws2Ed3Rf4Tg5Yh6"),
        ("[(b'authorization', b'Bearer Ws3Ed4Rf5Tg6Yh7Uj8')]", "Ws3Ed4Rf5Tg6Yh7Uj8"),
        ("postgres://user:Hunter2@Secret@db/app", "Hunter2"),
        (
            "eyJhbGciOiJkaXIiLCJlbmMiOiJBMTI4Q0JDLUhTMjU2In0..3WfWo5k7pR2bZqVt.Yt7H2kq9Lm4Np8Rs2Tu6Vw.Fq3Xb8Kz1Lm5",
            "Yt7H2kq9",
        ),
    ],
)
def test_the_forms_that_leaked_are_removed(text, leak):
    out = scrub(text)
    assert leak not in out and REDACTED in out, out


@pytest.mark.parametrize(
    "text",
    [
        "[('content-type', 'application/json'), ('x-request-id', 'req_12ab')]",
        "{b'host': b'api.internal', b'accept': b'*/*'}",
        "['pytest', '-q', '--maxfail', '1']",
        "key: Enter pressed; cache key=user:42",
        "tests pass=12 fail=0",
        "see https://example.com/docs?page=2&lang=en",
        "eyJhbGciOiJIUzI1NiJ9 is a header only",
        "Authorization: [REDACTED]",
        "{\\u0022scope\\u0022:\\u0022openid\\u0022}",
    ],
)
def test_what_must_survive_survives(text):
    assert scrub(text) == text
