"""A run as history rows: its tests from logs (the rows and diagnoses ``cvdiag tests``
computes, and the LLM time, attempts, tokens and failed tool calls of the same pass:
``_evidence``) and the
run itself from the CI's environment (GitHub Actions, GitLab CI, Buildkite, CircleCI,
Jenkins), a ``CVDIAG_RUN_ID``, or flags.

A test's stable name is what the pytest plugin's ``probe.start`` line carries (the node
id, with ``--cvdiag-emit-probe``), else ``--name-pattern``'s first group of the test id,
else the test id.
"""

from __future__ import annotations

import re
import subprocess
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from cvdiag.contract.timestamps import wire_ts
from cvdiag.history._evidence import RunEvidence
from cvdiag.history.store import (
    FIELD_MAX,
    NAME_MAX,
    REASON_MAX,
    URL_MAX,
    Result,
    Run,
    keyed,
    number,
    tests_digest,
    text,
)
from cvdiag.read import correlate
from cvdiag.read.parsing import Tally
from cvdiag.read.sources import Source

RUN_ID_ENV = "CVDIAG_RUN_ID"
RUN_PART_ENV = "CVDIAG_RUN_PART"
#: A result's facts beyond its verdict, for a test with none (``RunEvidence.row_facts``).
_NO_FACTS = RunEvidence("").row_facts()


@dataclass(frozen=True, slots=True)
class RunInfo:
    """What is known of a run before its tests: from the CI, a flag, or git."""

    run_id: str | None = None
    commit_sha: str | None = None
    branch: str | None = None
    job_url: str | None = None
    ci: str | None = None


def _github(env: Mapping[str, str]) -> RunInfo:
    base = f"{env.get('GITHUB_SERVER_URL', 'https://github.com')}/{env.get('GITHUB_REPOSITORY', '')}"
    run, attempt = env.get("GITHUB_RUN_ID", ""), env.get("GITHUB_RUN_ATTEMPT", "1")
    return RunInfo(
        run_id=f"github:{env.get('GITHUB_REPOSITORY', '')}/{run}/{attempt}/{env.get('GITHUB_JOB', '')}",
        commit_sha=env.get("GITHUB_SHA"),
        branch=env.get("GITHUB_HEAD_REF") or env.get("GITHUB_REF_NAME"),
        job_url=f"{base}/actions/runs/{run}/attempts/{attempt}",
        ci="github",
    )


def _gitlab(env: Mapping[str, str]) -> RunInfo:
    return RunInfo(
        run_id=f"gitlab:{env.get('CI_PROJECT_PATH', '')}/{env.get('CI_JOB_ID', '')}",
        commit_sha=env.get("CI_COMMIT_SHA"),
        branch=env.get("CI_COMMIT_REF_NAME"),
        job_url=env.get("CI_JOB_URL"),
        ci="gitlab",
    )


def _buildkite(env: Mapping[str, str]) -> RunInfo:
    url = env.get("BUILDKITE_BUILD_URL")
    job = env.get("BUILDKITE_JOB_ID", "")
    return RunInfo(
        run_id=f"buildkite:{job}",
        commit_sha=env.get("BUILDKITE_COMMIT"),
        branch=env.get("BUILDKITE_BRANCH"),
        job_url=f"{url}#{job}" if url else None,
        ci="buildkite",
    )


def _circleci(env: Mapping[str, str]) -> RunInfo:
    job = env.get("CIRCLE_WORKFLOW_JOB_ID") or env.get("CIRCLE_BUILD_NUM", "")
    return RunInfo(
        run_id=f"circleci:{env.get('CIRCLE_PROJECT_REPONAME', '')}/{job}",
        commit_sha=env.get("CIRCLE_SHA1"),
        branch=env.get("CIRCLE_BRANCH"),
        job_url=env.get("CIRCLE_BUILD_URL"),
        ci="circleci",
    )


def _jenkins(env: Mapping[str, str]) -> RunInfo:
    return RunInfo(
        run_id=f"jenkins:{env.get('BUILD_TAG', '')}",
        commit_sha=env.get("GIT_COMMIT"),
        branch=env.get("BRANCH_NAME") or env.get("GIT_BRANCH"),
        job_url=env.get("BUILD_URL"),
        ci="jenkins",
    )


#: (the variable that says which CI this is, how to read it), first match wins.
_CIS = (
    ("GITHUB_ACTIONS", _github),
    ("GITLAB_CI", _gitlab),
    ("BUILDKITE", _buildkite),
    ("CIRCLECI", _circleci),
    ("JENKINS_URL", _jenkins),
)


def leg(env: Mapping[str, str]) -> str | None:
    """Which leg of a parallel job this is, where the CI says: ``CVDIAG_RUN_PART`` (e.g.
    ``${{ strategy.job-index }}`` on GitHub Actions, which tells its legs apart nowhere
    else), CircleCI's ``CIRCLE_NODE_INDEX`` of ``CIRCLE_NODE_TOTAL`` > 1, Jenkins'
    ``STAGE_NAME`` (parallel stages share the ``BUILD_TAG``). Legs the CI does not
    name are told apart by their tests when written (``recording.add_leg``)."""
    if env.get(RUN_PART_ENV):
        return env[RUN_PART_ENV]
    if env.get("CIRCLECI") and env.get("CIRCLE_NODE_INDEX") and env.get("CIRCLE_NODE_TOTAL", "1") not in ("", "1"):
        return f"node-{env['CIRCLE_NODE_INDEX']}"
    if env.get("JENKINS_URL") and env.get("STAGE_NAME"):
        return env["STAGE_NAME"]
    return None


