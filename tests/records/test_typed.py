"""records/typed.py: JSON read into frozen dataclasses by their annotations, and written back."""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest

from diagbench.errors import RecordError
from diagbench.records.typed import OMIT_NONE, build, plain
from diagbench.vocab import Outcome


@dataclass(frozen=True)
class Where:
    line_no: int
    text: str


@dataclass(frozen=True)
class Part:
    outcome: Outcome
    where: Where | None
    seen: tuple[Where, ...] = ()
    note: str | None = field(default=None, metadata=OMIT_NONE)


def test_a_part_is_built_and_written_back_the_same() -> None:
    data = {"outcome": "failed", "where": {"line_no": 3, "text": "boom"}, "seen": [{"line_no": 1, "text": "a"}]}
    part = build(Part, {**data, "added_by_a_newer_minor": 1})
    assert part == Part(Outcome.FAILED, Where(3, "boom"), (Where(1, "a"),))
    assert plain(part) == data  # note left out while None, the unknown key dropped


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ({"outcome": "fine", "where": None}, "field 'outcome': expected one of ready, "),
        ({"outcome": "ready", "where": {"line_no": "one", "text": "x"}}, "field 'where.line_no': expected an integer"),
        ({"outcome": "ready", "where": {"line_no": 1}}, "field 'where.text': missing"),
        ({"outcome": "ready", "where": 7}, "field 'where': expected {line_no, text, ...} or null, got 7"),
        (
            {"outcome": "ready", "where": None, "seen": [{"line_no": 1, "text": "a"}, {"text": "b"}]},
            "field 'seen[1].line_no': missing",
        ),
        (
            {"outcome": "ready", "where": None, "seen": [True]},
            "field 'seen[0]': expected {line_no, text, ...}, got true",
        ),
        ({"outcome": "ready"}, "field 'where': missing"),
    ],
)
def test_the_innermost_wrong_part_is_named(data: dict[str, object], message: str) -> None:
    with pytest.raises(RecordError) as caught:
        build(Part, data)
    assert str(caught.value).startswith(message)
