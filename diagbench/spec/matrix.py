"""Matrix axes and their expansion into cells: product, exclude, include, --only."""

from __future__ import annotations

import itertools
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from enum import Enum
from functools import partial
from typing import Protocol

from diagbench.errors import UserError
from diagbench.sensitive import holds_secret, looks_secret, secret_name, secret_template
from diagbench.spec.checks import COMMAND_PLACEHOLDERS, ENV_PLACEHOLDERS, check_env_name, check_placeholders
from diagbench.yamlsrc import Src, suggest

__all__ = [
    "ARGS_PLACEHOLDERS",
    "UNSET",
    "Axis",
    "AxisKind",
    "Cell",
    "CellRef",
    "CellRow",
    "Level",
    "Matrix",
    "Selector",
    "axis_term",
    "expand_matrix",
    "make_cell",
    "parse_axes",
    "parse_axis",
    "parse_matrix",
    "parse_only",
    "parse_selector",
    "select_cells",
    "selects",
]

UNSET = "unset"
ARGS_PLACEHOLDERS = (*COMMAND_PLACEHOLDERS, "value")
# a listed value is its own label, and labels are shown and name folders: never a secret's
_SECRET_LABEL = "a secret would be its cell's label (labels are shown in tables and name the cell's folder)"
_LABEL_FIX = "give each value a label: values: {a: ..., b: ...}"
_SLUG_UNSAFE = re.compile(r"[^A-Za-z0-9_.-]+")


class AxisKind(str, Enum):
    ENV = "env"
    FLAG = "flag"
    ARGS = "args"


@dataclass(frozen=True)
class Level:
    """One value of an axis: the label the user wrote and what it sets (None: nothing)."""

    label: str
    value: str | None


@dataclass(frozen=True)
class Axis:
    name: str
    kind: AxisKind
    target: tuple[str, ...]  # env: (VAR,); flag: (--flag,); args: the template tokens
    levels: tuple[Level, ...]

    @property
    def secret(self) -> bool:
        """Its values are secrets: it sets a secret-named variable, or a secret flag's value."""
        if self.kind is AxisKind.ENV:
            return secret_name(self.target[0])
        return self.kind is AxisKind.ARGS and secret_template(self.target)

    @property
    def labels(self) -> tuple[str, ...]:
        return tuple(level.label for level in self.levels)

    def level(self, label: str) -> Level:
        return next(level for level in self.levels if level.label == label)

    def apply(self, label: str) -> tuple[list[str], dict[str, str | None]]:
        """The argv tokens and env changes (None unsets) this axis adds for a label."""
        value = self.level(label).value
        if self.kind is AxisKind.ENV:
            return [], {self.target[0]: value}
        if value is None:
            return [], {}
        if self.kind is AxisKind.FLAG:
            return list(self.target), {}
        return [token.replace("{value}", value) for token in self.target], {}


Selector = Mapping[str, tuple[str, ...]]  # axis -> accepted labels


def selects(selector: Selector, params: Mapping[str, str]) -> bool:
    """Whether a cell's labels fall inside a `when`/`exclude`/`--only` selector."""
    return all(params.get(axis) in labels for axis, labels in selector.items())


class CellRef(Protocol):
    """A cell as judging needs it: its id and labels."""

    @property
    def id(self) -> str: ...

    @property
    def params(self) -> Mapping[str, str]: ...


@dataclass(frozen=True)
class CellRow:
    """A cell as a manifest keeps it (judging a stored run needs no more)."""

    id: str
    params: Mapping[str, str]


@dataclass(frozen=True)
class Cell:
    """One launch configuration of the matrix."""

    index: int
    id: str
    params: Mapping[str, str]
    args: tuple[str, ...]
    env: Mapping[str, str | None]

    @property
    def slug(self) -> str:
        """`kernel-mma.compile-on`: each axis and label kept apart from the `-` and `.` between
        them (a label `.` or `-x` would otherwise read as a separator: `root-..bogus-off`)."""
        text = ".".join(f"{_slug_part(axis)}-{_slug_part(label)}" for axis, label in self.params.items())
        return (text or "base")[:120]

    def matches(self, selector: Selector) -> bool:
        return selects(selector, self.params)


def _slug_part(text: str) -> str:
    """A name or label for a folder name: unsafe characters, and a `.` or `-` at either end
    (where it would join the separators), written `_`."""
    safe = _SLUG_UNSAFE.sub("_", text)
    head = len(safe) - len(safe.lstrip(".-"))
    tail = len(safe) - len(safe.rstrip(".-"))
    if head == len(safe):
        return "_" * len(safe) or "_"
    return "_" * head + safe[head : len(safe) - tail] + "_" * tail


