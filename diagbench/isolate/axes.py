"""Factors from a spec's axes: `--good AXIS=LABEL,... --bad AXIS=LABEL,...`; the axes whose labels differ."""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass

from diagbench.errors import UserError
from diagbench.isolate.factors import Config, Factor, FactorKind
from diagbench.spec.matrix import Axis, make_cell
from diagbench.spec.yamlsrc import suggest


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
    """The good and the bad cell from their `AXIS=LABEL,...` terms; an axis named on one side only
    keeps its label on the other, an axis named on neither takes its first label."""
    chosen = {"good": _labels(good, axes, "good"), "bad": _labels(bad, axes, "bad")}
    sides: dict[str, dict[str, str]] = {"good": {}, "bad": {}}
    notes = []
    for axis in axes:
        g, b = chosen["good"].get(axis.name), chosen["bad"].get(axis.name)
        if g is None and b is None:
            g = b = axis.labels[0]
            if len(axis.labels) > 1:
                notes.append(f"{axis.name}: named on neither side; both take its first label '{g}'")
        g, b = g or b, b or g
        assert g is not None and b is not None
        sides["good"][axis.name], sides["bad"][axis.name] = g, b
    factors = tuple(
        Factor(a.name, FactorKind.AXIS, sides["good"][a.name], sides["bad"][a.name])
        for a in axes
        if sides["good"][a.name] != sides["bad"][a.name]
    )
    return AxisSpace(tuple(axes), sides["good"], sides["bad"], factors, tuple(notes))


def _labels(terms: str, axes: Sequence[Axis], side: str) -> dict[str, str]:
    by_name = {axis.name: axis for axis in axes}
    out: dict[str, str] = {}
    for term in (t.strip() for t in terms.split(",") if t.strip()):
        name, sep, label = term.partition("=")
        if not sep:
            raise UserError(f"--{side} {term}: expected AXIS=LABEL, e.g. --{side} compile=off,kernel=stock")
        if name not in by_name:
            raise UserError(f"--{side} {term}: unknown axis '{name}' ({suggest(name, by_name)})")
        if label not in by_name[name].labels:
            known = ", ".join(by_name[name].labels)
            raise UserError(f"--{side} {term}: unknown label '{label}' for axis '{name}' (labels are: {known})")
        if name in out and out[name] != label:
            raise UserError(f"--{side} {term}: axis '{name}' is already '{out[name]}' (name each axis once)")
        out[name] = label
    return out
