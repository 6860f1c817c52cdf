"""Hypotheses and expectations: parsed from the spec, judged from records alone (pure)."""

from __future__ import annotations

import fnmatch
import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import partial

from diagbench.jsonvalue import JSON, JSONObject, text_of
from diagbench.spec.matrix import Axis, Cell, parse_selector
from diagbench.vocab import (
    CONDITION_OUTCOMES,
    FAILURE_CLASSES,
    NOT_READY,
    NOT_READY_OUTCOMES,
    VERDICTS,
    Ended,
    FailureClass,
    Outcome,
    outcome_label,
)
from diagbench.yamlsrc import Src, suggest

__all__ = [
    "Condition",
    "Expectation",
    "Hypothesis",
    "hypotheses_sha256",
    "parse_conditions",
    "parse_expectations",
    "parse_hypotheses",
]

_HYPOTHESIS_KEYS = ("id", "claim", "when", "supported_if", "refuted_if", "meaning")


@dataclass(frozen=True)
class Condition:
    """An outcome, optionally narrowed to a failure class (`failed:oom`) and to where its
    stacks say it hung (`timeout@nccl*`: a glob on result.json's `hang.site`); or `not_ready`,
    any outcome of a launch that did not come up (failed, crashed, timeout, launch_error)."""

    outcome: Outcome | str  # an Outcome, or NOT_READY
    failure_class: FailureClass | None = None
    hang_site: str | None = None

    def __post_init__(self) -> None:
        if self.outcome != NOT_READY:
            object.__setattr__(self, "outcome", Outcome(self.outcome))
        if self.failure_class is not None:
            object.__setattr__(self, "failure_class", FailureClass(self.failure_class))

    def holds(self, record: Ended) -> bool:
        if self.outcome == NOT_READY:
            if record.outcome not in NOT_READY_OUTCOMES:
                return False
        elif record.outcome != self.outcome:
            return False
        if self.failure_class is not None and self.failure_class != record.failure_class:
            return False
        return self.hang_site is None or fnmatch.fnmatchcase(_site(record), self.hang_site)

    def __str__(self) -> str:
        label = outcome_label(self.outcome, self.failure_class)
        return f"{label}@{self.hang_site}" if self.hang_site is not None else label


def _site(record: Ended) -> str:
    """The record's hang site ("" when no stacks were taken: no glob but `*` matches it)."""
    hang = getattr(record, "hang", None)  # records have one (records/parts.Hang); a probe's result has none
    site = getattr(hang, "site", None)
    return site if isinstance(site, str) else ""


@dataclass(frozen=True)
class Hypothesis:
    id: str
    claim: str
    when: Mapping[str, tuple[str, ...]]
    supported_if: tuple[Condition, ...]
    refuted_if: tuple[Condition, ...]
    meaning: Mapping[str, str]

    def to_json(self) -> dict[str, JSON]:
        return {
            "id": self.id,
            "claim": self.claim,
            "when": {k: list(v) for k, v in self.when.items()},
            "supported_if": [str(c) for c in self.supported_if],
            "refuted_if": [str(c) for c in self.refuted_if],
            "meaning": dict(self.meaning),
        }

    @classmethod
    def from_json(cls, data: JSONObject) -> Hypothesis:
        """Read back from a manifest; a malformed entry raises KeyError, TypeError or ValueError."""
        return cls(
            id=text_of(data["id"]),
            claim=text_of(data.get("claim", "")),
            when=_selector_of(data.get("when", {})),
            supported_if=tuple(_condition_of(c) for c in _array(data.get("supported_if", []))),
            refuted_if=tuple(_condition_of(c) for c in _array(data.get("refuted_if", []))),
            meaning={k: text_of(v) for k, v in _object(data.get("meaning", {})).items()},
        )


@dataclass(frozen=True)
class Expectation:
    index: int
    when: Mapping[str, tuple[str, ...]]
    outcome: tuple[Condition, ...]

    def to_json(self) -> dict[str, JSON]:
        return {"when": {k: list(v) for k, v in self.when.items()}, "outcome": [str(c) for c in self.outcome]}

    @classmethod
    def from_json(cls, index: int, data: JSON) -> Expectation:
        data = _object(data)
        return cls(
            index, _selector_of(data.get("when", {})), tuple(_condition_of(c) for c in _array(data.get("outcome")))
        )


def _condition_of(text: JSON) -> Condition:
    label, at, site = text_of(text).partition("@")
    outcome, _, cls = label.partition(":")
    failure_class = FailureClass.of(cls) if cls else None
    if cls and failure_class is None:
        raise ValueError(f"unknown failure class {cls!r}")
    return Condition(outcome if outcome == NOT_READY else Outcome(outcome), failure_class, site if at else None)


def _selector_of(data: JSON) -> dict[str, tuple[str, ...]]:
    return {k: tuple(text_of(label) for label in _array(v)) for k, v in _object(data).items()}


def _object(value: JSON) -> JSONObject:
    if not isinstance(value, Mapping):
        raise TypeError(f"expected a mapping, got {value!r}")
    return value


def _array(value: JSON) -> Sequence[JSON]:
    if not isinstance(value, list):
        raise TypeError(f"expected a list, got {value!r}")
    return value


