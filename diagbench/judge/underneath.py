"""What changed underneath two runs: the server's environment (packages, torch's CUDA and
NCCL, the driver, steering variables) and start-up phases that moved beyond the noise of
the repeats. Pure: manifests' `environment` and records in, changes out."""

from __future__ import annotations

import statistics
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass

from diagbench.jsonvalue import JSON, JSONObject, as_list, as_object
from diagbench.records.record import AttemptRecord
from diagbench.vocab import Outcome

__all__ = [
    "MIN_SHIFT_RATIO",
    "MIN_SHIFT_S",
    "STARTUP",
    "EnvChange",
    "PhaseShift",
    "Underneath",
    "compare_environments",
    "phase_shifts",
]

MIN_SHIFT_S = 2.0  # a phase this much slower or faster at least, whatever the repeats say
MIN_SHIFT_RATIO = 0.25  # and by a quarter of its earlier duration
STARTUP = "start-up"  # launch -> ready, beside the phases


@dataclass(frozen=True)
class EnvChange:
    """One thing underneath that differs: a package, torch's CUDA/NCCL, the driver, a variable."""

    kind: str  # package | python | torch | cuda | nccl | driver | variable | interpreter
    name: str
    before: str | None  # None: absent
    after: str | None

    @property
    def words(self) -> str:
        if self.before is None:
            return f"{self.name} {self.after} (added)"
        if self.after is None:
            return f"{self.name} {self.before} (removed)"
        return f"{self.name} {self.before} -> {self.after}"

    def to_json(self) -> JSONObject:
        return {"kind": self.kind, "name": self.name, "before": self.before, "after": self.after}


@dataclass(frozen=True)
class Underneath:
    changes: tuple[EnvChange, ...] = ()
    same: tuple[str, ...] = ()  # what was compared and did not change: "driver", "CUDA"
    unknown: str = ""  # why nothing could be compared

    @property
    def words(self) -> str:
        """`torch 2.10.0 -> 2.11.0, flashinfer 0.2.5 -> 0.2.6, driver same`."""
        if self.unknown:
            return self.unknown
        said = [c.words for c in self.changes] + [f"{s} same" for s in self.same]
        return ", ".join(said) if said else "nothing recorded differs"


@dataclass(frozen=True)
class PhaseShift:
    """A phase of one cell that took longer or shorter, beyond the spread of its repeats."""

    cell_id: str
    phase: str
    before_s: float  # medians
    after_s: float
    noise_s: float  # the widest spread of either run's repeats

    @property
    def words(self) -> str:
        delta = self.after_s - self.before_s
        way = "slower" if delta > 0 else "faster"
        return f"{self.phase} {abs(delta):.0f} s {way} ({self.before_s:.1f} s -> {self.after_s:.1f} s)"

    def to_json(self) -> JSONObject:
        return {
            "cell_id": self.cell_id,
            "phase": self.phase,
            "before_s": self.before_s,
            "after_s": self.after_s,
            "noise_s": self.noise_s,
        }


def compare_environments(a: JSONObject | None, b: JSONObject | None) -> Underneath:
    if not a or not b:
        return Underneath(unknown="environment not recorded in " + ("both runs" if not a and not b else "one run"))
    changes: list[EnvChange] = []
    same: list[str] = []
    pa, pb = _part(a, "python"), _part(b, "python")
    _one(changes, same, "interpreter", "interpreter", pa.get("interpreter"), pb.get("interpreter"), quiet=True)
    _one(changes, same, "python", "Python", pa.get("python"), pb.get("python"), quiet=True)
    changes.extend(_packages(as_list(pa.get("distributions")), as_list(pb.get("distributions"))))
    ta, tb = _part(pa, "torch"), _part(pb, "torch")
    _one(changes, same, "cuda", "CUDA", ta.get("cuda_runtime"), tb.get("cuda_runtime"))
    _one(changes, same, "nccl", "NCCL", ta.get("nccl"), tb.get("nccl"))
    _one(changes, same, "driver", "driver", _drivers(a), _drivers(b))
    va, vb = _part(a, "variables"), _part(b, "variables")
    for name in sorted(set(va) | set(vb)):
        _one(changes, same, "variable", name, va.get(name), vb.get(name), quiet=True)
    return Underneath(tuple(changes), tuple(same))


def _part(data: JSONObject, key: str) -> JSONObject:
    return as_object(data.get(key)) or {}


def _one(
    changes: list[EnvChange], same: list[str], kind: str, name: str, a: JSON, b: JSON, quiet: bool = False
) -> None:
    if a != b:
        changes.append(EnvChange(kind, name, None if a is None else str(a), None if b is None else str(b)))
    elif not quiet and a is not None:  # "driver same" only where a driver was seen
        same.append(name)


def _packages(a: Sequence[JSON], b: Sequence[JSON]) -> list[EnvChange]:
    """Distributions added, removed, upgraded or rebuilt from another commit; torch first, then by name."""
    before, after = _versions(a), _versions(b)
    names = sorted(set(before) | set(after), key=lambda n: (n != "torch", n))
    return [EnvChange("package", n, before.get(n), after.get(n)) for n in names if before.get(n) != after.get(n)]


def _versions(dists: Sequence[JSON]) -> dict[str, str]:
    out = {}
    for d in filter(None, map(as_object, dists)):
        origin = _part(d, "origin")
        commit = f"@{str(origin['commit'])[:12]}" if origin.get("kind") == "vcs" and origin.get("commit") else ""
        out[str(d["name"]).lower().replace("_", "-")] = f"{d['version']}{commit}"
    return out


def _drivers(environment: JSONObject) -> str | None:
    gpus = filter(None, map(as_object, as_list(environment.get("gpus"))))
    drivers = sorted({str(g["driver"]) for g in gpus if g.get("driver")})
    return ", ".join(drivers) or None


def phase_shifts(a: Sequence[AttemptRecord], b: Sequence[AttemptRecord]) -> list[PhaseShift]:
    """Per cell and phase, the medians that moved more than the repeats' spread (and the floors)."""
    before, after = _durations(a), _durations(b)
    shifts = []
    for key in sorted(set(before) & set(after)):
        old, new = before[key], after[key]
        noise = max(max(old) - min(old), max(new) - min(new))
        m_old, m_new = statistics.median(old), statistics.median(new)
        if abs(m_new - m_old) > max(noise, MIN_SHIFT_S, MIN_SHIFT_RATIO * m_old):
            shifts.append(PhaseShift(key[0], key[1], m_old, m_new, noise))
    return shifts


def _durations(records: Sequence[AttemptRecord]) -> dict[tuple[str, str], list[float]]:
    """(cell, phase) -> seconds spent in it, one value per attempt; launch -> ready as `start-up`."""
    out: dict[tuple[str, str], list[float]] = defaultdict(list)
    for r in records:
        if not r.outcome.ran or r.time_to_outcome_s is None:
            continue
        spent: dict[str, float] = defaultdict(float)
        ends = [p.at_s for p in r.phases[1:]] + [r.time_to_outcome_s]
        for phase, end in zip(r.phases, ends, strict=False):  # no phase seen: only the start-up
            spent[phase.name] += max(0.0, end - phase.at_s)
        if r.outcome is Outcome.READY:
            spent[STARTUP] = r.time_to_outcome_s
        for name, seconds in spent.items():
            out[(r.cell_id, name)].append(seconds)
    return out
