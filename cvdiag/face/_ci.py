"""Test results in the shapes CI systems read: GitHub Actions annotations and JUnit XML.

For ``cvdiag tests --format github|junit``, when the harness that drove the tests is not
pytest (the pytest plugin writes its diagnosis into pytest's own JUnit XML instead).
Rows are those of ``correlate.scan_tests``; verdicts the diagnosis JSON per test id.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from cvdiag.face.render import printable

# Workflow command escaping, as actions/toolkit's command.ts does it (escapeData,
# escapeProperty): '%' first, so that the escapes themselves are not escaped again.
_DATA = {ord("%"): "%25", ord("\r"): "%0D", ord("\n"): "%0A"}
_PROPERTY = {**_DATA, ord(":"): "%3A", ord(","): "%2C"}


def github_data(text: str) -> str:
    """A workflow command's message: one line whatever it holds, no raw control bytes."""
    return printable(text.translate(_DATA))


def github_property(text: str) -> str:
    """A workflow command's property value (``title=...``)."""
    return printable(text.translate(_PROPERTY))


def _tool_error(row: Mapping[str, Any], verdicts: Mapping[str, Any]) -> str | None:
    """``forecast (mcp, server weather) protocol: 'Unknown city'``: the failed tool call
    the diagnosis found, if it found one."""
    v = verdicts.get(row["test_id"])
    facts = v.get("evidence") if isinstance(v, Mapping) else None
    tool = facts.get("tool_error") if isinstance(facts, Mapping) else None
    if not isinstance(tool, Mapping):
        return None
    where = ", ".join(str(p) for p in (tool.get("source"), tool.get("server") and f"server {tool['server']}") if p)
    excerpt = f": {tool['excerpt']!r}" if tool.get("excerpt") else ""
    return f"{tool.get('tool')}" + (f" ({where})" if where else "") + f" {tool.get('kind') or 'failed'}{excerpt}"


def _verdict(row: Mapping[str, Any], verdicts: Mapping[str, Any]) -> tuple[str, str]:
    """(class, reason) of a failed test; the terminal state when it was not diagnosed."""
    v = verdicts.get(row["test_id"])
    if isinstance(v, Mapping):
        return str(v.get("class") or "failed"), str(v.get("reason") or "")
    return str(row.get("class") or "failed"), f"the test ended {row['terminal']}"


def github_annotations(rows: Sequence[Mapping[str, Any]], verdicts: Mapping[str, Any]) -> Iterator[str]:
    """One ``::error`` line per failed test: title the class, message the reason and id."""
    for row in rows:
        if row["status"] != "fail":
            continue
        cls, reason = _verdict(row, verdicts)
        yield f"::error title={github_property(cls)}::{github_data(reason)} (test {printable(row['test_id'])})"


def junit_xml(rows: Sequence[Mapping[str, Any]], verdicts: Mapping[str, Any], hints: Mapping[str, str]) -> bytes:
    """A JUnit XML report: one ``testcase`` per test id, a ``failure`` (type the class,
    message the reason) for each failed one. ``hints[id]`` is a command to look closer."""
    failed = sum(r["status"] == "fail" for r in rows)
    suite = ET.Element(
        "testsuite",
        name="cvdiag",
        tests=str(len(rows)),
        failures=str(failed),
        errors="0",
        skipped="0",
        time=f"{sum(r['duration_ms'] for r in rows) / 1000:.3f}",
        timestamp=rows[0]["first_ts"] if rows else "",
    )
    for row in rows:
        tid = printable(row["test_id"])  # XML 1.0 cannot hold most control characters at all
        slug = printable(row["slug"]).split(",")[0]
        case = ET.SubElement(
            suite,
            "testcase",
            classname=f"cvdiag.{slug}" if slug else "cvdiag",
            name=tid,
            time=f"{row['duration_ms'] / 1000:.3f}",
        )
        if row["status"] != "fail":
            continue
        cls, reason = (printable(x) for x in _verdict(row, verdicts))
        props = ET.SubElement(case, "properties")
        tool = _tool_error(row, verdicts)
        named = [("cvdiag_test_id", tid), ("cvdiag_class", cls), ("cvdiag_reason", reason)]
        if tool is not None:
            named.append(("cvdiag_tool_error", printable(tool)))
        for name, value in named:
            ET.SubElement(props, "property", name=name, value=value)
        failure = ET.SubElement(case, "failure", type=cls, message=reason or cls)
        details = [reason, f"test id: {tid}", f"slug: {printable(row['slug'])}", f"terminal: {row['terminal']}"]
        if tool is not None:
            details.append(f"tool: {printable(tool)}")
        if row["test_id"] in hints:
            details.append(f"next: {printable(hints[row['test_id']])}")
        failure.text = "\n".join(details)
    root = ET.Element("testsuites", name="cvdiag", tests=str(len(rows)), failures=str(failed))
    root.append(suite)
    ET.indent(root)
    return ET.tostring(root, encoding="utf-8", xml_declaration=True) + b"\n"