@dataclass(frozen=True)
class Matrix:
    """The matrix section as parsed: its axes and its cells (maybe none: all excluded)."""

    axes: list[Axis]
    cells: list[Cell]


def parse_matrix(src: Src) -> Matrix:
    """Axes, then cells; Broken (mistakes recorded) if an axis, an include or an exclude was wrong."""
    axes, include, exclude = parse_axes(src)
    return Matrix(axes, expand_matrix(axes, include, exclude))


def parse_axes(src: Src) -> tuple[list[Axis], list[Src], list[Src]]:
    """The matrix section: axes, and the raw include/exclude entries (checked later)."""
    entries = src.mapping()
    mark = src.sink.mark()
    parsed = [
        src.attempt(partial(parse_axis, name, value), None)
        for name, value in entries.items()
        if name not in ("include", "exclude")
    ]
    if not parsed:
        raise src.error(
            "expected at least one axis", "add e.g. `compile: {flag: --enable-torch-compile, values: [on, off]}`"
        )
    include = src.attempt(lambda: entries["include"].items(), []) if "include" in entries else []
    exclude = src.attempt(lambda: entries["exclude"].items(), []) if "exclude" in entries else []
    src.sink.settle(mark)  # cells, selectors and labels all depend on every axis
    return [axis for axis in parsed if axis is not None], include, exclude


def parse_axis(name: str, src: Src) -> Axis:
    keys = src.mapping(("env", "flag", "args", "values"), what="a mapping with env, flag or args, and values")
    kinds = [k.value for k in AxisKind if k.value in keys]
    if len(kinds) != 1:
        found = " and ".join(kinds) or "none of them"
        raise src.error(f"expected exactly one of env, flag, args, got {found}")
    if "values" not in keys:
        raise src.error("missing key 'values'", "list the levels, e.g. values: [on, off]")
    kind = AxisKind(kinds[0])
    mark = src.sink.mark()
    target = src.attempt(lambda: _parse_target(keys[kinds[0]], kind), ())
    levels = src.attempt(lambda: _parse_levels(keys["values"], kind), ())
    src.sink.settle(mark)
    axis = Axis(name, kind, target, levels)
    if axis.secret and not keys["values"].is_mapping() and any(level.value is not None for level in levels):
        raise keys["values"].error(_SECRET_LABEL, _LABEL_FIX)
    return axis


def _parse_target(src: Src, kind: AxisKind) -> tuple[str, ...]:
    target: tuple[str, ...]
    if kind is not AxisKind.ARGS:
        target = (src.string(),)
        if kind is AxisKind.ENV:
            check_env_name(src, target[0])
        return target
    if src.is_list():
        places = src.items()
        target = tuple(t.text() for t in places)
    else:
        target = tuple(src.string().split())
        places = [src] * len(target)
    mark = src.sink.mark()
    for place, token in zip(places, target, strict=True):
        check_placeholders(place, token, ARGS_PLACEHOLDERS)
    if not any("{value}" in t for t in target):
        src.sink.settle(mark)  # a misspelt {value} was named already: once is enough
        raise src.error("expected the args to use {value}", 'e.g. args: [--cuda-graph-max-bs, "{value}"]')
    return target


def _parse_levels(src: Src, kind: AxisKind) -> tuple[Level, ...]:
    keyed = src.is_mapping()
    if keyed:
        pairs = [(label, value) for label, value in src.mapping().items()]
    else:
        pairs = [(item.text("a value"), item) for item in src.items()]
    if not pairs:
        raise src.error("expected at least one value, got an empty list")
    levels: list[Level] = []
    for label, value_src in pairs:
        if label in [level.label for level in levels]:
            value_src.sink.add(value_src.error(f"duplicate label '{label}'"))
            continue
        level = value_src.attempt(partial(_level, label, value_src, kind, keyed), None)
        if level is not None:
            levels.append(level)
        if keyed and looks_secret(label):
            value_src.sink.add(value_src.error(_SECRET_LABEL, "label it with a plain word"))
    return tuple(levels)


def _level(label: str, src: Src, kind: AxisKind, keyed: bool) -> Level:
    return Level(label, _level_value(src, kind, keyed))


def _level_value(src: Src, kind: AxisKind, keyed: bool) -> str | None:
    if kind is AxisKind.FLAG:
        return "on" if src.boolean() else None
    if src.is_null():
        return None
    value = src.text("a value")
    if kind is AxisKind.ENV and not keyed and value == UNSET:
        return None
    if keyed and value == UNSET:
        return None
    check_placeholders(src, value, ENV_PLACEHOLDERS if kind is AxisKind.ENV else COMMAND_PLACEHOLDERS)
    if not keyed and holds_secret(value):
        raise src.error(_SECRET_LABEL, _LABEL_FIX)
    return value


