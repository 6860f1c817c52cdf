"""Many attempts: plan them, open the run, launch them (in order or a few at a time),
record each the moment it ends, and judge the hypotheses. Core only: it never prints."""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from diagbench import gpu, provenance
from diagbench.attempt import PlannedAttempt, run_attempt
from diagbench.errors import UserError
from diagbench.hypotheses import Verdict, Violation, check_expectations, hypotheses_sha256, judge
from diagbench.matrix import Cell, parse_only, select_cells
from diagbench.outcomes import Outcome
from diagbench.records import AttemptRecord
from diagbench.scan import Scanner
from diagbench.spec import Spec
from diagbench.store import (
    MANIFEST_VERSION,
    REDACTED,
    RunDir,
    load_run,
    new_run_id,
    open_run,
    redact,
    redact_argv,
)

EventCallback = Callable[[str, PlannedAttempt, Any], None]  # kind: start | phase | done


class Cancel:
    """A cancel flag every attempt can select() on: set() wakes them all at once."""

    def __init__(self) -> None:
        self.event = threading.Event()
        self.read_fd, self._write_fd = os.pipe()

    def set(self) -> None:
        if not self.event.is_set():
            self.event.set()
            os.write(self._write_fd, b"x")

    def is_set(self) -> bool:
        return self.event.is_set()

    def close(self) -> None:
        os.close(self.read_fd)
        os.close(self._write_fd)


@dataclass
class RunResult:
    run_dir: RunDir
    records: list[AttemptRecord]
    verdicts: list[Verdict] = field(default_factory=list)
    violations: list[Violation] = field(default_factory=list)
    interrupted: bool = False
    harness_errors: list[str] = field(default_factory=list)


def plan_attempts(cells: Sequence[Cell], repeat: int) -> list[PlannedAttempt]:
    return [PlannedAttempt(cell, r) for cell in cells for r in range(1, repeat + 1)]


def build_manifest(
    spec: Spec, planned: Sequence[PlannedAttempt], run_id: str, options: dict[str, Any]
) -> dict[str, Any]:
    """Everything known before the first launch, hypotheses and their hash included."""
    spec_json = spec.to_json()
    spec_json["server"]["env"] = redact(dict(spec.server.env))
    return {
        "manifest_version": MANIFEST_VERSION,
        "run_id": run_id,
        "created_at": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "spec": spec_json,
        "spec_text": redact_text(spec.text, spec),
        "spec_sha256": spec.sha256,
        "hypotheses": [h.to_json() for h in spec.hypotheses],
        "hypotheses_sha256": hypotheses_sha256(spec.hypotheses),
        "expect": [e.to_json() for e in spec.expectations],
        "cells": [
            {"cell_id": c.id, "params": dict(c.params), "args": list(c.args), "env": redact(dict(c.env))}
            for c in spec.cells
        ],
        "attempts": [
            {
                "attempt": p.name,
                "cell_id": p.cell.id,
                "repeat": p.repeat,
                "params": dict(p.cell.params),
                "args": redact_argv(p.cell.args),
            }
            for p in planned
        ],
        "options": options,
        "provenance": provenance.collect(spec.path.resolve().parent),
    }


def redact_text(text: str, spec: Spec) -> str:
    """The spec's source with every secret-looking env value it sets blanked out."""
    values: dict[str, str | None] = dict(spec.server.env)
    for cell in spec.cells:
        values.update(cell.env)
    for key, value in values.items():
        if value and redact({key: value})[key] == REDACTED:
            text = text.replace(value, REDACTED)
    return text


def run_attempts(
    spec: Spec,
    planned: Sequence[PlannedAttempt],
    run_dir: RunDir,
    parallel: int,
    on_event: EventCallback,
    cancel: Cancel,
) -> RunResult:
    """Launch every planned attempt; on Ctrl-C, stop them and record the rest as cancelled."""
    scanner = Scanner(spec.server.signatures)
    result = RunResult(run_dir, [])
    baseline = gpu.memory_used_mib()
    lock = threading.Lock()

    def one(item: PlannedAttempt) -> AttemptRecord:
        if cancel.is_set():
            record = _cancelled(item, "not started: the run was interrupted")
        else:
            gpu_info = _settle_gpu(baseline, cancel)
            on_event("start", item, None)
            try:
                record = run_attempt(
                    item,
                    spec.server,
                    run_dir.attempt_dir(item.name),
                    scanner,
                    f"{run_dir.path.name}/{item.name}",
                    cancel.read_fd,
                    lambda p, phase: on_event("phase", p, phase),
                )
            except Exception as exc:  # a harness bug in one cell is recorded, not fatal to the matrix
                with lock:
                    result.harness_errors.append(f"{item.name}: {type(exc).__name__}: {exc}")
                record = _cancelled(item, f"diagbench failed: {type(exc).__name__}: {exc}")
            if gpu_info is not None:
                record = _with_gpu(record, gpu_info)
        run_dir.write_result(record)
        on_event("done", item, record)
        return record

    with ThreadPoolExecutor(max_workers=max(1, parallel), thread_name_prefix="attempt") as pool:
        futures = [pool.submit(one, item) for item in planned]
        try:
            for future in as_completed(futures):
                result.records.append(future.result())
        except KeyboardInterrupt:
            result.interrupted = True
            cancel.set()
            result.records = [f.result() for f in futures]
    return result


