"""Pure rendering of a `RunView`: a rich table, Markdown, JSON, JUnit XML."""

from __future__ import annotations

import json
import re
import xml.etree.ElementTree as ET
from collections.abc import Sequence

from rich.console import Console, Group, RenderableType
from rich.text import Text

from diagbench import safetext
from diagbench.jsonvalue import JSON, JSONObject
from diagbench.judge.cells import cell_counts, repeated
from diagbench.judge.verdicts import Verdict
from diagbench.judge.view import RunView
from diagbench.records.record import AttemptRecord
from diagbench.render.fit import Column, fit
from diagbench.render.formats import Shown
from diagbench.render.hangs import hangs_markdown, outcome_words, saved_words
from diagbench.safetext import one_line
from diagbench.vocab import VerdictWord

__all__ = [
    "LINE_CHARS",
    "OUTCOME_STYLE",
    "VERDICT_STYLE",
    "deciding_line",
    "footer",
    "print_run",
    "render_json",
    "render_junit",
    "render_markdown",
    "render_table",
    "run_table",
]

OUTCOME_STYLE = {
    "ready": "green",
    "failed": "red",
    "crashed": "red",
    "timeout": "yellow",
    "launch_error": "magenta",
    "cancelled": "dim",
    "skipped": "dim",
    "internal_error": "bold magenta",
}
VERDICT_STYLE = {"supported": "bold green", "refuted": "bold red", "inconclusive": "bold yellow"}
LINE_CHARS = 110
DOCUMENT_LINE_CHARS = 400  # a document (Markdown, JUnit) has no terminal to fit: an OOM line's "X GiB is free" stays
_STAMP = re.compile(r"^(L\d+: )\[\d{4}-\d\d-\d\d[ T][\d:.]+\] ")  # a log's own timestamp: noise here


def deciding_line(record: AttemptRecord, size: int = LINE_CHARS) -> str:
    """`L12: <the line> <- <its root cause>`, the line cut at `size` characters; in a launch of
    many ranks, `rank 1 failed first: ` before it."""
    first = f"rank {record.first_failed_rank} failed first: " if record.first_failed_rank is not None else ""
    if record.evidence:
        return f"{first}{_at(record.evidence.line_no)}{_clip(record.evidence.text, size)}{_because(record)}"
    return first + record.reason + _because(record)


def _because(record: AttemptRecord) -> str:
    """` <- torch.OutOfMemoryError: CUDA out of memory (L212)`: the root cause under it,
    where it is another line than the deciding one."""
    cause = record.cause
    if not cause or (record.evidence and cause.line_no == record.evidence.line_no):
        return ""
    said = f"{cause.type}: {cause.message}" if cause.message else cause.type
    return f" <- {_clip(said, 70)} (L{cause.line_no})"


def _at(line_no: int) -> str:
    """`L12: ` before a log line; nothing before an event (line 0: a ready request's answer, a worker's death)."""
    return f"L{line_no}: " if line_no else ""


def _clip(text: str, size: int = LINE_CHARS) -> str:
    return text if len(text) <= size else text[: size - 1] + "…"


def _verdict_line(v: Verdict, size: int = 90) -> str:
    evidence = v.evidence
    if evidence is None:
        return v.reason
    line = f"{evidence.cell_id} {_at(evidence.line_no)}{_clip(evidence.text, size)}"
    return f"{line} (flaky: {v.flaky})" if v.flaky else line


def _gpus(r: AttemptRecord) -> str:
    return ",".join(r.gpus)


def _tally(view: RunView) -> str:
    """`6 attempts: 4 launched (1 cancelled while it ran), 2 cancelled before launch` where some
    attempt did not run to its outcome; else nothing. Launched is what started a server."""
    records = view.records
    if all(r.outcome.ran for r in records):
        return ""
    launched = [r for r in records if r.outcome.ran or r.started_at is not None]
    stopped = [r for r in launched if not r.outcome.ran]
    idle = [r for r in records if r not in launched]
    head = f"{len(records)} attempts: {len(launched)} launched"
    if stopped:
        head += (
            f" ({_counted(stopped)} while it ran)" if len(stopped) == 1 else f" ({_counted(stopped)} while they ran)"
        )
    return head + (f", {_counted(idle)} before launch" if idle else "")


