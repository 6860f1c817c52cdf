"""Terminal output that fits: the demo's tables at 80 and 200 columns (golden files,
DIAGBENCH_UPDATE_GOLDEN=1 rewrites them), words never broken, the run's path never cut."""

from __future__ import annotations

import json
import os
import re
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console

from diagbench.isolate.factors import Factor, FactorKind
from diagbench.isolate.record import Isolation, Status, Step
from diagbench.isolate.search import Result, Target
from diagbench.judge.view import view_of
from diagbench.launch.environment import ASKING
from diagbench.records.manifest import Manifest
from diagbench.records.record import AttemptRecord
from diagbench.records.store import RunDir, load_run
from diagbench.render.fit import wrap
from diagbench.render.isolation import render_isolation
from diagbench.render.report import print_run
from diagbench.spec.hypotheses import Condition, Hypothesis, hypotheses_sha256
from diagbench.vocab import Evidence, FailureClass, Outcome

GOLDEN = Path(__file__).parents[1] / "golden"
CAPTURE = "Exception: Capture cuda graph failed: CUDA error: dependency created on uncaptured work in another stream"
READY = "[2026-12-03 04:09:30] The server is fired up and ready to roll!"
HYPS = [
    Hypothesis(
        "kernel-is-blocker",
        "My MMA kernel's autotune timing is what breaks capture under torch.compile.",
        {"kernel": ("stock",), "compile": ("on",), "inductor_graphs": ("unset",)},
        (Condition("ready"),),
        (Condition(Outcome.FAILED, FailureClass("cuda_graph_capture")),),
        {"refuted": "torch.compile is incompatible with this stack independent of my kernel"},
    ),
    Hypothesis(
        "inductor-graphs-collide",
        "Inductor's own CUDA graphs collide with SGLang's capture.",
        {"compile": ("on",), "inductor_graphs": ("0",)},
        (Condition("ready"),),
        (Condition("failed"),),
        {"refuted": "the failure is not Inductor's graph trees; capture fails with them off too"},
    ),
    Hypothesis(
        "eager-is-healthy",
        "Without torch.compile both kernels capture and serve.",
        {"compile": ("off",)},
        (Condition("ready"),),
        (Condition("failed"), Condition("crashed")),
        {"supported": "the eager stack is sound; the problem is specific to torch.compile"},
    ),
]
CELLS = [
    (kernel, compile_, graphs)
    for kernel in ("mma", "stock")
    for compile_, graphs in (("on", "unset"), ("on", "0"), ("off", "unset"))
]


def _cell_id(kernel: str, compile_: str, graphs: str) -> str:
    return f"kernel={kernel},compile={compile_},max_bs=32,inductor_graphs={graphs}"


@pytest.fixture
def demo(tmp_path: Path) -> Path:
    """The demo's six cells as the simulator ends them, in a run directory with a long path."""
    run_dir = RunDir(tmp_path / ("a-rather-long-folder-name-" * 3) / "20261203-040927-demo-compile-isolation")
    (run_dir.path / "cells").mkdir(parents=True)
    attempts: list[Any] = []
    for i, (kernel, compile_, graphs) in enumerate(CELLS, 1):
        name = f"{i:03d}-kernel-{kernel}.compile-{compile_}.max_bs-32.inductor_graphs-{graphs}-r1"
        params = {"kernel": kernel, "compile": compile_, "max_bs": "32", "inductor_graphs": graphs}
        attempts.append({"attempt": name, "cell_id": _cell_id(kernel, compile_, graphs), "repeat": 1, "params": params})
        ready = compile_ == "off"
        run_dir.write_result(
            AttemptRecord(
                cell_id=_cell_id(kernel, compile_, graphs),
                repeat=1,
                attempt=name,
                params=params,
                command=["python"],
                env_changes={},
                outcome=Outcome.READY if ready else Outcome.FAILED,
                failure_class=None if ready else FailureClass("cuda_graph_capture"),
                phase="warm-up" if ready else "capture bs=32",
                time_to_outcome_s=0.9 if ready else 0.64,
                evidence=Evidence(18 if ready else 28, READY if ready else CAPTURE),
            )
        )
    run_dir.write_manifest(
        Manifest.from_json(
            {
                "manifest_version": 1,
                "run_id": run_dir.path.name,
                "spec": {"name": "demo-compile-isolation"},
                "hypotheses": [h.to_json() for h in HYPS],
                "hypotheses_sha256": hypotheses_sha256(HYPS),
                "cells": [{"cell_id": a["cell_id"], "params": a["params"]} for a in attempts],
                "attempts": attempts,
            }
        )
    )
    return run_dir.path


def shown(run: Path, width: int) -> str:
    console = Console(width=width, record=True, color_system=None)
    print_run(console, view_of(load_run(run)))
    return console.export_text()


@pytest.mark.parametrize("width", [80, 200])
def test_the_demo_tables_fit_the_terminal(demo: Path, width: int) -> None:
    text = shown(demo, width)
    path = str(demo.resolve())
    lines = text.splitlines()
    assert path in lines  # the path alone on its line, whole, however wide
    assert all(len(line) <= width for line in lines if line != path), text
    for word in ("failed:cuda_graph_capture", "inductor_graphs", "inductor-graphs-collide", "supported"):
        assert word in text  # never broken across lines
    assert not re.search(r"\bfailed:\s*$", text, re.M)
    golden = GOLDEN / f"demo-{width}.txt"
    text = text.replace(path, "<RUN>")
    if os.environ.get("DIAGBENCH_UPDATE_GOLDEN") == "1":
        golden.write_text(text)
    assert text == golden.read_text()


