"""Secrets in the forms of issue 35: ``Bearer`` followed by any run of blanks (spaces,
tabs), a header value folded onto the next line (obs-fold: a line break then blanks),
and a bare JWE (five dot-separated base64url parts, whatever blanks its JSON header
held). Each in property tests: the secret is gone, the text stable under a second
scrub, and the cost of a scrub stays linear in the blanks and parts it is handed."""

from __future__ import annotations

import base64
import json
import time

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from cvdiag.contract.scrubber import REDACTED, SCAN_LIMIT, scrub, scrub_tree

SECRETS = st.text(alphabet="abcdefghijkmnopqrstuvwxyzABCDEFGHJKLMNPQRSTUVWXYZ23456789", min_size=10, max_size=48)
#: Any run of blanks a header or a log line may hold between a scheme and its token.
BLANKS = st.text(alphabet=" \t", min_size=1, max_size=80)
#: A line break then blanks: obs-fold (RFC 9112 section 5.2), also as a repr writes it.
FOLDS = st.tuples(st.sampled_from(["\r\n", "\n", "\\r\\n", "\\n"]), st.text(alphabet=" \t", min_size=1, max_size=8))
HEADER_NAMES = st.sampled_from(["x-api-key", "X-Api-Key", "api-key", "x-goog-api-key", "Authorization", "token"])


@given(secret=SECRETS, blanks=BLANKS, name=st.sampled_from(["Authorization", "authorization", "Proxy-Authorization"]))
@example(secret="abcDEF123ghiJKL456mno", blanks=" " * 6, name="Authorization")
@example(secret="abcDEF123ghiJKL456mno", blanks="\t\t", name="Authorization")
@settings(max_examples=150, deadline=None)
def test_bearer_then_any_blanks_then_the_token_loses_the_token(secret, blanks, name):
    for text in (
        f"{name}: Bearer{blanks}{secret}",
        f"sent Bearer{blanks}{secret} upstream",
        f"'{name}': 'Bearer{blanks}{secret}'",
    ):
        out = scrub(text)
        assert secret not in out and REDACTED in out, (text, out)
        assert scrub(out) == out


@given(secret=SECRETS, fold=FOLDS, name=HEADER_NAMES, first=st.sampled_from(["", " ", "abc", "Bearer", "sk-"]))
@example(secret="abcDEF123ghiJKL456mno", fold=("\r\n", "  "), name="x-api-key", first="")
@example(secret="abcDEF123ghiJKL456mno", fold=("\r\n", " "), name="X-Api-Key", first="abc")
@settings(max_examples=200, deadline=None)
def test_a_folded_header_value_loses_every_line_of_it(secret, fold, name, first):
    newline, blanks = fold
    for text in (
        f"{name}: {first}{newline}{blanks}{secret}",
        f"GET / HTTP/1.1\r\n{name}: {first}{newline}{blanks}{secret}\r\nhost: api",
    ):
        out = scrub(text)
        assert secret not in out and REDACTED in out, (text, out)
        assert scrub(out) == out


def test_a_fold_does_not_swallow_the_next_key_of_a_yaml_block():
    text = "secrets:\n  token: Zq8Wm3Xn5Rv7Tb9Y\n  region: eu-west-1"
    assert scrub(text) == "secrets:\n  token: [REDACTED]\n  region: eu-west-1"
    assert scrub("api-key: abc\nnext line: kept") == "api-key: [REDACTED]\nnext line: kept"


def _b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


B64URL = st.text(alphabet="abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_", min_size=8, max_size=80)
HEADERS = st.sampled_from(
    [
        {"alg": "RSA-OAEP", "enc": "A256GCM"},
        {"alg": "dir", "enc": "A128CBC-HS256"},
        {"alg": "ECDH-ES+A128KW", "enc": "A128GCM", "kid": "k1"},
    ]
)
#: How a header's JSON was written: compact, spaced, pretty-printed (``{\n  "alg"…``).
LAYOUTS = st.sampled_from([{"separators": (",", ":")}, {}, {"indent": 2}, {"indent": "\t"}])
CONTEXTS = st.sampled_from(["{}", "jwe={}", '{{"jwe": "{}"}}', "t:{}", "\\n{}", "cookie value {} end", "a JWE {}."])


@given(
    header=HEADERS, layout=LAYOUTS, key=st.one_of(st.just(""), B64URL), iv=B64URL, ct=B64URL, tag=B64URL, ctx=CONTEXTS
)
@settings(max_examples=300, deadline=None)
def test_a_bare_jwe_loses_all_five_parts_whatever_its_header_looks_like(header, layout, key, iv, ct, tag, ctx):
    jwe = ".".join([_b64url(json.dumps(header, **layout).encode()), key, iv, ct, tag])
    text = ctx.format(jwe)
    out = scrub(text)
    for part in (iv, ct, tag, key):
        assert not part or part not in out, (text, out)
    assert out == ctx.format(REDACTED), out
    assert scrub(out) == out


