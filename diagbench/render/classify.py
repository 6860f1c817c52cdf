"""`diagbench classify` and `diagbench signatures` for people."""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING

from diagbench.jsonvalue import JSON
from diagbench.logs.classify import Classification
from diagbench.logs.signatures import Signature, expand
from diagbench.render.formats import Rendering, Shown
from diagbench.render.text import visible
from diagbench.safetext import one_line
from diagbench.vocab import TextOrJson, assert_never, outcome_label

if TYPE_CHECKING:  # a table for `signatures` only: `classify` prints lines
    from rich.console import RenderableType

__all__ = [
    "classification_as",
    "render_classification",
    "render_signature",
    "render_signatures",
    "signature_json",
    "signatures_as",
]


def classification_as(
    result: Classification,
    format: TextOrJson,
    context: Sequence[tuple[int, str]] = (),
    given: bool = False,
    width: int | None = None,
) -> Rendering:
    """`classify`: the decision (its sentences broken at words to `width`) with its deciding line in
    `context` (the log's lines whole, as written), or one JSON object (`--json`)."""
    match format:
        case TextOrJson.TEXT:
            from diagbench.render.fit import fit_lines  # rich: not for --json, which scripts start often

            lines = render_classification(result, context, given)
            log = re.compile(r"^[> ] +\d+ \| ")  # a line of the log: whole, a reader greps for it
            return Shown(lines=tuple(line if log.match(line) else fit_lines(line, width) for line in lines))
        case TextOrJson.JSON:
            return json.dumps(result.to_json()) + "\n"
        case _:
            assert_never(format)


def signatures_as(
    signatures: Sequence[Signature], format: TextOrJson, whole: bool = False, width: int | None = None
) -> Rendering:
    """`signatures`: a table, each signature `whole` with its source, or a JSON list (`--json`)."""
    match format:
        case TextOrJson.TEXT if whole:
            blocks = [[""] * bool(i) + render_signature(s) for i, s in enumerate(signatures)]  # a blank line between
            return Shown(lines=tuple(line for block in blocks for line in block))
        case TextOrJson.TEXT:
            return Shown(render_signatures(signatures, width))
        case TextOrJson.JSON:
            return json.dumps([signature_json(s) for s in signatures], indent=2) + "\n"
        case _:
            assert_never(format)


def render_classification(result: Classification, context: Sequence[tuple[int, str]], given: bool = False) -> list[str]:
    """The outcome, the server, the phase reached, and the deciding line in its context."""
    lines = [f"outcome: {outcome_label(result.outcome, result.failure_class)}"]
    how = "given" if given else "detected from its lines" if result.server else "no line names it"
    lines.append(f"server: {result.server or '-'} ({how})")
    if result.secondary_classes:
        lines.append(f"secondary: {', '.join(result.secondary_classes)}")
    lines.append(f"phase reached: {visible(result.phase or '-')}")
    if result.first_failed_rank is not None:
        said = result.cause.text() if result.cause else "its error was not read (a launcher named it)"
        lines.append(f"rank {result.first_failed_rank} failed first: {visible(said)}")
    if result.chain:
        lines.append(f"root cause: {visible(result.chain)}")
    if result.ready is not None:
        lines.append(f"came up first: line {result.ready.line_no}: {visible(result.ready.text)}")
    if result.interrupted is not None:
        lines.append(
            f"interrupted at line {result.interrupted} (Ctrl-C or a stop signal): what follows is read as its fallout"
        )
    if not result.line_no:
        before = f"before line {result.interrupted}" if result.interrupted is not None else f"in {result.lines} lines"
        lines.append(f"no ready or failure line {before}")
        return lines
    lines.append(f"decided by {result.signature} at line {result.line_no}:")
    for number, text in context:
        marker = ">" if number == result.line_no else " "
        lines.append(f"{marker} {number:>7} | {visible(text)}")  # a log's escape sequences, shown not run
    return lines


def render_signatures(signatures: Iterable[Signature], width: int | None = None) -> RenderableType:
    """One row per signature, fitted to `width`: the id (what `--id` takes) always whole; the
    pattern on one line, cut with an ellipsis (`signatures --id ID` shows it whole)."""
    from rich.text import Text

    from diagbench.render.fit import Column, fit

    sigs = list(signatures)

    def cells(values: Iterable[str]) -> list[Text]:
        return [Text(one_line(v)) for v in values]  # patterns are full of [brackets]: never markup

    columns = [
        Column("id", cells(s.id for s in sigs)),
        Column("kind", cells(s.kind.value for s in sigs), drop=2),
        Column("class", cells(s.failure_class or s.phase or "" for s in sigs)),
        Column("priority", cells(str(s.priority) for s in sigs), drop=3),
        Column("pack", cells(s.pack for s in sigs), drop=4),  # the id starts with it
        Column("pattern", cells(s.pattern for s in sigs), flex=True, lines=1),
    ]
    return fit("", columns, width)


def signature_json(s: Signature) -> dict[str, JSON]:
    """One signature, whole, with where its wording comes from."""
    return {
        "pack": s.pack,
        "id": s.id,
        "kind": s.kind.value,
        "class": s.failure_class,
        "phase": s.phase,
        "priority": s.priority,
        "settles": s.settles,
        "weak": s.weak,
        "requires": list(s.requires),
        "pattern": s.pattern,
        "expanded": expand(s.pattern),
        "source": s.source,
    }


def render_signature(s: Signature) -> list[str]:
    """`signatures --id ID` (and `--full`): every field on its own line, the pattern whole."""
    fields = signature_json(s)
    if fields["expanded"] == fields["pattern"]:
        del fields["expanded"]  # no {prefix} in it: nothing to expand
    shown = {k: ", ".join(v) if isinstance(v, list) else v for k, v in fields.items()}
    return [  # a pack's words, shown whole but never obeyed
        one_line(f"{k + ':':<10} {'-' if v in (None, '') else str(v).lower() if isinstance(v, bool) else v}")
        for k, v in shown.items()
    ]