def parse_selector(
    src: Src, axes: Sequence[Axis], what: str = "a mapping of axis to label"
) -> dict[str, tuple[str, ...]]:
    """`{axis: label}` or `{axis: [label, ...]}`, every axis and label checked."""
    by_name = {axis.name: axis for axis in axes}
    out: dict[str, tuple[str, ...]] = {}
    mark = src.sink.mark()
    for name, value in src.mapping(what=what).items():
        if name not in by_name:
            value.sink.add(value.error(f"unknown axis '{name}'", suggest(name, by_name)))
            continue
        out[name] = value.attempt(partial(_labels, value, by_name[name]), ())
    src.sink.settle(mark)
    return out


def _labels(src: Src, axis: Axis) -> tuple[str, ...]:
    labels = tuple(item.text("a label") for item in src.items_or_one())
    for label, item in zip(labels, src.items_or_one(), strict=True):
        if label not in axis.labels:
            known = ", ".join(axis.labels)
            item.sink.add(item.error(f"unknown label '{label}' for axis '{axis.name}'", f"labels are: {known}"))
    return labels


# -- expansion --------------------------------------------------------------------------


def expand_matrix(axes: Sequence[Axis], include: Sequence[Src], exclude: Sequence[Src]) -> list[Cell]:
    """Every cell in a stable order: the product in axis order, minus excludes, plus includes.
    Broken (mistakes recorded) if an include or exclude entry was wrong; empty if all are excluded."""
    sink = (include or exclude)[0].sink if (include or exclude) else None
    mark = sink.mark() if sink else 0
    excluded = [e.attempt(partial(parse_selector, e, axes), {}) for e in exclude]
    names = [a.name for a in axes]
    combos = [dict(zip(names, labels, strict=True)) for labels in itertools.product(*(a.labels for a in axes))]
    kept = [c for c in combos if not any(sel and selects(sel, c) for sel in excluded)]
    for entry in include:
        combo = entry.attempt(partial(_included, entry, axes), None)
        if combo is not None and combo not in kept:
            kept.append(combo)
    if sink:
        sink.settle(mark)
    return [make_cell(i, axes, combo) for i, combo in enumerate(kept, start=1)]


def _included(entry: Src, axes: Sequence[Axis]) -> dict[str, str]:
    selector = parse_selector(entry, axes)
    missing = [a.name for a in axes if a.name not in selector]
    if missing or any(len(v) != 1 for v in selector.values()):
        raise entry.error(
            "expected one label for every axis",
            "missing: " + ", ".join(missing) if missing else "give one label each",
        )
    return {a.name: selector[a.name][0] for a in axes}


def make_cell(index: int, axes: Sequence[Axis], combo: Mapping[str, str]) -> Cell:
    args: list[str] = []
    env: dict[str, str | None] = {}
    for axis in axes:
        more_args, more_env = axis.apply(combo[axis.name])
        args.extend(more_args)
        env.update(more_env)
    cell_id = ",".join(f"{axis.name}={combo[axis.name]}" for axis in axes)
    return Cell(index, cell_id, dict(combo), tuple(args), env)


def parse_only(terms: Sequence[str], axes: Sequence[Axis]) -> dict[str, tuple[str, ...]]:
    """`--only AXIS=LABEL` terms: the same axis twice means either label."""
    by_name = {axis.name: axis for axis in axes}
    out: dict[str, tuple[str, ...]] = {}
    for term in terms:
        name, label = axis_term("--only", term, by_name, "compile=on")
        out[name] = (*out.get(name, ()), label)
    return out


def axis_term(option: str, term: str, by_name: Mapping[str, Axis], example: str) -> tuple[str, str]:
    """One `AXIS=LABEL` of a command-line option, checked against the matrix's axes."""
    name, sep, label = term.partition("=")
    if not sep:
        raise UserError(f"{option} {term}: expected AXIS=LABEL, e.g. {option} {example}")
    if name not in by_name:
        raise UserError(f"{option} {term}: unknown axis '{name}' ({suggest(name, by_name)})")
    if label not in by_name[name].labels:
        known = ", ".join(by_name[name].labels)
        raise UserError(f"{option} {term}: unknown label '{label}' for axis '{name}' (labels are: {known})")
    return name, label


def select_cells(cells: Sequence[Cell], only: Selector) -> list[Cell]:
    chosen = [cell for cell in cells if cell.matches(only)]
    if not chosen:
        raise UserError("--only selects no cell of the matrix")
    return chosen
