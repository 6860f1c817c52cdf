"""Factors from a spec's axes: `--good AXIS=LABEL,... --bad AXIS=LABEL,...`; the axes whose labels differ."""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass

from diagbench.errors import UserError
from diagbench.isolate.factors import Config, Factor, FactorKind
from diagbench.spec.matrix import Axis, axis_term, make_cell

__all__ = ["AxisSpace", "axis_space"]


@dataclass(frozen=True)
class AxisSpace:
    """Two cells of a spec's matrix (or outside it) and any mix of their differing axes."""

    axes: tuple[Axis, ...]
    good: Mapping[str, str]  # axis -> label
    bad: Mapping[str, str]
    factors: tuple[Factor, ...]
    notes: tuple[str, ...] = ()

    def configuration(self, applied: Collection[str]) -> Config:
        combo = {a.name: (self.bad if a.name in applied else self.good)[a.name] for a in self.axes}
        cell = make_cell(0, self.axes, combo)
        return Config(cell.args, dict(cell.env), combo)


def axis_space(axes: Sequence[Axis], good: str, bad: str) -> AxisSpace:
    """The good and the bad cell from their `AXIS=LABEL,...` terms; an axis named on neither
    side takes its first label on both."""
    sides = {"good": _labels(good, axes, "good"), "bad": _labels(bad, axes, "bad")}
    notes = []
    for axis in axes:
        named = [side for side in sides if axis.name in sides[side]]
        if len(named) == 1:
            other = "bad" if named[0] == "good" else "good"
            labels = ", ".join(axis.labels)
            raise UserError(
                f"--{other}: axis '{axis.name}' is named in --{named[0]} only (name it in both; labels: {labels})"
            )
        if not named:
            for side in sides.values():
                side[axis.name] = axis.labels[0]
            if len(axis.labels) > 1:
                notes.append(f"{axis.name}: named on neither side; both take its first label '{axis.labels[0]}'")
    g, b = sides["good"], sides["bad"]
    factors = tuple(Factor(a.name, FactorKind.AXIS, g[a.name], b[a.name]) for a in axes if g[a.name] != b[a.name])
    return AxisSpace(tuple(axes), g, b, factors, tuple(notes))


def _labels(terms: str, axes: Sequence[Axis], side: str) -> dict[str, str]:
    by_name = {axis.name: axis for axis in axes}
    out: dict[str, str] = {}
    for term in (t.strip() for t in terms.split(",") if t.strip()):
        name, label = axis_term(f"--{side}", term, by_name, "compile=off,kernel=stock")
        if name in out and out[name] != label:
            raise UserError(f"--{side} {term}: axis '{name}' is already '{out[name]}' (name each axis once)")
        out[name] = label
    return out
