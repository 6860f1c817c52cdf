"""records/typed.py: JSON read into frozen dataclasses by their annotations, and written back."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from diagbench.errors import RecordError
from diagbench.records.typed import OMIT_NONE, build, build_versioned, plain, read_document
from diagbench.triage.record import read_triage
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


def test_a_versioned_document_is_built_refused_when_newer_and_named_when_malformed() -> None:
    data = {"doc_version": 1, "line_no": 3, "text": "boom"}
    assert build_versioned(Where, data, "doc.json", "doc_version", 1) == Where(3, "boom")
    with pytest.raises(
        RecordError, match=r"^doc\.json: doc_version 2: written by a newer diagbench \(this one reads 1\)$"
    ):
        build_versioned(Where, {**data, "doc_version": 2}, "doc.json", "doc_version", 1)
    with pytest.raises(RecordError, match=r"^doc\.json: doc_version None: written by a newer"):
        build_versioned(Where, {"line_no": 3, "text": "boom"}, "doc.json", "doc_version", 1)
    with pytest.raises(RecordError, match=r"^doc\.json: malformed: .*line_no"):
        build_versioned(Where, {**data, "line_no": "x"}, "doc.json", "doc_version", 1)


def test_a_run_document_is_read_as_a_regular_file_only(tmp_path: Path) -> None:
    assert read_document(tmp_path / "absent.json") is None
    (tmp_path / "list.json").write_text("[1]")
    with pytest.raises(RecordError, match="expected a JSON object"):
        read_document(tmp_path / "list.json")
    (tmp_path / "big.json").write_text(json.dumps({"x": "y" * 100}))
    with pytest.raises(RecordError, match="unreadable"):
        read_document(tmp_path / "big.json", max_bytes=50)
    elsewhere = tmp_path / "elsewhere.json"
    elsewhere.write_text(json.dumps({"triage_version": 1}))
    run = tmp_path / "run"
    run.mkdir()
    (run / "triage.json").symlink_to(elsewhere)  # triage.json used to be read through a link
    with pytest.raises(RecordError, match=r"triage\.json: unreadable"):
        read_triage(run)
    os.mkfifo(run / "fifo.json")
    with pytest.raises(RecordError, match="unreadable"):  # never waited on
        read_document(run / "fifo.json")
