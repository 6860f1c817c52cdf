"""`report RUN --format issue [--for SERVER]`: the Markdown a maintainer asks for, ready to
paste into the server's bug tracker (secrets already blanked by the facts it is given, and
again by the sink that writes it).

The text is inert wherever it came from (a server's log, a package's metadata, a hand-edited
record): prose through `safetext.markdown` (no HTML, no link, no mention, no heading), code
in blocks whose fence no backtick run inside can close. It fits in GitHub's issue body: past
MAX_BODY characters the least decisive parts are cut first (the package list, later failures'
context, hang frames, what was tried), each cut said where it happened.
"""

from __future__ import annotations

import json
import shlex
from dataclasses import dataclass, field

from diagbench.debug.record import Debug
from diagbench.jsonvalue import JSONObject
from diagbench.judge.view import RunView
from diagbench.records.parts import Hang
from diagbench.records.record import AttemptRecord
from diagbench.render.debug import debug_issue_section
from diagbench.render.environment import environment_lines
from diagbench.render.triage import price_text
from diagbench.safetext import fence, markdown, markdown_code, markdown_line
from diagbench.triage.issue import TRACKERS, Failure, IssueFacts
from diagbench.triage.record import Triage
from diagbench.vocab import outcome_label

__all__ = ["MAX_BODY", "render_issue"]

MAX_BODY = 65_536  # GitHub refuses an issue body longer than this many characters
CODE_LINE_CHARS = 1_000  # a code line longer than this is clipped (a server's megabyte line)
COMMAND_CHARS = 8_000  # a command line is kept whole up to this
PROSE_CHARS = 2_000  # a reason, a cause's message, an environment line
TITLE_CHARS = 90


@dataclass
class _Block:
    """A part of the issue: `head` lines always kept; `body` lines cut from the end when the
    issue is too long, blocks of higher `rank` first (0: never cut)."""

    head: list[str]
    body: list[str] = field(default_factory=list)
    rank: int = 0
    info: str | None = None  # the body is a code block with this info string
    tail: list[str] = field(default_factory=list)  # after the body, always kept
    cut: int = 0  # body lines left out

    def lines(self) -> list[str]:
        body = fence(self.body, self.info) if self.info is not None and self.body else list(self.body)
        note = [
            "",
            f"*{self.cut} more lines left out: GitHub takes {MAX_BODY:,} characters (the run directory has them)*",
        ]
        return [*self.head, *body, *(note if self.cut else []), *self.tail, ""]


def render_issue(
    view: RunView, facts: IssueFacts, triage: Triage | None, server: str | None, debug: Debug | None = None
) -> str:
    tracker = TRACKERS.get(server or (triage.server if triage else None) or (debug.server if debug else None) or "")
    blocks = [_Block([f"## {_title(view, facts)}"])]
    if tracker:
        blocks.append(_Block([f"<!-- for {tracker.name}: {tracker.url} -->"]))
    blocks += _environment(facts.environment, tracker.environment if tracker else None)
    blocks += _command(facts, triage)
    for index, failure in enumerate(facts.failures):
        blocks += _failure(failure, rank=0 if index == 0 else 3)
    if debug is not None:  # `debug` and `triage --debug`: the launch with debugging on (inert Markdown already)
        blocks.append(_Block(debug_issue_section(debug)[:-1]))
    if triage is not None:
        blocks.append(_tried(triage))
    blocks += _flaky(facts)
    blocks.append(
        _Block([f"<sub>Collected by diagbench from run {_code(view.run_id)} ({facts.launches} launches).</sub>"])
    )
    return _fit(blocks)


def _title(view: RunView, facts: IssueFacts) -> str:
    if facts.failures:
        r = facts.failures[0].record
        line = f": {_clip(r.evidence.text, TITLE_CHARS)}" if r.evidence else ""
        return markdown(f"Launch fails with {r.label}{line}")
    return markdown(f"Launch report ({view.spec_name})")


def _environment(env: JSONObject, asks: str | None) -> list[_Block]:
    head = ["### Environment", ""]
    packages: list[str] = []
    if "variables" in env:  # the server's own (manifest `environment`): its words, then its packages
        lines = environment_lines(env)
        head += [f"- {_prose(line)}" for line in lines if not line.startswith("  ")]
        packages = [_clip_code(line.strip()) for line in lines if line.startswith("  ")]
        env = {}
    for key, value in env.items():
        if key == "argv" or value in (None, "", [], {}):
            continue
        shown = json.dumps(value, sort_keys=True) if isinstance(value, dict | list) else str(value)
        head.append(f"- **{_prose(str(key))}**: {_prose(shown)}")
    blocks = [_Block(head)]
    if packages:
        blocks.append(_Block([], packages, rank=5, info="text"))
    if asks:
        blocks.append(_Block([f"<!-- also paste the output of `{asks}`, as the template asks -->"]))
    return blocks


def _command(facts: IssueFacts, triage: Triage | None) -> list[_Block]:
    """A triage's command as given; else the first failing launch's, as it was launched."""
    launched = _launched(facts.failures[0].record) if facts.failures else ""
    command = triage.command if triage is not None else launched
    if not command:
        return []
    return [_Block(["### Command", ""], [_clip_code(command, COMMAND_CHARS)], info="sh")]


