"""`report RUN --format issue [--for SERVER]`: the Markdown a maintainer asks for, ready to
paste into the server's bug tracker (secrets already blanked by the facts it is given)."""

from __future__ import annotations

import json
import shlex
from collections.abc import Mapping
from typing import Any

from diagbench.debug.record import Debug
from diagbench.judge.view import RunView
from diagbench.records.parts import Hang
from diagbench.records.record import AttemptRecord
from diagbench.render.debug import debug_issue_section
from diagbench.render.environment import environment_lines
from diagbench.render.text import visible
from diagbench.render.triage import price_text
from diagbench.triage.issue import TRACKERS, Failure, IssueFacts
from diagbench.triage.record import Triage
from diagbench.vocab import outcome_label

FENCE = "```"


def render_issue(
    view: RunView, facts: IssueFacts, triage: Triage | None, server: str | None, debug: Debug | None = None
) -> str:
    tracker = TRACKERS.get(server or (triage.server if triage else None) or (debug.server if debug else None) or "")
    title = _title(view, facts, triage)
    out = [f"## {title}", ""]
    if tracker:
        out += [f"<!-- for {tracker.name}: {tracker.url} -->", ""]
    out += _environment(facts.environment, tracker.environment if tracker else None)
    out += _command(facts, triage)
    for failure in facts.failures:
        out += _failure(failure)
    if debug is not None:  # `debug` and `triage --debug`: the launch with debugging on
        out += debug_issue_section(debug)
    if triage is not None:
        out += _tried(triage)
    out += _flaky(view, facts)
    out += [f"<sub>Collected by diagbench from run `{view.run_id}` ({facts.launches} launches).</sub>", ""]
    return "\n".join(out)


def _title(view: RunView, facts: IssueFacts, triage: Triage | None) -> str:
    if facts.failures:
        r = facts.failures[0].record
        line = f": {_clip(r.evidence.text, 90)}" if r.evidence else ""
        return f"Launch fails with {r.label}{line}"
    return f"Launch report ({view.spec_name})"


def _environment(env: Mapping[str, Any], asks: str | None) -> list[str]:
    out = ["### Environment", ""]
    if "variables" in env:  # the server's own (manifest `environment`): its words, then its packages
        lines = environment_lines(env)
        out += [f"- {visible(line)}" for line in lines if not line.startswith("  ")]
        packages = [line.strip() for line in lines if line.startswith("  ")]
        out += ["", f"{FENCE}text", *packages, FENCE] if packages else []
        env = {}
    for key, value in env.items():
        if key == "argv" or value in (None, "", [], {}):
            continue
        shown = json.dumps(value, sort_keys=True) if isinstance(value, dict | list) else str(value)
        out.append(f"- **{key}**: {visible(shown)}")
    if asks:
        out += ["", f"<!-- also paste the output of `{asks}`, as the template asks -->"]
    return [*out, ""]


def _command(facts: IssueFacts, triage: Triage | None) -> list[str]:
    """A triage's command as given; else the first failing launch's, as it was launched."""
    launched = _launched(facts.failures[0].record) if facts.failures else ""
    command = triage.command if triage is not None else launched
    if not command:
        return []
    return ["### Command", "", f"{FENCE}sh", visible(command), FENCE, ""]


def _launched(record: AttemptRecord) -> str:
    """The record's variables (not diagbench's own: unbuffered output, fresh cache folders) and argv."""
    env = [
        f"{k}={shlex.quote(v)}"
        for k, v in record.env_changes.items()
        if v is not None and k != "PYTHONUNBUFFERED" and "diagbench-caches-" not in v
    ]
    return " ".join([*env, *(shlex.quote(w) for w in record.command)])


def _failure(failure: Failure) -> list[str]:
    r = failure.record
    name = "the command" if r.cell_id == "none" else f"`{r.cell_id}`"  # a triage's command is its cell `none`
    out = [f"### {name}: {r.label}" + (f" ({r.signature})" if r.signature else ""), ""]
    if r.reason and not r.reason.startswith("failure line"):  # the lines below say it better
        out += [visible(r.reason), ""]
    if failure.lines:
        decided = r.evidence.line_no if r.evidence else -1
        out += [f"{FENCE}text"]
        out += [f"{'>' if n == decided else ' '} {n:>5} | {visible(text)}" for n, text in failure.lines]
        out += [FENCE, ""]
    if r.cause:
        cause = r.cause
        out += [f"**Cause** (line {cause.line_no}): `{cause.type}`: {visible(cause.message)}", ""]
    if r.hang:
        out += _hang(r.hang)
    return out


def _hang(hang: Hang) -> list[str]:
    head = f"**Hang**: pid {hang.pid} ({hang.name}), thread {hang.thread or ''}"
    out = [head + (f", at {hang.site}" if hang.site else ""), ""]
    if hang.frames:
        out += [f"{FENCE}text", *(visible(f) for f in hang.frames[:40]), FENCE, ""]
    return out


def _tried(triage: Triage) -> list[str]:
    out = ["### What was tried", ""]
    if not triage.remedies:
        return [*out, triage.reason or "nothing", ""]
    out += ["| change | outcome | start-up | price |", "|---|---|---|---|"]
    for t in triage.remedies:
        change = "<br>".join(f"`{_md(c)}`" for c in t.change)
        outcome = outcome_label(t.outcome or "not run", t.failure_class)
        startup = f"{t.startup_s:.1f}s" if t.startup_s is not None else ""
        out.append(f"| {change} | {outcome} | {startup} | {_md(price_text(t.price))} |")
    if triage.recommendation:
        rec = triage.recommendation
        out += ["", f"It comes up with: `{_md(', '.join(rec.changes))}`."]
    else:
        out += ["", "None of these made it come up."]
    return [*out, ""]


def _flaky(view: RunView, facts: IssueFacts) -> list[str]:
    if not facts.flaky:
        return []
    return ["### Flaky", "", *(f"- {visible(line)}" for line in facts.flaky), ""]


def _md(text: str) -> str:
    return visible(text).replace("|", "\\|")


def _clip(text: str, size: int) -> str:
    text = visible(text).strip()
    return text if len(text) <= size else text[: size - 1] + "…"