def hypotheses_sha256(hypotheses: Sequence[Hypothesis]) -> str:
    canonical = json.dumps([h.to_json() for h in hypotheses], sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(canonical.encode()).hexdigest()


# -- parsing ----------------------------------------------------------------------------


def parse_conditions(src: Src) -> tuple[Condition, ...]:
    """An outcome word or a list of them. Empty is a mistake: a hypothesis never supported,
    one nothing could refute (not a test), an expect that always fails."""
    items = src.items_or_one()
    if not items:
        raise src.error("expected at least one outcome, got an empty list", "e.g. ready, or [failed:oom, crashed]")
    mark = src.sink.mark()
    out = [item.attempt(partial(_condition, item), None) for item in items]
    src.sink.settle(mark)
    return tuple(c for c in out if c is not None)


def _condition(item: Src) -> Condition:
    text, at, site = item.string("an outcome").partition("@")
    if at and not site.strip():
        raise item.error(f"'{text}@' names no hang site", f"e.g. {text}@nccl*, a glob on result.json's hang.site")
    outcome, _, cls = text.partition(":")
    if outcome not in CONDITION_OUTCOMES:
        raise item.error(f"unknown outcome '{outcome}'", suggest(outcome, CONDITION_OUTCOMES))
    failure_class = FailureClass.of(cls) if cls else None
    if cls and failure_class is None:
        raise item.error(f"unknown failure class '{cls}'", suggest(cls, FAILURE_CLASSES))
    if cls and outcome != Outcome.FAILED.value:
        raise item.error(f"a failure class only narrows 'failed', got '{text}'", f"write failed:{cls}")
    return Condition(outcome if outcome == NOT_READY else Outcome(outcome), failure_class, site if at else None)


def _selecting(src: Src, axes: Sequence[Axis] | None, cells: Sequence[Cell] | None) -> dict[str, tuple[str, ...]]:
    """A `when`: checked against the axes, then against the cells (each skipped if it is broken)."""
    if axes is None:
        return {}
    selector = parse_selector(src, axes)
    if cells is not None and not any(cell.matches(selector) for cell in cells):
        raise src.error("selects no cell of the matrix", "check it against `diagbench plan` and the exclude list")
    return selector


def parse_hypotheses(src: Src, axes: Sequence[Axis] | None, cells: Sequence[Cell] | None) -> tuple[Hypothesis, ...]:
    """Every hypothesis, each checked on its own (`when` only if the matrix is sound)."""
    out: list[Hypothesis | None] = []
    seen: list[str] = []
    mark = src.sink.mark()
    for item in src.items():
        out.append(item.attempt(partial(_parse_hypothesis, item, axes, cells, seen), None))
    src.sink.settle(mark)
    return tuple(h for h in out if h is not None)


def _parse_hypothesis(
    item: Src, axes: Sequence[Axis] | None, cells: Sequence[Cell] | None, seen: list[str]
) -> Hypothesis:
    keys = item.mapping(_HYPOTHESIS_KEYS)
    mark = item.sink.mark()
    for need in ("id", "when", "supported_if", "refuted_if"):
        item.missing(keys, need)
    hid = item.attempt(lambda: keys["id"].string(), "") if "id" in keys else ""
    if hid in seen:
        keys["id"].sink.add(keys["id"].error(f"duplicate hypothesis id '{hid}'", "give each hypothesis its own id"))
    seen.append(hid)
    hypothesis = Hypothesis(
        id=hid,
        claim=item.attempt(lambda: keys["claim"].string(), "") if "claim" in keys else "",
        when=item.attempt(lambda: _selecting(keys["when"], axes, cells), {}) if "when" in keys else {},
        supported_if=_conditions_of(keys, "supported_if"),
        refuted_if=_conditions_of(keys, "refuted_if"),
        meaning=item.attempt(lambda: _meaning(keys["meaning"]), {}) if "meaning" in keys else {},
    )
    item.sink.settle(mark)
    return hypothesis


def _conditions_of(keys: dict[str, Src], key: str) -> tuple[Condition, ...]:
    return keys[key].attempt(lambda: parse_conditions(keys[key]), ()) if key in keys else ()


def _meaning(src: Src) -> dict[str, str]:
    return {k: v.attempt(v.string, "") for k, v in src.mapping(VERDICTS).items()}


def parse_expectations(src: Src, axes: Sequence[Axis] | None, cells: Sequence[Cell] | None) -> tuple[Expectation, ...]:
    out: list[Expectation | None] = []
    mark = src.sink.mark()
    for index, item in enumerate(src.items()):
        out.append(item.attempt(partial(_parse_expectation, index, item, axes, cells), None))
    src.sink.settle(mark)
    return tuple(e for e in out if e is not None)


def _parse_expectation(index: int, item: Src, axes: Sequence[Axis] | None, cells: Sequence[Cell] | None) -> Expectation:
    keys = item.mapping(("when", "outcome"))
    mark = item.sink.mark()
    item.missing(keys, "outcome", "e.g. {when: {compile: off}, outcome: ready}")
    when = item.attempt(lambda: _selecting(keys["when"], axes, cells), {}) if "when" in keys else {}
    expectation = Expectation(index, when, _conditions_of(keys, "outcome"))
    item.sink.settle(mark)
    return expectation
