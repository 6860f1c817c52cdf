"""Every command's table fits 80 and 200 columns with whole words, through render/fit.py
(issue 37: triage's table was cut at 80 columns: `pri`, `failed:cud│a_graph_ca│pture`)."""

from __future__ import annotations

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