def _counted(records: Sequence[AttemptRecord]) -> str:
    words = {o: sum(1 for r in records if r.outcome is o) for o in dict.fromkeys(r.outcome for r in records)}
    return ", ".join(f"{n} {o.value}" for o, n in words.items())


# -- terminal ---------------------------------------------------------------------------


def render_table(view: RunView, width: int | None = None) -> RenderableType:
    """Terminal tables, fitted to `width` (render/fit.py): one column per matrix axis that
    varies, so a cell reads across its factors; the axes with one label are said in the title."""
    parts: list[RenderableType] = [_outcomes_table(view, width)]
    if repeated(view.records):
        parts.append(_counts_table(view, width))
    if view.verdicts:
        parts.append(_verdicts_table(view, width))
    for violation in view.violations:
        parts.append(
            Text(
                f"expect #{violation.expectation + 1} violated: {one_line(violation.cell_id)} wanted "
                f"{violation.wanted}, got {violation.got}",
                style="bold red",
            )
        )
    return Group(*parts)


def run_table(view: RunView, width: int | None = None) -> Shown:
    """The tables, then the footer: the run's path on a line of its own, never cut at the
    terminal's width (it is what `report` and `--resume` need)."""
    return Shown(render_table(view, width), tuple(Text(line, style="dim") for line in footer(view)))


def print_run(console: Console, view: RunView) -> None:
    """`run_table` on `console`, at its width."""
    run_table(view, console.width).print_to(console)


def _outcomes_table(view: RunView, width: int | None) -> RenderableType:
    records = view.records
    axes = list(records[0].params) if records else []
    varying = [a for a in axes if len({r.params.get(a, "") for r in records}) > 1] or axes
    constant = [f"{a}={records[0].params.get(a, '')}" for a in axes if a not in varying]
    title = one_line(f"{view.spec_name}: outcomes" + (f" (every cell: {', '.join(constant)})" if constant else ""))
    one_repeat = all(r.repeat == 1 for r in records)
    columns = [Column(one_line(a), [_text(r.params.get(a, "")) for r in records]) for a in varying]  # a spec's words
    columns.append(Column("#", [Text(str(r.repeat)) for r in records], drop=5 if one_repeat else 0))
    if any(r.gpus for r in records):
        one_set = len({_gpus(r) for r in records}) == 1
        columns.append(Column("gpus", [Text(_gpus(r)) for r in records], drop=4 if one_set else 2))
    columns += [
        Column(
            "outcome", [Text(outcome_words(r, short=True), style=OUTCOME_STYLE.get(r.outcome, "")) for r in records]
        ),
        Column("phase", [_text(r.phase or "") for r in records], drop=1),
        Column("time", [Text(_seconds(r)) for r in records], drop=3),
        Column(
            "deciding line",
            [_text(_STAMP.sub(r"\1", deciding_line(r), count=1)) for r in records],
            flex=True,
            lines=2,
        ),
    ]
    return fit(title, columns, width)


def _outcome(r: AttemptRecord) -> Text:
    return Text(outcome_words(r, short=True), style=OUTCOME_STYLE.get(r.outcome, ""))


def _seconds(r: AttemptRecord) -> str:
    return f"{r.time_to_outcome_s:.2f}s" if r.time_to_outcome_s is not None else ""


def _verdicts_table(view: RunView, width: int | None) -> RenderableType:
    verdicts = view.verdicts
    columns = [
        Column("id", [_text(v.id) for v in verdicts]),
        Column("verdict", [Text(v.verdict, style=VERDICT_STYLE[v.verdict]) for v in verdicts]),
        Column("why", [_text(_verdict_line(v)) for v in verdicts], flex=True, lines=2),
        Column("meaning", [_text(v.meaning or "") for v in verdicts], flex=True),
    ]
    # always one layout: sentences under each verdict, whatever the width and the run
    return fit("hypotheses (judged against the pre-registered copy)", columns, width, boxed=False)


