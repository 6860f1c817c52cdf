"""Hypotheses and expectations: parsed from the spec, judged from records alone (pure)."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from diagbench.spec.matrix import Axis, Cell, parse_selector
from diagbench.vocab import CONDITION_OUTCOMES, FAILURE_CLASSES, VERDICTS, Ended, Outcome, outcome_label
from diagbench.yamlsrc import Src, suggest

_HYPOTHESIS_KEYS = ("id", "claim", "when", "supported_if", "refuted_if", "meaning")


@dataclass(frozen=True)
class Condition:
    """An outcome, optionally narrowed to a failure class: `failed:oom`."""

    outcome: Outcome
    failure_class: str | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "outcome", Outcome(self.outcome))

    def holds(self, record: Ended) -> bool:
        if record.outcome != self.outcome:
            return False
        return self.failure_class is None or self.failure_class == record.failure_class

    def __str__(self) -> str:
        return outcome_label(self.outcome, self.failure_class)


@dataclass(frozen=True)
class Hypothesis:
    id: str
    claim: str
    when: Mapping[str, tuple[str, ...]]
    supported_if: tuple[Condition, ...]
    refuted_if: tuple[Condition, ...]
    meaning: Mapping[str, str]

    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "claim": self.claim,
            "when": {k: list(v) for k, v in self.when.items()},
            "supported_if": [str(c) for c in self.supported_if],
            "refuted_if": [str(c) for c in self.refuted_if],
            "meaning": dict(self.meaning),
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Hypothesis:
        return cls(
            id=data["id"],
            claim=data.get("claim", ""),
            when={k: tuple(v) for k, v in data.get("when", {}).items()},
            supported_if=tuple(_condition_of(c) for c in data.get("supported_if", [])),
            refuted_if=tuple(_condition_of(c) for c in data.get("refuted_if", [])),
            meaning=dict(data.get("meaning", {})),
        )


@dataclass(frozen=True)
class Expectation:
    index: int
    when: Mapping[str, tuple[str, ...]]
    outcome: tuple[Condition, ...]

    def to_json(self) -> dict[str, Any]:
        return {"when": {k: list(v) for k, v in self.when.items()}, "outcome": [str(c) for c in self.outcome]}

    @classmethod
    def from_json(cls, index: int, data: Mapping[str, Any]) -> Expectation:
        return cls(
            index,
            {k: tuple(v) for k, v in data.get("when", {}).items()},
            tuple(_condition_of(c) for c in data.get("outcome", [])),
        )


def _condition_of(text: str) -> Condition:
    outcome, _, cls = text.partition(":")
    return Condition(Outcome(outcome), cls or None)


def hypotheses_sha256(hypotheses: Sequence[Hypothesis]) -> str:
    canonical = json.dumps([h.to_json() for h in hypotheses], sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(canonical.encode()).hexdigest()


# -- parsing ----------------------------------------------------------------------------


def parse_conditions(src: Src) -> tuple[Condition, ...]:
    out = []
    for item in src.items_or_one():
        text = item.string("an outcome")
        outcome, _, cls = text.partition(":")
        if outcome not in CONDITION_OUTCOMES:
            raise item.error(f"unknown outcome '{outcome}'", suggest(outcome, CONDITION_OUTCOMES))
        if cls and cls not in FAILURE_CLASSES:
            raise item.error(f"unknown failure class '{cls}'", suggest(cls, FAILURE_CLASSES))
        if cls and outcome != Outcome.FAILED.value:
            raise item.error(f"a failure class only narrows 'failed', got '{text}'", f"write failed:{cls}")
        out.append(Condition(Outcome(outcome), cls or None))
    return tuple(out)


def _selecting(src: Src, axes: Sequence[Axis], cells: Sequence[Cell]) -> dict[str, tuple[str, ...]]:
    selector = parse_selector(src, axes)
    if not any(cell.matches(selector) for cell in cells):
        raise src.error("selects no cell of the matrix", "check it against `diagbench plan` and the exclude list")
    return selector


def parse_hypotheses(src: Src, axes: Sequence[Axis], cells: Sequence[Cell]) -> tuple[Hypothesis, ...]:
    out: list[Hypothesis] = []
    for item in src.items():
        keys = item.mapping(_HYPOTHESIS_KEYS)
        for need in ("id", "when", "supported_if", "refuted_if"):
            if need not in keys:
                raise item.error(f"missing key '{need}'")
        hid = keys["id"].string()
        if hid in [h.id for h in out]:
            raise keys["id"].error(f"duplicate hypothesis id '{hid}'", "give each hypothesis its own id")
        meaning = {k: v.string() for k, v in keys["meaning"].mapping(VERDICTS).items()} if "meaning" in keys else {}
        out.append(
            Hypothesis(
                id=hid,
                claim=keys["claim"].string() if "claim" in keys else "",
                when=_selecting(keys["when"], axes, cells),
                supported_if=parse_conditions(keys["supported_if"]),
                refuted_if=parse_conditions(keys["refuted_if"]),
                meaning=meaning,
            )
        )
    return tuple(out)


def parse_expectations(src: Src, axes: Sequence[Axis], cells: Sequence[Cell]) -> tuple[Expectation, ...]:
    out = []
    for index, item in enumerate(src.items()):
        keys = item.mapping(("when", "outcome"))
        if "outcome" not in keys:
            raise item.error("missing key 'outcome'", "e.g. {when: {compile: off}, outcome: ready}")
        when = _selecting(keys["when"], axes, cells) if "when" in keys else {}
        out.append(Expectation(index, when, parse_conditions(keys["outcome"])))
    return tuple(out)
