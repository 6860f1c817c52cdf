"""A run as the reports see it: the manifest, the records, and verdicts judged afresh
against the manifest's own (pre-registered) copy of the hypotheses."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from diagbench.judge.verdicts import Verdict, Violation, check_expectations, judge
from diagbench.records.record import AttemptRecord
from diagbench.records.store import LoadedRun
from diagbench.spec.hypotheses import Expectation, Hypothesis, hypotheses_sha256
from diagbench.spec.matrix import CellRow
from diagbench.vocab import ExitCode, Outcome, VerdictWord

LOG_TAIL_BYTES = 8192


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

    @property
    def complete(self) -> bool:
        done = {r.attempt for r in self.records if r.outcome not in (Outcome.CANCELLED, Outcome.INTERNAL_ERROR)}
        return all(a["attempt"] in done for a in self.planned)


def view_of(loaded: LoadedRun) -> RunView:
    manifest = loaded.manifest
    hypotheses = [Hypothesis.from_json(h) for h in manifest.get("hypotheses", [])]
    expectations = [Expectation.from_json(i, e) for i, e in enumerate(manifest.get("expect", []))]
    cells = [CellRow(str(c["cell_id"]), dict(c["params"])) for c in manifest.get("cells", [])]
    spec = manifest.get("spec", {})
    return RunView(
        run_id=str(manifest.get("run_id", loaded.path.name)),
        path=loaded.path,
        spec_name=str(spec.get("name", "")),
        description=str(spec.get("description", "")),
        created_at=str(manifest.get("created_at", "")),
        hypotheses_sha256=str(manifest.get("hypotheses_sha256", "")),
        spec_sha256=str(manifest.get("spec_sha256", "")),
        hashes_match=hypotheses_sha256(hypotheses) == manifest.get("hypotheses_sha256"),
        planned=list(manifest.get("attempts", [])),
        records=loaded.records,
        verdicts=[judge(h, cells, loaded.records) for h in hypotheses],
        violations=check_expectations(expectations, loaded.records),
        expectations=expectations,
        provenance=dict(manifest.get("provenance", {})),
        log_tails={r.attempt: log_tail(loaded.path / "cells" / r.attempt / "server.log") for r in loaded.records},
    )


def log_tail(path: Path, size: int = LOG_TAIL_BYTES) -> str:
    try:
        with path.open("rb") as handle:
            handle.seek(0, 2)
            handle.seek(max(0, handle.tell() - size))
            return handle.read().decode("utf-8", errors="replace")
    except OSError:
        return ""


def exit_code(view: RunView, strict: bool) -> ExitCode:
    """0 all expectations held; 1 one was violated (with strict: or a hypothesis not supported)."""
    if view.violations:
        return ExitCode.EXPECT_VIOLATED
    if strict and any(v.verdict is not VerdictWord.SUPPORTED for v in view.verdicts):
        return ExitCode.EXPECT_VIOLATED
    return ExitCode.OK
