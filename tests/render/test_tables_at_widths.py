"""Every command's table fits 80 and 200 columns with whole words, through render/fit.py
(issue 37: triage's table was cut at 80 columns: `pri`, `failed:cud│a_graph_ca│pture`)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from rich.console import Console, RenderableType

from diagbench.records.parts import Price
from diagbench.render.triage import render_triage
from diagbench.triage.record import Recommendation, Status, Target, Triage, Tried
from diagbench.vocab import Evidence, Outcome

WIDTHS = (80, 200)
CAPTURE_LINE = (
    "Exception: Capture cuda graph failed: CUDA error: dependency created on uncaptured work in another stream"
)


def shown(renderable: RenderableType, width: int) -> list[str]:
    console = Console(width=width, record=True, color_system=None, force_terminal=False)
    console.print(renderable)
    return console.export_text().splitlines()


def assert_fits(lines: list[str], width: int, *whole: str) -> None:
    assert all(len(line) <= width for line in lines), "\n".join(line for line in lines if len(line) > width)
    text = "\n".join(lines)
    for word in whole:
        assert word in text, f"{word!r} not whole in:\n{text}"


def _tried(rid: str, change: str, outcome: Outcome, cls: str | None, price: Price | None = None) -> Tried:
    works = outcome is Outcome.READY
    return Tried(f"sglang.{rid}", (change,), "docs", "", 1, "cmd", outcome, cls, works, 41.3 if works else None, price)


TRIAGE = Triage(
    Status.FOUND,
    "",
    "python3 -m sglang.launch_server --model-path M --enable-torch-compile",
    "sglang",
    Target(Outcome.FAILED, "cuda_graph_capture", evidence=Evidence(812, CAPTURE_LINE)),
    (
        _tried("halve-cuda-graph-max-bs", "~ --cuda-graph-max-bs 64 -> 32", Outcome.FAILED, "cuda_graph_capture"),
        _tried(
            "no-torch-compile",
            "- --enable-torch-compile",
            Outcome.READY,
            None,
            Price(requests=12, ok=12, failed=0, seconds=3.1, tokens_per_s=439.0, latency_p50_s=0.0342),
        ),
        _tried("disable-cuda-graph", "+ --disable-cuda-graph", Outcome.READY, None),
    ),
    Recommendation(
        "sglang.no-torch-compile",
        "python3 -m sglang.launch_server --model-path M",
        ("- --enable-torch-compile",),
        "cheapest",
    ),
)


@pytest.mark.parametrize("width", WIDTHS)
def test_triage(width: int) -> None:
    lines = shown(render_triage(TRIAGE, width), width)
    assert_fits(lines, width, "failed:cuda_graph_capture", "halve-cuda-graph-max-bs", "price", "439 tok/s")


@pytest.mark.parametrize("width", WIDTHS)
def test_signatures_keep_every_id_whole(width: int) -> None:

    from diagbench.logs.signatures import builtin_packs, load_packs
    from diagbench.render.classify import render_signatures

    sigs = load_packs(builtin_packs(), Path.cwd())
    lines = shown(render_signatures(sigs, width), width)
    assert_fits(lines, width, *(s.id for s in sigs))


@pytest.mark.parametrize("width", WIDTHS)
def test_diff_lines_fit(width: int) -> None:
    from types import SimpleNamespace
    from typing import Any, cast

    from diagbench.judge.diff import CellChange, CellState, Changes
    from diagbench.render.diff import diff_as
    from diagbench.render.formats import Shown
    from diagbench.vocab import DiffFormat

    cell = "kernel=stock,compile=on,max_bs=32,inductor_graphs=unset"
    changes = Changes(
        cells=[
            CellChange(cell, CellState((("ready", 1),)), CellState((("failed:cuda_graph_capture", 2), ("ready", 1))))
        ]
    )
    a = cast(Any, SimpleNamespace(run_id="20261203-040927-demo-compile-isolation"))
    b = cast(Any, SimpleNamespace(run_id="20261204-101010-demo-compile-isolation"))
    rendering = diff_as(a, b, changes, DiffFormat.TEXT, width)
    assert isinstance(rendering, Shown)
    lines = "\n".join(str(line) for line in rendering.lines).splitlines()
    assert_fits(lines, width, "REGRESSION", "failed:cuda_graph_capture", "inductor_graphs=unset:")


def test_the_hypotheses_table_has_one_layout_and_no_empty_meaning() -> None:
    from rich.text import Text

    from diagbench.render.fit import Column, fit

    columns = [
        Column("id", [Text("h1")]),
        Column("verdict", [Text("supported")]),
        Column("why", [Text("a=1 ready")], flex=True),
        Column("meaning", [Text("")], flex=True),
    ]
    for width in WIDTHS:
        text = "\n".join(shown(fit("hypotheses", columns, width, boxed=False), width))
        assert "┃" not in text and "meaning" not in text and "\n    a=1 ready" in text


def test_markdown_keeps_an_oom_line_through_what_is_free() -> None:
    from diagbench.records.record import AttemptRecord
    from diagbench.render.report import DOCUMENT_LINE_CHARS, deciding_line

    oom = (
        "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity "
        "of 79.19 GiB of which 1.02 GiB is free. Including non-PyTorch memory, this process has 78.16 GiB in use."
    )
    record = AttemptRecord(
        cell_id="a=1",
        repeat=1,
        attempt="001-a-1-r1",
        params={"a": "1"},
        command=["x"],
        env_changes={},
        outcome=Outcome.FAILED,
        evidence=Evidence(7, oom),
    )
    assert "1.02 GiB is free" in deciding_line(record, DOCUMENT_LINE_CHARS)
    assert "1.02 GiB is free" not in deciding_line(record)  # the terminal's tables still fit


ROOT = Path(__file__).resolve().parents[2]
LOG_LINE = re.compile(r"^[> ] +\d+ \| ")  # classify's lines of the log: whole, as written
COMMAND_LINES = {
    "plan": ("plan", "experiments/demo.yaml"),
    "signatures": ("signatures",),
    "remedies": ("remedies",),
    "classify": ("classify", "tests/fixtures/sglang_capture_oom.log"),
    "report": ("report", "runs/refserver-capture-h200"),
    "diff": ("diff", "runs/refserver-capture-h200", "runs/refserver-capture-h200-fresh-caches"),
    "isolate": ("isolate", "--dry-run", "--good", "A=0 python3 x.py", "--bad", "A=1 python3 x.py --flag"),
}


@pytest.mark.parametrize("width", WIDTHS)
@pytest.mark.parametrize("command", sorted(COMMAND_LINES))
def test_each_commands_output_fits(command: str, width: int) -> None:
    from conftest import run_cli

    done = run_cli(*COMMAND_LINES[command], cwd=ROOT, columns=width)
    assert done.returncode in (0, 1), done.stderr
    path = str(ROOT / "runs" / "refserver-capture-h200")
    long = [
        line
        for line in done.stdout.splitlines()
        if len(line) > width and not LOG_LINE.match(line) and line.strip() != path
    ]
    assert not long, "\n".join(long)