def _text(text: str) -> Text:
    """A table cell from a server's or a record's words: never markup, never a control sequence."""
    return Text(one_line(text))


def _counts_table(view: RunView, width: int | None) -> RenderableType:
    counts = cell_counts(view.records)
    columns = [
        Column("cell", [_text(c.cell_id) for c in counts], flex=True),  # broken after its commas
        Column("outcomes", [Text(str(c), style="yellow" if c.flaky else "") for c in counts], flex=True),
    ]
    return fit("cells over their repeats", columns, width)


def footer(view: RunView) -> list[str]:
    """`run ID (complete), at:` then the path alone on its line; the tally; the hash check."""
    state = "complete" if view.complete else "partial"
    lines = [f"run {view.run_id} ({state}) at", str(view.path)]
    tally = _tally(view)
    if tally:
        lines.append(tally)
    if saved := saved_words(view.records, view.timeout_s):
        lines.append(saved)
    if view.verdicts:  # no hypotheses: no pre-registration to vouch for
        check = "ok" if view.hashes_match else "MISMATCH: the manifest was edited after the run"
        lines.append(f"hypotheses sha256 {view.hypotheses_sha256[:16]}… ({check})")
    return lines


# -- Markdown ---------------------------------------------------------------------------


_md = safetext.markdown
_code = safetext.markdown_code


def render_markdown(view: RunView, sections: Sequence[str] = ()) -> str:
    """The run in Markdown; `sections` (an isolation's) go first, after the description."""
    out = [f"## diagbench: {_md(view.spec_name)}", ""]
    if view.description:
        out += [_md(view.description.strip()), ""]
    out += [part for section in sections for part in (section.rstrip("\n"), "")]
    if view.verdicts:
        out += ["### Hypotheses", "", "| hypothesis | verdict | why | meaning |", "|---|---|---|---|"]
        for v in view.verdicts:
            out.append(
                f"| `{_code(v.id)}` {_md(v.claim)} | **{v.verdict}** | {_md(_verdict_line(v, DOCUMENT_LINE_CHARS))} "
                f"| {_md(v.meaning or '')} |"
            )
        out.append("")
    out += _markdown_cells(view)
    if repeated(view.records):
        out += ["### Cells over their repeats", "", "| cell | outcomes |", "|---|---|"]
        out += [f"| `{_code(c.cell_id)}` | {_md(str(c))} |" for c in cell_counts(view.records)]
        out.append("")
    tally = _tally(view)
    if tally:
        out += [tally, ""]
    if saved := saved_words(view.records, view.timeout_s):
        out += [saved, ""]
    out += hangs_markdown(view)
    for violation in view.violations:
        out.append(
            f"- **expect #{violation.expectation + 1} violated**: `{_code(violation.cell_id)}` wanted "
            f"{violation.wanted}, got {violation.got}"
        )
    ending = f"Run `{_code(view.run_id)}`, {'complete' if view.complete else 'partial'}"
    if view.verdicts:
        match = "matches" if view.hashes_match else "DOES NOT match"
        ending += f"; hypotheses sha256 `{view.hypotheses_sha256}` ({match} the manifest)"
    out += ["", ending + "."]
    return "\n".join(out) + "\n"


def _markdown_cells(view: RunView) -> list[str]:
    with_gpus = any(r.gpus for r in view.records)
    gpus_head, gpus_rule = (" gpus |", "---|") if with_gpus else ("", "")
    out = [
        "### Cells",
        "",
        f"| cell | # |{gpus_head} outcome | phase | time to outcome | deciding line |",
        f"|---|---|{gpus_rule}---|---|---|---|",
    ]
    for r in view.records:
        seconds = f"{r.time_to_outcome_s:.2f} s" if r.time_to_outcome_s is not None else ""
        gpus = f" {_gpus(r)} |" if with_gpus else ""
        phase = _md(r.phase or "")
        label = _md(outcome_words(r))
        line = _md(deciding_line(r, DOCUMENT_LINE_CHARS))
        out.append(f"| `{_code(r.cell_id)}` | {r.repeat} |{gpus} {label} | {phase} | {seconds} | {line} |")
    out.append("")
    return out