def test_at_80_columns_the_demo_takes_a_screen_not_three(demo: Path) -> None:
    assert len(shown(demo, 80).splitlines()) <= 45  # was about 135 lines


def test_a_terminal_narrower_than_80_columns_gets_the_80_column_layout(demo: Path) -> None:
    assert max(len(line) for line in shown(demo, 50).splitlines() if "<" not in line and "/" not in line) <= 80


def test_wrap_breaks_at_spaces_and_after_commas_never_inside_a_word() -> None:
    assert wrap("kernel=stock,compile=on,max_bs=32 L28: boom", 20) == [
        "kernel=stock,",
        "compile=on,max_bs=32",
        "L28: boom",
    ]
    assert wrap("one two three four", 9, lines=1) == ["one two…"]
    assert wrap("x" * 30, 10) == ["xxxxxxxxx…"]  # a word longer than the line: cut, marked


def test_the_isolation_steps_show_what_decided_an_http_ready_or_timeout_step() -> None:
    steps = (
        Step((), Outcome.READY, None, Result.PASS, baseline="good", reason="ready: GET /health -> 200"),
        Step(("--slow",), Outcome.TIMEOUT, None, Result.FAIL, baseline="bad", reason="not ready within 5s"),
    )
    isolation = Isolation(
        status=Status.FOUND,
        reason="",
        target=Target(Outcome.TIMEOUT, None),
        factors=(Factor("--slow", FactorKind.FLAG, None, "--slow"),),
        steps=steps,
        culprit=("--slow",),
        launches=2,
    )
    console = Console(width=80, record=True, color_system=None)
    console.print(render_isolation(isolation, 80))
    text = console.export_text()
    assert "ready: GET /health -> 200" in text
    assert "not ready within 5s" in text
    assert all(len(line) <= 80 for line in text.splitlines())


def test_the_interrupt_tally_counts_a_cancelled_launch_as_launched(demo: Path) -> None:
    run_dir = RunDir(demo)
    names = sorted(p.name for p in (demo / "cells").iterdir())
    for name, started in ((names[0], "2026-12-03T04:09:27+0000"), (names[1], None), (names[2], None)):
        data = AttemptRecord.from_json(json.loads((demo / "cells" / name / "result.json").read_text()))
        run_dir.write_result(replace(data, outcome=Outcome.CANCELLED, failure_class=None, started_at=started))
    lines = shown(demo, 200).splitlines()
    assert "6 attempts: 4 launched (1 cancelled while it ran), 2 cancelled before launch" in lines


def test_plain_lines_break_at_spaces_under_their_indent_and_never_cut_a_word() -> None:
    from diagbench.render.fit import fit_lines

    line = "    argv: python3 -m server --port {port} " + " ".join(f"--flag-{n}" for n in range(12))
    path = "/a/" + "x" * 100
    text = fit_lines(f"title\n{line}\nsee {path}", 80)
    lines = text.splitlines()
    assert lines[0] == "title" and lines[1].startswith("    argv: python3")
    assert all(len(x) <= 80 for x in lines if path not in x) and lines[2].startswith("        --flag")
    assert f"    {path}" in lines  # too long for any line: whole, on its own (indented)
    assert text.replace("\n", " ").split() == f"title {line} see {path}".split()  # nothing lost


@pytest.mark.parametrize("columns", [80, 120])
def test_isolate_fits_its_tables_to_the_terminal_it_prints_to(tmp_path, columns):
    """isolate's own tables are laid out for the console's width: laid out unbounded, rich
    squeezed the short columns to nothing (an empty '#', outcome and result at 100 columns)."""
    from conftest import run_cli

    good = "SGLANG_SM120_MMA_FLASHMLA=0 {python} -m diagbench.simulator --port {port}"
    bad = "SGLANG_SM120_MMA_FLASHMLA=1 {python} -m diagbench.simulator --port {port} --enable-torch-compile"
    done = run_cli("isolate", "--good", good, "--bad", bad, "--runs-dir", str(tmp_path), columns=columns)
    assert done.returncode == 0, done.stdout + done.stderr
    lines = done.stdout.splitlines()
    # a path is never cut: the run's, and the interpreter's in the line a slow probe gets (a loaded host)
    paths = ("run directory: ", ASKING)
    too_wide = [line for line in lines if len(line) > columns and not line.startswith(paths)]
    assert too_wide == []
    steps = lines[next(i for i, line in enumerate(lines) if line.startswith("isolation steps")) :]
    assert any(
        "failed:cuda_graph_capture" in line and "fail" in line.split("failed:cuda_graph_capture")[1] for line in steps
    )
    assert sum(" pass" in line for line in steps) >= 1  # the probe without the flag (the good one is not made)
    assert sum(line.rstrip().endswith(" fail") or " fail " in line for line in steps) >= 2  # the bad one and the flag