def from_ci(env: Mapping[str, str]) -> RunInfo:
    """The run as the CI's environment describes it, with its leg; ``CVDIAG_RUN_ID``
    names it anywhere."""
    found = next((read_ci(env) for var, read_ci in _CIS if env.get(var)), RunInfo())
    run_id = env.get(RUN_ID_ENV) or found.run_id
    part = leg(env)
    if run_id and part:
        run_id = f"{run_id}/{part}"
    return RunInfo(run_id, found.commit_sha, found.branch, found.job_url, found.ci)


def from_git(cwd: str | None = None) -> RunInfo:
    """The commit and branch of the checkout here, when there is one (outside CI)."""

    def git(*args: str) -> str | None:
        try:
            out = subprocess.run(["git", *args], capture_output=True, text=True, timeout=5, cwd=cwd, check=False)
        except (OSError, subprocess.SubprocessError):
            return None
        return out.stdout.strip() or None if out.returncode == 0 else None

    branch = git("rev-parse", "--abbrev-ref", "HEAD")
    return RunInfo(commit_sha=git("rev-parse", "HEAD"), branch=None if branch == "HEAD" else branch)


def described(flags: RunInfo, environ: Mapping[str, str], fallback_id: str | None = None) -> RunInfo:
    """The run: ``flags`` first, then the CI's environment, then ``fallback_id``, then
    (outside CI) git's commit and branch."""
    ci = from_ci(environ)
    return merged(flags, ci, RunInfo(run_id=fallback_id), RunInfo() if ci.ci else from_git())


def merged(*infos: RunInfo) -> RunInfo:
    """Each field from the first of ``infos`` that has it (flags, then CI, then git)."""
    fields = ("run_id", "commit_sha", "branch", "job_url", "ci")
    return RunInfo(*(next((getattr(i, f) for i in infos if getattr(i, f)), None) for f in fields))


# -- tests of a run -------------------------------------------------------------------


def namer(pattern: str | None) -> Any:
    """Stable name of a test id: ``pattern``'s first group (or whole match), else the id.

    ``--name-pattern '^(.*)-r\\d+$'`` names ``checkout-r17`` and ``checkout-r18`` both
    ``checkout``."""
    if not pattern:
        return lambda tid: tid
    try:
        rx = re.compile(pattern)
    except re.error as exc:
        raise ValueError(f"--name-pattern is not a regular expression: {exc}") from None

    def name(tid: str) -> str:
        m = rx.search(tid)
        if m is None:
            return tid
        return (m.group(1) if rx.groups else m.group(0)) or tid

    return name


def _status(row: Mapping[str, Any]) -> str:
    return "fail" if row.get("status") == "fail" else "pass"


def tests_of(
    sources: Sequence[Source],
    run_id: str,
    *,
    name_of: Any = None,
    labels: Mapping[str, str] | None = None,
    outcomes: Mapping[str, str] | None = None,
    slow_s: float = 30.0,
    jobs: int = 1,
) -> tuple[list[Result], Tally]:
    """One result per test id in ``sources``, from the one pass that diagnoses them.
    ``labels`` names tests by id (the plugin's node ids); ``outcomes`` are statuses a
    harness saw, which win over the envelopes'."""
    name_of = name_of or (lambda tid: tid)
    scan = correlate.scan_tests(
        list(sources), classify=True, slow_s=slow_s, jobs=jobs, keep_json=True, evidence=RunEvidence
    )
    results = []
    for row in scan.rows:
        tid = row["test_id"]
        diag = row.get("_diagnosis") or {}
        facts = diag.get("evidence") or {}
        more = diag.get("_facts") or _NO_FACTS
        label = (labels or {}).get(tid) or more["node"] or name_of(tid)
        results.append(
            Result(
                run_id=run_id,
                name=keyed(label, NAME_MAX) or "(no test id)",
                test_id=keyed(tid, FIELD_MAX) or "(no test id)",
                status=(outcomes or {}).get(tid) or _status(row),
                cls=text(diag.get("class") or row.get("class"), FIELD_MAX),
                confidence=number(diag.get("confidence")),
                reason=text(diag.get("reason"), REASON_MAX),
                duration_ms=number(row.get("duration_ms")),
                ttfb_ms=number(facts.get("ttfb_ms")),
                llm_ms=more["llm_ms"],
                llm_attempts=more["llm_attempts"],
                tokens=more["tokens"],
                tool_failures=more["tool_failures"],
                slug=text(row.get("slug"), FIELD_MAX),
                started_at=text(row.get("first_ts"), 40),
            )
        )
    return results, scan.tally


def content_run_id(results: Iterable[Result]) -> str:
    """A run id from what the logs hold: the same logs added twice are one run."""
    return "logs:" + tests_digest(r.test_id for r in results)[:20]


def now() -> str:
    return wire_ts(time.time_ns())


def make_run(info: RunInfo, results: Sequence[Result], started_at: str | None = None) -> tuple[Run, list[Result]]:
    """The run row, and its results carrying its id (the id may come from them)."""
    run_id = keyed(info.run_id, FIELD_MAX) or content_run_id(results)
    results = [r if r.run_id == run_id else _with_run(r, run_id) for r in results]
    starts = [r.started_at for r in results if r.started_at]
    run = Run(
        run_id=run_id,
        started_at=started_at or (min(starts) if starts else now()),
        commit_sha=text(info.commit_sha, FIELD_MAX),
        branch=text(info.branch, FIELD_MAX),
        job_url=text(info.job_url, URL_MAX),
        ci=text(info.ci, FIELD_MAX),
        tests=len(results),
        failed=sum(r.status == "fail" for r in results),
    )
    return run, results


def _with_run(r: Result, run_id: str) -> Result:
    from dataclasses import replace

    return replace(r, run_id=run_id)
