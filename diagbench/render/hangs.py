"""Hung attempts where people look: `timeout (stalled 45s in capture) at ncclCommInitRank` in
the live view and the tables, and each hung attempt's stacks in the Markdown and HTML reports
(the frame that names the wait marked)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from diagbench import safetext
from diagbench.judge.view import RunView
from diagbench.records.parts import Hang
from diagbench.records.record import AttemptRecord
from diagbench.render.htmlkit import Html, el

__all__ = ["MARK", "STACK_CHARS", "hangs_html", "hangs_markdown", "hung", "outcome_words", "saved_words", "short_site"]

STACK_CHARS = 20_000  # of one process's stacks in a report (the file keeps them all)
MARK = "=> "  # before the waiting frame in Markdown (a code block has no colour)


def short_site(site: str) -> str:
    """`threading.Lock.acquire in scheduler.py:event_loop` -> `threading.Lock.acquire`."""
    return site.split(" in ", 1)[0]


def outcome_words(r: AttemptRecord, short: bool = False) -> str:
    """The outcome label, with the stall and the hang site when there are any."""
    words = r.label
    if r.stalled and r.stalled_after_s is not None:
        where = f" in {r.phase}" if r.phase else ""
        words += f" (stalled {r.stalled_after_s:.0f}s{where})"
    site = r.hang.site if r.hang else None
    if site:
        words += f" at {short_site(site) if short else site}"
    if r.hang and r.hang.words:  # a launch of many ranks: where each waits, the odd ones named
        odd = r.hang.odd_ranks
        if short:
            words += f", odd rank{'s' if len(odd) > 1 else ''} {', '.join(map(str, odd))}" if odd else ""
        else:
            words += f" [{r.hang.words}]"
    return words


def saved_words(records: Sequence[AttemptRecord], timeout_s: float | None) -> str | None:
    """`2 stalled attempts ended 236s before the 120s timeout` (in all), or None."""
    stalled = [r for r in records if r.stalled and r.time_to_outcome_s is not None]
    if not stalled or not timeout_s:
        return None
    saved = sum(max(0.0, timeout_s - (r.time_to_outcome_s or 0.0)) for r in stalled)
    noun = "attempt" if len(stalled) == 1 else "attempts"
    return f"{len(stalled)} stalled {noun} ended {saved:.0f}s in all before the {timeout_s:g}s timeout"


def hung(view: RunView) -> list[tuple[AttemptRecord, Hang]]:
    return [(r, r.hang) for r in view.records if r.hang is not None]


def _stacks(view: RunView, r: AttemptRecord) -> list[tuple[str, str]]:
    """(file, text) of each process's stacks, as written (redacted when taken), clipped."""
    out = []
    for name in r.hang.files if r.hang else ():
        path = view.path / "cells" / r.attempt / name
        try:
            text = path.read_text(encoding="utf-8", errors="replace")
        except OSError:
            text = "(not readable)"
        out.append((name, view.redactor.log(text[:STACK_CHARS])))
    return out


def _is_waiting(line: str, frame: str | None) -> bool:
    return bool(frame) and line.strip() == frame


def _is_main(name: str, hang: Hang) -> bool:
    """The stacks file of the process that holds the waiting thread."""
    return Path(name).name == f"{hang.pid}.txt"


def hangs_markdown(view: RunView) -> list[str]:
    """A `### Hung attempts` section: per attempt, its site and every process's stacks."""
    records = hung(view)
    if not records:
        return []
    out = ["### Hung attempts", ""]
    for r, hang in records:
        who = f"thread {hang.thread} of pid {hang.pid} ({hang.name})"
        head = f"#### `{safetext.markdown_code(r.attempt)}`: {safetext.markdown(outcome_words(r))}"
        out += [head, "", f"Waiting: {safetext.markdown(who)}; `{MARK.strip()}` marks its frame."]
        if hang.words:
            out += ["", f"Ranks: {safetext.markdown(hang.words)}."]
        out += [f"- note: {safetext.markdown(note)}" for note in hang.notes]
        for name, text in _stacks(view, r):
            frame = hang.waiting_frame if _is_main(name, hang) else None
            lines = [(MARK if _is_waiting(line, frame) else "   ") + line for line in text.splitlines()]
            shown = (safetext.one_line(line).replace("```", "'''") for line in lines)  # names, shown
            out += ["", f"`{safetext.markdown_code(name)}`", "", "```", *shown, "```"]
        out.append("")
    return out


def hangs_html(view: RunView) -> Html | None:
    """Each hung attempt's stacks, one collapsible block per process, the waiting frame marked."""
    records = hung(view)
    if not records:
        return None
    blocks = []
    for r, hang in records:
        notes = [el("li", None, note) for note in hang.notes]
        if hang.words:
            notes.insert(0, el("li", {"class": "ranks"}, "ranks: ", hang.words))
        files = [_process_html(name, text, hang) for name, text in _stacks(view, r)]
        title = el("h3", None, el("a", {"href": f"#a-{r.attempt}"}, r.attempt), ": ", outcome_words(r))
        blocks.append(el("section", {"class": "hang"}, title, notes and el("ul", None, notes), files))
    return el("section", {"id": "hangs"}, el("h2", None, "Hung attempts"), blocks)


def _process_html(name: str, text: str, hang: Hang) -> Html:
    """One process's stacks, open when it holds the waiting thread."""
    main = _is_main(name, hang)
    frame = hang.waiting_frame if main else None
    lines = [el("span", {"class": "hit" if _is_waiting(t, frame) else None}, t, "\n") for t in text.splitlines()]
    summary = el("summary", None, Path(name).name + (" (the waiting thread's process)" if main else ""))
    return el("details", {"open": main}, summary, el("pre", {"class": "log"}, lines))
