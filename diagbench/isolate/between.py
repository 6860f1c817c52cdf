"""`isolate --between PKG==A..B`: bisect one package's published versions, all else fixed.

The probes are the good environment (`--good-deps`, or nothing but the package) with PKG at
one version each, built like a package isolation's. The versions bisected are those the
index has a file of for this interpreter (index.py), so an index of hundreds of versions
built for other Pythons costs no build each. A is the good baseline and B the bad one; a
version that does not install, or fails some other way, is skipped as `git bisect skip`
does (its neighbours are asked instead), so the answer may be a short list of candidates
rather than one version; after `skip_budget(n)` skipped versions the bisection stops there
and says between which versions the first bad one is (it never walks the range one by one).
"""

from __future__ import annotations

import dataclasses
import math
import sys
from collections.abc import Collection
from dataclasses import dataclass, field
from pathlib import Path

from diagbench.errors import UserError
from diagbench.execute.cancel import Cancel
from diagbench.isolate.deps import Deps, normalise, read_deps
from diagbench.isolate.factors import CommandSpace, Config, Factor, FactorKind, derive
from diagbench.isolate.index import indexes_of, parse_between, published, versions_between
from diagbench.isolate.packages import PYTHON_MARK, BuildReport, EnvironmentBuilt
from diagbench.isolate.problem import Problem, ServerRules, command_problem
from diagbench.isolate.record import FILENAME, Isolation, Status
from diagbench.isolate.run import (
    Interrupted,
    IsolateEvents,
    IsolateOptions,
    IsolateResult,
    Prober,
    check_baselines,
    isolation_slots,
    open_isolation,
)
from diagbench.isolate.search import Judged, Result, judge_launches
from diagbench.launch.environment import ask_all
from diagbench.launch.envs import Built, EnvCache
from diagbench.records.store import write_json

__all__ = ["VersionSpace", "bisect", "from_between"]

SHOWN_CANDIDATES = 8  # versions named in a 'one of ...' answer; more are given as a range


@dataclass(frozen=True)
class VersionSpace:
    """One package at each of its versions; `PKG==V` names the probe of version V."""

    command: CommandSpace
    base: Deps | None
    package: str
    versions: tuple[str, ...]  # from the good end to the bad end, in version order
    envs: EnvCache
    notes: tuple[str, ...] = ()
    report: BuildReport | None = field(default=None, compare=False)

    @property
    def factors(self) -> tuple[Factor, ...]:
        return (Factor(self.package, FactorKind.PACKAGE, self.versions[0], self.versions[-1]),)

    def version(self, applied: Collection[str]) -> str:
        if not applied:
            return self.versions[0]
        (name,) = applied
        return self.versions[-1] if name == self.package else name.split("==", 1)[1]

    def requirements(self, applied: Collection[str]) -> tuple[str, ...]:
        key = normalise(self.package)
        lines = {k: p.line for k, p in (self.base.pins if self.base else {}).items() if k != key}
        return tuple(sorted([*lines.values(), f"{self.package}=={self.version(applied)}"]))

    def configuration(self, applied: Collection[str]) -> Config:
        base = self.command.configuration(())
        python = str(self.envs.python(self.requirements(applied)))
        args = tuple(a.replace(PYTHON_MARK, python) for a in base.args)
        return Config(args, base.env, {self.package: self.version(applied)})

    def prepare(self, applied: Collection[str]) -> Built:
        built = self.envs.build(self.requirements(applied))
        if self.report is not None:
            self.report(EnvironmentBuilt.of(f"{self.package} {self.version(applied)}", built))
        return built


def from_between(
    between: str,
    good: str,
    env: list[str],
    good_deps: str | None,
    rules: ServerRules,
    cwd: Path,
    report: BuildReport | None = None,
) -> Problem:
    span = parse_between(between)
    if PYTHON_MARK not in good:
        raise UserError(f"--good: put {PYTHON_MARK} where the command runs Python, so each probe runs its version")
    base = read_deps("--good-deps", good_deps, cwd) if good_deps is not None else None
    python = base.python if base is not None and base.python is not None else Path(sys.executable)
    indexes = indexes_of([base])
    index = indexes.default if indexes else None
    found = published(span.package, index=index, python=_version_of(python))
    versions, skipped = versions_between(span, found, index)
    notes = [f"{len(versions)} published version(s) of {span.package} from {span.start} to {span.end}"]
    if skipped:
        notes.append("yanked, never probed: " + ", ".join(str(v) for v in skipped))
    cache = EnvCache(base_python=python, indexes=indexes)
    space = VersionSpace(derive(good, good, env, env), base, span.package, tuple(map(str, versions)), cache)
    space = dataclasses.replace(space, notes=tuple(notes), report=report)
    extra = {"between": between, "good_deps": base.source if base else None}
    return command_problem(space, rules, cwd, extra)