def _launched(record: AttemptRecord) -> str:
    """The record's variables (not diagbench's own: unbuffered output, fresh cache folders) and argv."""
    env = [
        f"{k}={shlex.quote(v)}"
        for k, v in record.env_changes.items()
        if v is not None and k != "PYTHONUNBUFFERED" and "diagbench-caches-" not in v
    ]
    return " ".join([*env, *(shlex.quote(w) for w in record.command)])


def _failure(failure: Failure, rank: int) -> list[_Block]:
    r = failure.record
    name = "the command" if r.cell_id == "none" else _code(r.cell_id)  # a triage's command is `none`
    head = [f"### {name}: {markdown(r.label)}" + (f" ({markdown(r.signature)})" if r.signature else "")]
    if r.reason and not r.reason.startswith("failure line"):  # the lines below say it better
        head += ["", markdown_line(_clip(r.reason, PROSE_CHARS))]
    if r.first_failed_rank is not None:  # a launch of many ranks: the rank whose error decides
        head += ["", f"Rank {r.first_failed_rank} failed first; the other ranks' errors are its fallout."]
    blocks = [_Block(head)]
    if failure.lines:
        decided = r.evidence.line_no if r.evidence else -1
        shown = [f"{'>' if n == decided else ' '} {n:>5} | {_clip_code(text)}" for n, text in failure.lines]
        blocks.append(_Block([], shown, rank=rank, info="text"))
    if r.cause:
        cause = r.cause
        where = f" (line {cause.line_no})" if cause.line_no else ""
        blocks.append(_Block([f"**Cause**{where}: {_code(cause.type)}: {_prose(cause.message)}"]))
    if r.hang:
        blocks.append(_hang(r.hang))
    return blocks


def _hang(hang: Hang) -> _Block:
    head = f"**Hang**: pid {hang.pid} ({markdown(hang.name)}), thread {markdown(hang.thread or '')}"
    head += f", at {markdown(hang.site)}" if hang.site else ""
    head += f"; {markdown(hang.words)}" if hang.words else ""
    shown = [_clip_code(f) for f in hang.frames[:40]]
    return _Block([head, ""], shown, rank=4, info="text") if shown else _Block([head])


def _tried(triage: Triage) -> _Block:
    head = ["### What was tried", ""]
    if not triage.remedies:
        return _Block([*head, markdown_line(triage.reason or "nothing")])
    rows = []
    for t in triage.remedies:
        change = "<br>".join(_code(c) for c in t.change)
        outcome = markdown(outcome_label(t.outcome or "not run", t.failure_class))
        startup = f"{t.startup_s:.1f}s" if t.startup_s is not None else ""
        rows.append(f"| {change} | {outcome} | {startup} | {markdown(price_text(t.price))} |")
    if triage.recommendation:
        end = f"It comes up with: {_code(', '.join(triage.recommendation.changes))}."
    else:
        end = "None of these made it come up."
    return _Block([*head, "| change | outcome | start-up | price |", "|---|---|---|---|"], rows, rank=1, tail=["", end])


def _flaky(facts: IssueFacts) -> list[_Block]:
    if not facts.flaky:
        return []
    return [_Block(["### Flaky", ""], [f"- {markdown(line)}" for line in facts.flaky], rank=2)]


def _code(text: str) -> str:
    """`text` as an inline code span (no backtick inside can end it)."""
    return f"`{markdown_code(_clip(text, PROSE_CHARS))}`"


def _prose(text: str) -> str:
    return markdown(_clip(text, PROSE_CHARS))


def _clip(text: str, size: int) -> str:
    text = " ".join(text[: size * 2].split())
    return text if len(text) <= size else text[: size - 1] + "…"


def _clip_code(text: str, size: int = CODE_LINE_CHARS) -> str:
    if len(text) <= size:
        return text
    return f"{text[:size]}… ({len(text) - size} characters more)"


def _fit(blocks: list[_Block]) -> str:
    """The issue's text within MAX_BODY: the cuttable blocks' lines left out from their ends,
    the highest rank first, until it fits; a note where lines went."""
    text = "\n".join(line for b in blocks for line in b.lines())
    for block in sorted((b for b in blocks if b.rank), key=lambda b: -b.rank):
        while len(text) > MAX_BODY and block.body:
            over = len(text) - MAX_BODY
            drop = max(1, min(len(block.body), over // max(1, max(len(x) for x in block.body))))
            del block.body[len(block.body) - drop :]
            block.cut += drop
            text = "\n".join(line for b in blocks for line in b.lines())
    return text if len(text) <= MAX_BODY else _cut_at_a_line(text)


def _cut_at_a_line(text: str) -> str:
    """The lines of `text` that fit with a note (the kept parts are bounded: only a run with
    thousands of hand-edited fields comes here), any open code block closed."""
    note = f"*cut here: GitHub takes {MAX_BODY:,} characters (the run directory has the rest)*"
    kept: list[str] = []
    size, open_fence = 0, ""
    for line in text.split("\n"):
        closing = open_fence if open_fence else ""
        if size + len(line) + len(closing) + len(note) + 8 > MAX_BODY:
            break
        kept.append(line)
        size += len(line) + 1
        mark = line[: len(line) - len(line.lstrip("`"))]
        if len(mark) >= 3 and (not open_fence or (mark == open_fence and line == mark)):
            open_fence = "" if open_fence else mark
    return "\n".join([*kept, *([open_fence] if open_fence else []), "", note, ""])
