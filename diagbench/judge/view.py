"""A run as the reports see it: the manifest, the records, and verdicts judged afresh
against the manifest's own (pre-registered) copy of the hypotheses."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from diagbench.judge.verdicts import Verdict, Violation, check_expectations, judge
from diagbench.records.record import AttemptRecord
from diagbench.records.redact import Redactor, redact_record, run_redactor
from diagbench.records.store import LoadedRun, Unreadable
from diagbench.spec.hypotheses import Expectation, Hypothesis, hypotheses_sha256
from diagbench.spec.matrix import CellRow, selects
from diagbench.vocab import ExitCode, Outcome, VerdictWord

LOG_TAIL_BYTES = 8192
T = TypeVar("T")


@dataclass(frozen=True)
class RunView:
    run_id: str
    path: Path
    spec_name: str
    description: str
    created_at: str
    hypotheses_sha256: str
    spec_sha256: str
    hashes_match: bool  # the manifest's hypotheses still hash to the recorded value
    planned: list[dict[str, Any]]
    records: list[AttemptRecord]
    verdicts: list[Verdict]
    violations: list[Violation]
    expectations: list[Expectation]
    provenance: dict[str, Any] = field(default_factory=dict)
    log_tails: dict[str, str] = field(default_factory=dict)
    unreadable: list[Unreadable] = field(default_factory=list)
    plan_unreadable: bool = False  # the manifest's `attempts` (the plan) could not be read whole
    redactor: Redactor = field(default_factory=Redactor)  # for log lines a report reads itself (HTML context)
    timeout_s: float | None = None  # server.timeout of the run (what a stall saved is counted against)

    @property
    def nothing_started(self) -> bool:
        """Every attempt that was launched ended `launch_error`: a setup mistake, not an outcome."""
        ran = [r for r in self.records if r.outcome.ran]
        return bool(ran) and all(r.outcome is Outcome.LAUNCH_ERROR for r in ran)

    @property
    def complete(self) -> bool:
        """Every planned attempt has a final record; a plan that could not be read is never complete."""
        if not self.planned or self.plan_unreadable:
            return False
        done = {r.attempt for r in self.records if r.outcome not in (Outcome.CANCELLED, Outcome.INTERNAL_ERROR)}
        return all(a["attempt"] in done for a in self.planned)


def view_of(loaded: LoadedRun, redactor: Redactor | None = None) -> RunView:
    """The run as reports show it: each manifest part read with suspicion (a malformed part
    is named and left out), records and log tails with their secrets blanked."""
    redactor = redactor or run_redactor(loaded.manifest)
    manifest = _Manifest(loaded)
    hypotheses = manifest.each("hypotheses", lambda _, h: Hypothesis.from_json(h))
    expectations = manifest.each("expect", Expectation.from_json)
    cells = manifest.each("cells", _cell_row)
    records = [redact_record(r, redactor) for r in loaded.records]
    spec = manifest.mapping("spec")
    return RunView(
        run_id=str(loaded.manifest.get("run_id", loaded.path.name)),
        path=loaded.path,
        spec_name=str(spec.get("name", "")),
        description=str(spec.get("description", "")),
        created_at=str(loaded.manifest.get("created_at", "")),
        hypotheses_sha256=str(loaded.manifest.get("hypotheses_sha256", "")),
        spec_sha256=str(loaded.manifest.get("spec_sha256", "")),
        hashes_match=hypotheses_sha256(hypotheses) == loaded.manifest.get("hypotheses_sha256"),
        planned=manifest.each("attempts", _planned),
        records=records,
        verdicts=[judge(h, cells, records) for h in hypotheses],
        violations=check_expectations(expectations, records),
        expectations=expectations,
        provenance=manifest.mapping("provenance"),
        log_tails={
            r.attempt: redactor.cut(log_tail(loaded.path / "cells" / r.attempt / "server.log")) for r in records
        },
        unreadable=[*loaded.unreadable, *manifest.unreadable],
        plan_unreadable="attempts" in manifest.failed,
        redactor=redactor,
        timeout_s=_timeout(spec),
    )


def _timeout(spec: Mapping[str, Any]) -> float | None:
    server = spec.get("server")
    value = server.get("timeout_s") if isinstance(server, Mapping) else None
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


class _Manifest:
    """Reads the parts of a manifest, naming each malformed one instead of failing on it."""

    def __init__(self, loaded: LoadedRun):
        self.data, self.path = loaded.manifest, loaded.path / "manifest.json"
        self.unreadable: list[Unreadable] = []
        self.failed: set[str] = set()  # the keys that could not be read whole

    def each(self, key: str, parse: Callable[[int, Any], T]) -> list[T]:
        items = self.data.get(key, [])
        if not isinstance(items, list):
            self.unreadable.append(Unreadable(self.path, f"field '{key}': expected a list"))
            self.failed.add(key)
            return []
        out = []
        for index, item in enumerate(items):
            try:
                out.append(parse(index, item))
            except (KeyError, TypeError, ValueError, AttributeError) as exc:
                self.unreadable.append(Unreadable(self.path, f"{key}[{index}]: {_why(exc)}"))
                self.failed.add(key)
        return out

    def mapping(self, key: str) -> dict[str, Any]:
        value = self.data.get(key, {})
        if isinstance(value, dict):
            return value
        self.unreadable.append(Unreadable(self.path, f"field '{key}': expected a mapping"))
        return {}


def _cell_row(_: int, cell: Any) -> CellRow:
    return CellRow(_text(cell["cell_id"]), {_text(k): _text(v) for k, v in cell["params"].items()})


def _planned(_: int, item: Any) -> dict[str, Any]:
    if not isinstance(item, dict) or not isinstance(item.get("attempt"), str):
        raise ValueError("expected {attempt, cell_id, repeat, ...}")
    return item


def _text(value: Any) -> str:
    if not isinstance(value, str):
        raise TypeError(f"expected a string, got {value!r}")
    return value


def _why(exc: Exception) -> str:
    if isinstance(exc, KeyError):
        return f"missing field {exc.args[0]!r}"
    return str(exc) or type(exc).__name__


def log_tail(path: Path, size: int = LOG_TAIL_BYTES) -> str:
    """The end of a server log; nothing for anything but a regular file: a FIFO would block, and
    a link could show another file (diagbench writes neither)."""
    if path.is_symlink() or not path.is_file():
        return ""
    try:
        with path.open("rb") as handle:
            handle.seek(0, 2)
            handle.seek(max(0, handle.tell() - size))
            return handle.read().decode("utf-8", errors="replace")
    except OSError:
        return ""


def problems(view: RunView) -> list[str]:
    """What makes a run unusable, one line each: unreadable records, or no attempt could start."""
    lines = [f"{u}" for u in view.unreadable]
    if view.nothing_started:
        first = next(r for r in view.records if r.outcome is Outcome.LAUNCH_ERROR)
        lines.append(f"no attempt could start: {first.reason}")
    return lines


def unchecked(view: RunView) -> list[str]:
    """Each `expect` that selects a planned attempt with no final record (none, or `cancelled`
    or `internal_error`): the run is partial, so the expect is not known to hold."""
    final = {r.attempt for r in view.records if r.outcome not in (Outcome.CANCELLED, Outcome.INTERNAL_ERROR)}
    final |= {u.path.parent.name for u in view.unreadable if u.path.name == "result.json"}  # named already
    lines = []
    for exp in view.expectations:
        missing = [a["attempt"] for a in view.planned if a["attempt"] not in final and selects(exp.when, _params(a))]
        if missing:
            few = ", ".join(missing[:3]) + (f" and {len(missing) - 3} more" if len(missing) > 3 else "")
            lines.append(
                f"expect #{exp.index + 1} not checked: the run is partial ({few} never ended with a result); "
                f"finish it with: diagbench run --resume {view.path}"
            )
    return lines


def _params(planned: dict[str, Any]) -> dict[str, str]:
    params = planned.get("params")
    return params if isinstance(params, dict) else {}


def exit_code(view: RunView, strict: bool) -> ExitCode:
    """2 a record unreadable or no attempt could start; 0 all expectations held; 1 one was
    violated, or could not be checked (a partial run), or with strict a hypothesis not supported."""
    if problems(view):
        return ExitCode.USAGE
    if view.violations or unchecked(view):
        return ExitCode.EXPECT_VIOLATED
    if strict and any(v.verdict is not VerdictWord.SUPPORTED for v in view.verdicts):
        return ExitCode.EXPECT_VIOLATED
    return ExitCode.OK