def _version_of(python: Path) -> str | None:
    """The interpreter's Python version (None: diagbench's own), for which files fit it."""
    if python == Path(sys.executable):
        return None
    version = ask_all([python])[python].get("python")
    return version if isinstance(version, str) else None


def skip_budget(count: int) -> int:
    """Versions that may be skipped (did not install, or could not be told) before the
    bisection stops: twice the probes a bisection of `count` versions needs, and a few."""
    return 2 * math.ceil(math.log2(max(count, 2))) + 2


def bisect(problem: Problem, options: IsolateOptions, events: IsolateEvents, cancel: Cancel) -> IsolateResult:
    """Open the run, launch A and B, bisect the versions between, write isolation.json."""
    assert isinstance(problem.space, VersionSpace)
    slots = options.slots or isolation_slots(problem, options)
    run_dir = open_isolation(problem, options, slots, events)
    prober = Prober(problem, options, run_dir, events, slots, cancel)
    isolation = _walk(problem.space, prober)
    write_json(run_dir.path / FILENAME, isolation.to_json())
    run_dir.write_verdicts([])
    return IsolateResult(run_dir, isolation, tuple(prober.harness_errors))


def _walk(space: VersionSpace, prober: Prober) -> Isolation:
    versions, name = space.versions, space.package
    try:
        good, bad = prober.launch([((), "good"), ((name,), "bad")])
        prober.target, trouble, notes = check_baselines(good, bad)
        prober.add_step((), good, "good")
        prober.add_step((name,), bad, "bad")
        if trouble:
            return _done(prober.isolation(Status.BAD_BASELINE, trouble, (), notes))
        lo, hi, skipped = _bisect(space, prober)
    except (Interrupted, KeyboardInterrupt):
        reason = "interrupted: the launches that finished are recorded, the rest are 'cancelled'"
        return _done(prober.isolation(Status.INTERRUPTED, reason, ()))
    if hi - lo > 1:
        left = versions[lo + 1 : hi + 1]
        named = ", ".join(left) if len(left) <= SHOWN_CANDIDATES else f"the {len(left)} from {left[0]} to {left[-1]}"
        why = f"the first bad version is one of {named}: the ones between could not be told ({len(skipped)} skipped)"
        return _done(prober.isolation(Status.NOT_ISOLABLE, why, (), notes), None, versions[lo])
    return _done(prober.isolation(Status.FOUND, "", (name,), notes), versions[hi], versions[lo])


def _bisect(space: VersionSpace, prober: Prober) -> tuple[int, int, set[int]]:
    """Indices of the last good and the first bad version found, and the skipped ones."""
    assert prober.target is not None
    lo, hi, skipped = 0, len(space.versions) - 1, set[int]()
    budget = skip_budget(len(space.versions))
    while hi - lo > 1 and len(skipped) < budget:
        candidates = [i for i in range(lo + 1, hi) if i not in skipped]
        if not candidates:
            break
        middle = (lo + hi) / 2
        mid = min(candidates, key=lambda i: (abs(i - middle), i))
        applied = (f"{space.package}=={space.versions[mid]}",)
        records = prober.launch([(applied, None)])[0]
        unbuilt = prober.key(applied) in prober.unbuilt
        judged = Judged(Result.UNRESOLVED, unbuildable=True) if unbuilt else judge_launches(records, prober.target)
        prober.add_step(applied, records, None)
        if judged.result is Result.FAIL:
            hi = mid
        elif judged.result is Result.PASS:
            lo = mid
        else:
            skipped.add(mid)
    return lo, hi, skipped


def _done(isolation: Isolation, first_bad: str | None = None, last_good: str | None = None) -> Isolation:
    return dataclasses.replace(isolation, bisected=True, first_bad=first_bad, last_good=last_good)
