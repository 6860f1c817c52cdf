"""Golden reports from a run directory made by hand (DIAGBENCH_UPDATE_GOLDEN=1 rewrites them)."""

from __future__ import annotations

import json
import os
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console

from diagbench.judge.view import view_of
from diagbench.records.manifest import Manifest
from diagbench.records.record import AttemptRecord
from diagbench.records.store import RunDir, load_run
from diagbench.render.report import print_run, render_json, render_junit, render_markdown, render_table
from diagbench.spec.hypotheses import Condition, Hypothesis, hypotheses_sha256
from diagbench.vocab import Evidence, FailureClass, Outcome

GOLDEN = Path(__file__).parents[1] / "golden"
HYPS = [
    Hypothesis(
        "kernel-is-blocker",
        "My kernel breaks capture under torch.compile.",
        {"kernel": ("stock",), "compile": ("on",)},
        (Condition(Outcome.READY),),
        (Condition(Outcome.FAILED, FailureClass.CUDA_GRAPH_CAPTURE),),
        {"supported": "my kernel is the capture-blocker", "refuted": "the stack is at fault, not my kernel"},
    ),
    Hypothesis(
        "eager-ok",
        "Eager launches come up.",
        {"compile": ("off",)},
        (Condition(Outcome.READY),),
        (Condition(Outcome.FAILED),),
        {},
    ),
    Hypothesis(
        "mma-compile",
        "MMA with compile comes up.",
        {"kernel": ("mma",), "compile": ("on",)},
        (Condition(Outcome.READY),),
        (Condition(Outcome.FAILED),),
        {"inconclusive": "rerun it"},
    ),
]
CELLS: list[dict[str, Any]] = [
    {"cell_id": f"kernel={k},compile={c}", "params": {"kernel": k, "compile": c}}
    for k in ("mma", "stock")
    for c in ("on", "off")
]


def record(i: int, kernel: str, compile_: str, outcome: str, **kw) -> AttemptRecord:
    cell = f"kernel={kernel},compile={compile_}"
    return AttemptRecord(
        cell_id=cell,
        repeat=1,
        attempt=f"00{i}-kernel-{kernel}.compile-{compile_}-r1",
        params={"kernel": kernel, "compile": compile_},
        command=["srv"],
        env_changes={},
        outcome=Outcome(outcome),
        time_to_outcome_s=1.5 * i,
        duration_s=1.5 * i + 0.1,
        **kw,
    )


@pytest.fixture
def run(tmp_path: Path) -> Path:
    run_dir = RunDir(tmp_path / "golden-run")
    (run_dir.path / "cells").mkdir(parents=True)
    run_dir.write_manifest(
        Manifest.from_json(
            {
                "manifest_version": 1,
                "run_id": "golden-run",
                "created_at": "2026-12-02T10:00:00+0000",
                "spec": {"name": "golden", "description": "A hand-made run."},
                "hypotheses": [h.to_json() for h in HYPS],
                "hypotheses_sha256": hypotheses_sha256(HYPS),
                "expect": [{"when": {"compile": ["off"]}, "outcome": ["ready"]}],
                "cells": CELLS,
                "attempts": [
                    {
                        "attempt": f"00{i}-kernel-{c['params']['kernel']}.compile-{c['params']['compile']}-r1",
                        "cell_id": c["cell_id"],
                        "repeat": 1,
                    }
                    for i, c in enumerate(CELLS, 1)
                ],
            }
        )
    )
    records = [
        record(
            1, "mma", "on", "timeout", reason="not ready within 8s; last phase: capture bs=32", phase="capture bs=32"
        ),
        record(
            2,
            "mma",
            "off",
            "ready",
            signature="sglang.ready",
            phase="warm-up",
            evidence={"line_no": 14, "text": "The server is fired up and ready to roll!"},
        ),
        record(
            3,
            "stock",
            "on",
            "failed",
            failure_class="cuda_graph_capture",
            secondary_classes=["oom"],
            signature="sglang.capture_failed",
            phase="capture bs=64",
            evidence={"line_no": 19, "text": "Exception: Capture cuda graph failed: CUDA error: out of memory"},
        ),
        record(4, "stock", "off", "crashed", exit_code=1, reason="exited before ready (exit code 1)", phase="load"),
    ]
    for r in records:
        run_dir.write_result(r)
        (run_dir.cells / r.attempt / "server.log").write_bytes(b"line one\n\x1b[31mcolour\x1b[0m and \x00 nul\n")
    return run_dir.path


def check(name: str, text: str, run: Path) -> None:
    text = text.replace(str(run.resolve()), "<RUN>")
    path = GOLDEN / name
    if os.environ.get("DIAGBENCH_UPDATE_GOLDEN") == "1":
        path.write_text(text)
    assert text == path.read_text()


def test_markdown(run: Path) -> None:
    check("report.md", render_markdown(view_of(load_run(run))), run)


def test_json(run: Path) -> None:
    text = render_json(view_of(load_run(run)))
    check("report.json", text, run)
    data = json.loads(text)
    assert [v["verdict"] for v in data["verdicts"]] == ["refuted", "inconclusive", "inconclusive"]
    assert data["violations"][0]["got"] == "crashed"


def test_junit(run: Path) -> None:
    text = render_junit(view_of(load_run(run)))
    check("report.junit.xml", text, run)
    root = ET.fromstring(text)
    suites = {s.get("name"): s for s in root.iter("testsuite")}
    assert suites["golden.attempts"].get("failures") == "1"  # the crashed eager cell broke `expect`
    hyp = {c.get("name"): c for c in suites["golden.hypotheses"].iter("testcase")}
    assert hyp["kernel-is-blocker"].find("failure") is not None
    assert hyp["eager-ok"].find("skipped") is not None
    skipped = hyp["mma-compile"].find("skipped")
    assert skipped is not None and skipped.get("message") == "inconclusive: kernel=mma,compile=on timed out"


def test_table(run: Path) -> None:
    console = Console(width=200, record=True, color_system=None)
    print_run(console, view_of(load_run(run)))
    check("report.txt", console.export_text(), run)


def test_log_text_is_never_taken_for_markup(tmp_path: Path) -> None:
    run_dir = RunDir(tmp_path / "r")
    (run_dir.path / "cells").mkdir(parents=True)
    run_dir.write_manifest(
        Manifest.from_json(
            {
                "run_id": "r",
                "spec": {"name": "m"},
                "hypotheses": [],
                "hypotheses_sha256": hypotheses_sha256([]),
                "cells": [],
                "attempts": [],
            }
        )
    )
    run_dir.write_result(
        AttemptRecord(
            cell_id="a=[bold]x",
            repeat=1,
            attempt="001-a",
            params={"a": "[bold]x"},
            command=[],
            env_changes={},
            outcome=Outcome.FAILED,
            failure_class="other",
            evidence=Evidence(1, "[rank0]: boom [/x] [red]"),
        )
    )
    console = Console(width=200, record=True, color_system=None)
    console.print(render_table(view_of(load_run(run_dir.path))))
    text = console.export_text()
    assert "[rank0]: boom [/x] [red]" in text and "[bold]x" in text