# -- JSON -------------------------------------------------------------------------------


def render_json(view: RunView, extra: JSONObject | None = None) -> str:
    """The run as one JSON object; `extra` keys (an isolation's) are added to it."""
    data: dict[str, JSON] = {
        "run_id": view.run_id,
        "path": str(view.path),
        "spec": view.spec_name,
        "complete": view.complete,
        "hypotheses_sha256": view.hypotheses_sha256,
        "hypotheses_sha256_matches": view.hashes_match,
        "attempts": [r.to_json() for r in view.records],
        "cells": [c.to_json() for c in cell_counts(view.records)],
        "verdicts": [v.to_json() for v in view.verdicts],
        "violations": [v.to_json() for v in view.violations],
        **(extra or {}),
    }
    return json.dumps(data, indent=2) + "\n"


# -- JUnit ------------------------------------------------------------------------------


def render_junit(view: RunView) -> str:
    """One testcase per attempt (fails when its expectation fails) and one per hypothesis
    (fails when refuted, skipped when inconclusive). Readable by common CI JUnit readers."""
    suites = ET.Element("testsuites", name=f"diagbench {view.spec_name}")
    attempts = ET.SubElement(suites, "testsuite", name=f"{view.spec_name}.attempts")
    broken = {(v.cell_id, v.attempt): v for v in view.violations}
    for r in view.records:
        case = ET.SubElement(
            attempts, "testcase", classname=f"{view.spec_name}.cells", name=r.attempt, time=f"{r.duration_s or 0:.3f}"
        )
        violation = broken.get((r.cell_id, r.attempt))
        if violation:
            failure = ET.SubElement(
                case, "failure", message=f"wanted {violation.wanted}, got {violation.got}", type="expectation"
            )
            failure.text = deciding_line(r)
        elif not r.outcome.ran:
            ET.SubElement(case, "skipped", message=r.reason or "cancelled")
        ET.SubElement(case, "system-out").text = _xml_safe(view.log_tails.get(r.attempt, ""))
    hyp = ET.SubElement(suites, "testsuite", name=f"{view.spec_name}.hypotheses")
    for v in view.verdicts:
        case = ET.SubElement(hyp, "testcase", classname=f"{view.spec_name}.hypotheses", name=v.id, time="0")
        if v.verdict is VerdictWord.REFUTED:
            ET.SubElement(
                case, "failure", message=f"refuted: {v.meaning or v.claim}", type="refuted"
            ).text = _verdict_line(v)
        elif v.verdict is VerdictWord.INCONCLUSIVE:
            ET.SubElement(case, "skipped", message=f"inconclusive: {v.reason}")
        ET.SubElement(case, "system-out").text = _xml_safe(f"{v.claim}\n{v.verdict}: {v.meaning or ''}")
    for suite in (attempts, hyp):
        cases = list(suite.iter("testcase"))
        suite.set("tests", str(len(cases)))
        suite.set("failures", str(sum(1 for c in cases if c.find("failure") is not None)))
        suite.set("skipped", str(sum(1 for c in cases if c.find("skipped") is not None)))
        suite.set("errors", "0")
    for element in suites.iter():  # every text and attribute: a server's line, a spec's name, a reason
        element.text = safetext.xml(element.text) if element.text else element.text
        for name, value in element.attrib.items():
            element.set(name, safetext.xml(value))
    ET.indent(suites)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(suites, encoding="unicode") + "\n"


def _xml_safe(text: str) -> str:
    """XML 1.0 cannot carry most control characters; server logs can (shown as escapes: safetext.xml)."""
    return safetext.xml(text)