@pytest.mark.parametrize(
    "text",
    [
        "opentelemetry.instrumentation.asgi.middleware.OpenTelemetryMiddleware",
        "eyeballing.the.numbers.again.today",
        "api.eu-west-1.internal.example.com",
        "v1.2.3.4.5",
        "Bearer tokens are short-lived",
        "Authorization: Bearer ${OPENAI_API_KEY}",
        "Authorization: Bearer      [REDACTED]",
    ],
)
def test_look_alikes_survive(text):
    assert scrub(text) == text


def test_a_secret_under_a_sensitive_key_in_a_tree_goes_whatever_its_blanks():
    out = scrub_tree({"message": "Authorization: Bearer\t\t\tQa1Ws2Ed3Rf4Tg5Yh6", "headers": {"x-api-key": "k"}})
    assert "Qa1Ws2Ed3Rf4Tg5Yh6" not in str(out) and out["headers"]["x-api-key"] == REDACTED


HOSTILE = {
    "blanks after Bearer": lambda n: "Bearer" + " \t" * n + "x",
    "Bearers and blanks": lambda n: ("Bearer" + " " * 70) * n,
    "folds": lambda n: "x-api-key:" + "\r\n " * n + "v",
    "folds after keys": lambda n: "token:\n " * n,
    "dots": lambda n: "ey" + "a." * n,
    "five-part runs": lambda n: "eyAb." * n,
    "e-runs": lambda n: "ew" * n + ".a.bbbb.cccc.dddd",
}


def _cost(make, n: int) -> float:
    """Seconds for scrubbing ``make(n)`` (best of nine; the cache kept out)."""
    text = make(n) + "\x00"  # past the cache of short strings, and never plain
    best = float("inf")
    for _ in range(9):
        start = time.perf_counter()
        scrub(text)
        best = min(best, time.perf_counter() - start)
    return best


@pytest.mark.parametrize("shape", HOSTILE, ids=list(HOSTILE))
def test_scrubbing_stays_linear_in_blanks_folds_and_parts(shape):
    """Four times the input within the scan limit costs about four times (a ratio, never
    a time): a pattern that backtracks over a run would cost sixteen."""
    make = HOSTILE[shape]
    n = 4
    while len(make(n * 8)) <= SCAN_LIMIT:
        n *= 2
    ratio = _cost(make, 4 * n) / _cost(make, n)
    assert ratio < 8.0, (shape, n, ratio)


# -- through the real middleware into a log, and back out through the CLI --------------

TOKEN = "Qa1Ws2Ed3Rf4Tg5Yh6Uj7"
JWE_SPACED = ".".join(
    [
        _b64url(b'{ "alg": "RSA-OAEP", "enc": "A256GCM" }'),
        "OKOawDo13gRp2ojaHV7LFpZcgV7T6DVZKTyKOMTYUmKoTCVJRgckCL9kiMT03JGe",
        "48V1_ALb6US04U3b",
        "5eym8TW_c8SuK0ltJ3rpYIzOeDQz7TALvtu6UG9oMo4vpzs9tX_EFShS8iB7j6jiSdiw",
        "XFBoMYUZodetZdvTiFvSkQ",
    ]
)
#: What an app's exception says: the three forms, each with a secret of its own.
MESSAGES = {
    "Bearer\\t": f"upstream refused Authorization: Bearer\t\t{TOKEN}A",
    "Bearer and spaces": f"upstream refused Authorization: Bearer        {TOKEN}B",
    "folded x-api-key": f"bad request headers: x-api-key: \r\n  {TOKEN}C\r\naccept: */*",
    "bare JWE": f"could not decrypt {JWE_SPACED}",
}
LEAKS = [f"{TOKEN}A", f"{TOKEN}B", f"{TOKEN}C", "48V1_ALb6US04U3b", "XFBoMYUZodetZdvTiFvSkQ"]


def _failing_app():
    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.routing import Route

    import cvdiag

    async def fail(request: Request):
        raise RuntimeError(MESSAGES[request.query_params["form"]])

    app = Starlette(routes=[Route("/fail", fail)])
    app.add_middleware(cvdiag.CvdiagMiddleware, slug="svc")
    return app


@pytest.mark.parametrize("path", ["compiled", "python"])
def test_no_form_reaches_the_log_or_what_the_cli_shows(path, tmp_path, monkeypatch):
    from cvdiag_cli import run
    from emitkit import capture
    from starlette.testclient import TestClient

    from cvdiag.write import emitter

    if path == "compiled" and emitter._line_compiled is None:
        pytest.skip("cvdiag.write._cemit is not built or is off")
    if path == "python":
        monkeypatch.setattr(emitter, "_line_compiled", None)
    log = tmp_path / "server.log"
    with capture("default", file=str(log)), TestClient(_failing_app(), raise_server_exceptions=False) as client:
        for i, form in enumerate(MESSAGES):
            assert client.get("/fail", params={"form": form}, headers={"x-test-id": f"form-{i}"}).status_code == 500
    written = log.read_text()
    assert written.count("backend.error.caught") == len(MESSAGES), written
    page = tmp_path / "report.html"
    shown = [
        written,
        run("report", "--all", "-o", page, log).err,
        page.read_text(),
        run("tests", log).out,
        run("timeline", "form-2", log).out,
        run("diagnose", "--all", log).out,
        run("grep", "x-api-key", log).out,
    ]
    for text in shown:
        assert not [leak for leak in LEAKS if leak in text], text[:2000]
