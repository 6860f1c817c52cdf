"""Factors from two environments: the packages whose versions differ, beside any difference
of the two command lines (env, flags, options): one isolation over both.

A configuration is the good environment with the applied packages at their bad versions (a
package only the good one has is left out), built by uv into the probe-environment cache;
`{python}` in the command is that environment's interpreter. Building is separate from
naming (`configuration` only computes where the environment lives), so a dry run builds
nothing and the search builds each environment just before its launch.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Collection
from dataclasses import dataclass, field
from pathlib import Path

from diagbench.errors import UserError
from diagbench.isolate.deps import Deps, normalise, read_deps
from diagbench.isolate.factors import CommandSpace, Config, Factor, FactorKind, derive
from diagbench.isolate.index import indexes_of
from diagbench.isolate.problem import Problem, ServerRules, command_problem
from diagbench.launch.envs import Built, EnvCache

__all__ = [
    "PYTHON_MARK",
    "BuildReport",
    "EnvironmentBuilt",
    "PackageSpace",
    "from_packages",
    "package_factors",
    "package_space",
]

PYTHON_MARK = "{python}"


@dataclass(frozen=True)
class EnvironmentBuilt:
    """A probe environment as the progress tells it: what it holds, and how building it went."""

    what: str  # the packages it changes (`urllib3`), or `the good environment`
    ok: bool
    cached: bool  # found built (or known unresolvable) already
    seconds: float
    refusal: str = ""  # why it does not install (uv's line), when not ok

    @classmethod
    def of(cls, what: str, built: Built) -> EnvironmentBuilt:
        return cls(what, built.ok, built.cached, built.seconds, built.refusal)


BuildReport = Callable[[EnvironmentBuilt], None]


@dataclass(frozen=True)
class PackageSpace:
    """The packages between two environments (and the command lines' differences) as factors."""

    command: CommandSpace
    good: Deps
    bad: Deps
    envs: EnvCache
    package_factors: tuple[Factor, ...]
    notes: tuple[str, ...] = ()
    report: BuildReport | None = field(default=None, compare=False)

    @property
    def factors(self) -> tuple[Factor, ...]:
        return (*self.package_factors, *self.command.factors)

    def requirements(self, applied: Collection[str]) -> tuple[str, ...]:
        """The good environment's requirement lines with the applied packages' bad lines."""
        lines = {key: pin.line for key, pin in self.good.pins.items()}
        for f in self.package_factors:
            if f.name in applied:
                key = normalise(f.name)
                if key in self.bad.pins:
                    lines[key] = self.bad.pins[key].line
                else:
                    lines.pop(key, None)
        return tuple(sorted(lines.values()))

    def configuration(self, applied: Collection[str]) -> Config:
        mine = {f.name for f in self.package_factors}
        base = self.command.configuration([n for n in applied if n not in mine])
        python = str(self.envs.python(self.requirements(applied)))
        params = {**{f.name: f.label(f.name in applied) for f in self.package_factors}, **base.params}
        return Config(tuple(a.replace(PYTHON_MARK, python) for a in base.args), base.env, params)

    def prepare(self, applied: Collection[str]) -> Built:
        """Build (or find) the configuration's environment before it is launched."""
        built = self.envs.build(self.requirements(applied))
        if self.report is not None:
            mine = [f.name for f in self.package_factors if f.name in applied]
            self.report(EnvironmentBuilt.of(", ".join(mine) if mine else "the good environment", built))
        return built


def package_factors(good: Deps, bad: Deps) -> tuple[Factor, ...]:
    """Each package whose version differs, added or removed, in the good environment's order, then the bad's."""
    keys = list(dict.fromkeys([*good.pins, *bad.pins]))
    out = []
    for key in keys:
        g, b = good.pins.get(key), bad.pins.get(key)
        if g is not None and b is not None and g.line == b.line:
            continue
        pin = g if g is not None else b
        assert pin is not None  # the key came from one side
        out.append(Factor(pin.name, FactorKind.PACKAGE, g.version if g else None, b.version if b else None))
    return tuple(out)


def package_space(
    good_cmd: str,
    bad_cmd: str | None,
    envs: tuple[list[str], list[str]],
    good: Deps,
    bad: Deps,
    cache: EnvCache | None = None,
    report: BuildReport | None = None,
) -> PackageSpace:
    """The isolation's factors: packages between `good` and `bad`, and the command lines' differences."""
    bad_line = good_cmd if bad_cmd is None else bad_cmd
    for option, line in (("--good", good_cmd), ("--bad", bad_line)):
        if PYTHON_MARK not in line:
            raise UserError(
                f"{option}: put {PYTHON_MARK} where the command runs Python ('{PYTHON_MARK} -m server --port "
                "{port}'), so each probe runs in its own environment"
            )
    command = derive(good_cmd, bad_line, envs[0], envs[1])
    base = good.python or bad.python or Path(sys.executable)
    factors = package_factors(good, bad)
    notes = _notes(good, bad, factors)
    built = cache or EnvCache(base_python=base, indexes=indexes_of([good, bad]))
    return PackageSpace(command, good, bad, built, factors, notes, report)


def _notes(good: Deps, bad: Deps, factors: tuple[Factor, ...]) -> tuple[str, ...]:
    same = len(set(good.pins) & set(bad.pins)) - sum(f.good is not None and f.bad is not None for f in factors)
    return (f"{len(factors)} package(s) differ; {same} are the same in both environments",)


def from_packages(
    good: str,
    bad: str | None,
    envs: tuple[list[str], list[str]],
    deps: tuple[str | None, str | None],
    rules: ServerRules,
    cwd: Path,
    report: BuildReport | None = None,
) -> Problem:
    """`isolate --good-deps A --bad-deps B --good CMD [--bad CMD]`: packages (and the lines' differences)."""
    if deps[0] is None or deps[1] is None:
        missing = "--good-deps" if deps[0] is None else "--bad-deps"
        raise UserError(f"{missing}: needed with the other (or use --between PKG==A..B to walk one package)")
    good_deps, bad_deps = read_deps("--good-deps", deps[0], cwd), read_deps("--bad-deps", deps[1], cwd)
    space = package_space(good, bad, envs, good_deps, bad_deps, report=report)
    extra = {"good_deps": good_deps.source, "bad_deps": bad_deps.source}
    return command_problem(space, rules, cwd, extra)
