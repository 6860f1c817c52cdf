"""benchmarks/perfpage.py writes the performance page from recorded results (tiny ones here:
nothing is timed), keeping the page's prose around its marks."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
MACHINE = {"cpu": "Test CPU 9000", "cores": 2, "load_start": [3.5, 2, 1], "load_end": [4.25, 2, 1]}
FIGURES = {
    "scan": {
        "scan": {
            "megabytes": 2, "signatures": 7, "rounds": 3, "load": [1, 1],
            "grep": {"wall_s": 0.2, "cpu_s": 0.1, "mb_s": 10.0},
            "classify": {"wall_s": 0.1, "cpu_s": 0.08, "mb_s": 20.0, "peak_mb": 30},
            "classify_re": {"wall_s": 1.0, "mb_s": 2.0}, "ratio_wall": 2.0, "ratio_cpu": 1.25,
        },
        "startup": {
            "rounds": 3, "load": [1, 1], "python_-c_pass": {"wall_ms": 20, "cpu_ms": 18},
            "diagbench_--help": {"wall_ms": 90, "cpu_ms": 80},
            "diagbench_classify_--json_(10_lines)": {"wall_ms": 100, "cpu_ms": 90},
            "through_typer,_as_before": {"wall_ms": 150, "cpu_ms": 135},
        },
    },
    "isolate": {
        "scenarios": [
            {
                "title": "one culprit among 8", "tuned": False, "cases": 2, "factors": 8, "repeat": 1,
                "diagbench": {"min": 5, "median": 5, "max": 6}, "answers": "right x2",
                "ddmin": {"min": 5, "median": 6.5, "max": 8}, "before": {"min": 8, "median": 9, "max": 10},
            }
        ]
    },
    "slots": {
        "cells": 16, "startup_s": 1.0, "one_slot_s": 17.0, "four_slots_s": 4.4, "speedup": 3.86,
        "overhead_one": {"teardown": 0.5}, "overhead_four": {"teardown": 0.25, "between attempts": 0.1},
    },
}  # fmt: skip


def record(folder: Path, name: str, figures: dict) -> None:
    data = {"benchmark": name, "date": "2026-12-06", "commit": "abc1234", "machine": MACHINE, "figures": figures}
    (folder / f"{name}.json").write_text(json.dumps(data))


def perfpage(results: Path, page: Path) -> subprocess.CompletedProcess[str]:
    argv = [sys.executable, str(ROOT / "benchmarks" / "perfpage.py"), "--from-results"]
    argv += ["--results", str(results), "--page", str(page)]
    return subprocess.run(argv, capture_output=True, text=True, timeout=60)


def test_the_page_gets_every_figure_beside_its_baseline_and_the_machine(tmp_path):
    for name, figures in FIGURES.items():
        record(tmp_path, name, figures)
    page = tmp_path / "performance.md"
    page.write_text(
        "# Performance\n\nProse before.\n\n<!-- perfpage:start -->\nold\n<!-- perfpage:end -->\n\nProse after.\n"
    )
    done = perfpage(tmp_path, page)
    assert done.returncode == 0, done.stderr
    text = page.read_text()
    assert text.startswith("# Performance\n\nProse before.\n\n<!-- perfpage:start -->")
    assert text.endswith("<!-- perfpage:end -->\n\nProse after.\n") and "\nold\n" not in text
    assert text.count("Test CPU 9000, 2 cores, load 3.5 at the start, 4.2 at the end; commit abc1234") == 3
    assert (
        "| 20 MB/s (0.10 s, CPU 0.08 s) | `grep -E -c -f`, same patterns: 10 MB/s (0.20 s, CPU 0.10 s) | 2.00x grep"
        in text
    )
    assert "through typer, as before: 150 ms (CPU 135 ms)" in text and "CPU 1.50x less" in text
    assert "launches median 5 (min 5, max 6); right x2 | textbook ddmin: median 6.5 (min 5, max 8)" in text
    assert (
        "| 4.4 s; beyond the start-ups, per slot: teardown 0.25 s, between attempts 0.10 s | one slot: 17.0 s | 3.86x of 4 |"
        in text
    )
    assert "*latency: not measured yet" in text  # no result recorded: said, not left out


def test_a_page_without_marks_gets_them(tmp_path):
    record(tmp_path, "slots", FIGURES["slots"])
    page = tmp_path / "new.md"
    assert perfpage(tmp_path, page).returncode == 0
    text = page.read_text()
    assert text.startswith("# Performance\n\n<!-- perfpage:start -->") and "3.86x of 4" in text
    assert perfpage(tmp_path, page).returncode == 0 and page.read_text() == text  # written again: the same page