def judge_run(
    spec_hypotheses: Sequence[Any], expectations: Sequence[Any], cells: Sequence[Any], records: Sequence[AttemptRecord]
) -> tuple[list[Verdict], list[Violation]]:
    verdicts = [judge(h, cells, records) for h in spec_hypotheses]
    return verdicts, check_expectations(expectations, records)


def _settle_gpu(baseline: list[int] | None, cancel: Cancel) -> dict[str, Any] | None:
    if baseline is None:
        return None
    before, waited = gpu.wait_for_baseline(baseline, cancel.event)
    return {"baseline_mib": baseline, "before_mib": before, "settle_wait_s": round(waited, 3)}


def _with_gpu(record: AttemptRecord, info: dict[str, Any]) -> AttemptRecord:
    info = {**info, "after_mib": gpu.memory_used_mib()}
    return AttemptRecord.from_json({**record.to_json(), "gpu": info})


def _cancelled(item: PlannedAttempt, reason: str) -> AttemptRecord:
    return AttemptRecord(
        cell_id=item.cell.id,
        repeat=item.repeat,
        attempt=item.name,
        params=dict(item.cell.params),
        command=[],
        env_changes={},
        outcome=Outcome.CANCELLED.value,
        reason=reason,
    )


@dataclass(frozen=True)
class RunOptions:
    """What `diagbench run` was asked for, beyond the spec."""

    runs_dir: Path = Path("runs")
    run_id: str | None = None
    only: tuple[str, ...] = ()
    repeat: int = 1
    parallel: int = 1
    resume: Path | None = None  # an interrupted run directory to finish


def execute(
    spec: Spec,
    options: RunOptions,
    on_event: EventCallback,
    on_open: Callable[[RunDir, list[PlannedAttempt]], None],
) -> RunResult:
    """The run pipeline: select cells, plan, open the run, pre-register, launch, judge."""
    if options.parallel > 1 and spec.server.port is not None:
        raise UserError(
            f"--parallel {options.parallel} needs server.port: auto (cells cannot share port {spec.server.port})"
        )
    if options.resume is not None:
        run_dir, planned, done = reopen_run(spec, options.resume)
    else:
        planned = plan_attempts(select_cells(spec.cells, parse_only(options.only, spec.axes)), options.repeat)
        run_dir, done = open_run(options.runs_dir, options.run_id or new_run_id(spec.name)), []
        settings = {"only": list(options.only), "repeat": options.repeat, "parallel": options.parallel}
        run_dir.write_manifest(build_manifest(spec, planned, run_dir.path.name, settings))
    on_open(run_dir, planned)
    finished = {r.attempt for r in done}
    cancel = Cancel()
    try:
        todo = [p for p in planned if p.name not in finished]
        result = run_attempts(spec, todo, run_dir, options.parallel, on_event, cancel)
    finally:
        cancel.close()
    order = {p.name: i for i, p in enumerate(planned)}
    result.records = sorted([*done, *result.records], key=lambda r: order.get(r.attempt, 0))
    cell_rows = [{"cell_id": c.id, "params": dict(c.params)} for c in spec.cells]
    result.verdicts, result.violations = judge_run(spec.hypotheses, spec.expectations, cell_rows, result.records)
    run_dir.write_verdicts([v.to_json() for v in result.verdicts])
    return result


def reopen_run(spec: Spec, path: Path) -> tuple[RunDir, list[PlannedAttempt], list[AttemptRecord]]:
    """An interrupted run to finish: same spec (by hash), its plan, and what already ended."""
    loaded = load_run(path)
    if loaded.manifest.get("spec_sha256") != spec.sha256:
        raise UserError(
            f"{path}: the spec changed since this run started (its sha256 differs); "
            "resume with the spec it was started with, or start a new run"
        )
    cells = {c.id: c for c in spec.cells}
    planned = [
        PlannedAttempt(cells[a["cell_id"]], int(a["repeat"]))
        for a in loaded.manifest.get("attempts", [])
        if a.get("cell_id") in cells
    ]
    done = [r for r in loaded.records if r.outcome != Outcome.CANCELLED.value]
    return RunDir(loaded.path), planned, done
