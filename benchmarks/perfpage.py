"""The performance page's figures, regenerated from the benchmarks in one command:

    python benchmarks/perfpage.py [--quick] [--from-results] [--results DIR] [--page PATH]

Runs each benchmark that prints a figure beside its baseline in the same run (scanbench.py:
classify against grep, start-up; isolate.py: launches against textbook ddmin; slots.py: four
slots against one; latency_vs.py: decision latency against commit 8d51688), each recording
benchmarks/results/NAME.json, then writes their figures into docs/explanation/performance.md
between its two `perfpage` marks (the rest of the page is prose, kept as written), with the
machine, its load, the commit and the date of each. `--from-results` only writes the page from
the results already there (what the tests do, on tiny inputs).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
PAGE = HERE.parent / "docs" / "explanation" / "performance.md"
START, END = "<!-- perfpage:start -->", "<!-- perfpage:end -->"
# name -> the command that records benchmarks/results/NAME.json (quick, full)
BENCHMARKS: dict[str, tuple[list[str], list[str]]] = {
    "scan": (["scanbench.py", "--quick"], ["scanbench.py"]),
    "isolate": (["isolate.py", "--quick"], ["isolate.py"]),
    "slots": (["slots.py", "--quick", "--slots-only"], ["slots.py", "--slots-only"]),
    "latency": (["latency_vs.py", "--rounds", "2", "--launches", "5"], ["latency_vs.py"]),
}
Row = tuple[str, str, str, str]  # figure, diagbench, baseline in the same run, ratio


def run_benchmarks(quick: bool) -> None:
    """Each benchmark in turn (never two at once: they would time each other), each recording
    benchmarks/results/NAME.json."""
    for name, (fast, full) in BENCHMARKS.items():
        print(f"== {name}: python benchmarks/{' '.join(fast if quick else full)}", flush=True)
        subprocess.run([sys.executable, *(fast if quick else full)], cwd=HERE, check=True)


def scan_rows(f: dict[str, Any]) -> list[Row]:
    rows = []
    if "scan" in f:
        s = f["scan"]
        rows.append(
            (
                f"`classify --json` of a {s['megabytes']} MB realistic log, {s['signatures']} signatures, as a process "
                f"(median of {s['rounds']} interleaved rounds)",
                f"{s['classify']['mb_s']:.0f} MB/s ({s['classify']['wall_s']:.2f} s, CPU {s['classify']['cpu_s']:.2f} s)",
                f"`grep -E -c -f`, same patterns: {s['grep']['mb_s']:.0f} MB/s ({s['grep']['wall_s']:.2f} s, "
                f"CPU {s['grep']['cpu_s']:.2f} s)",
                f"{s['ratio_wall']:.2f}x grep (CPU {s['ratio_cpu']:.2f}x)",
            )
        )
    if "startup" in f:
        s = f["startup"]
        fast, typer, bare = (
            s["diagbench_classify_--json_(10_lines)"],
            s["through_typer,_as_before"],
            s["python_-c_pass"],
        )
        rows.append(
            (
                f"start-up: `classify --json` of a 10-line log (median of {s['rounds']} rounds)",
                f"{fast['wall_ms']:.0f} ms (CPU {fast['cpu_ms']:.0f} ms)",
                f"through typer, as before: {typer['wall_ms']:.0f} ms (CPU {typer['cpu_ms']:.0f} ms); "
                f"`python -c pass` {bare['wall_ms']:.0f} ms",
                f"CPU {typer['cpu_ms'] / fast['cpu_ms']:.2f}x less",
            )
        )
    return rows


def isolate_rows(f: dict[str, Any]) -> list[Row]:
    rows = []
    for s in f["scenarios"]:
        this, dd = s["diagbench"], s["ddmin"]
        shape = "tuned on" if s["tuned"] else "held out"
        rows.append(
            (
                f"isolate: {s['title']} ({s['cases']} cases, --repeat {s['repeat']}, {shape})",
                f"launches median {this['median']:g} (min {this['min']:g}, max {this['max']:g}); {s['answers']}",
                f"textbook ddmin: median {dd['median']:g} (min {dd['min']:g}, max {dd['max']:g}); "
                f"before: median {s['before']['median']:g}",
                f"ddmin / this: {dd['median'] / this['median']:.2f}" if this["median"] else "",
            )
        )
    for title, p in f.get("placements", {}).items():
        this, dd = p["diagbench"], p["ddmin"]
        rows.append(
            (
                f"isolate: {title} ({p['placements']}, counted without launching, --repeat 1)",
                f"launches median {this['median']:g} (min {this['min']:g}, max {this['max']:g})",
                f"textbook ddmin: median {dd['median']:g} (min {dd['min']:g}, max {dd['max']:g})",
                f"ddmin / this: {dd['median'] / this['median']:.2f}" if this["median"] else "",
            )
        )
    return rows


def slots_rows(f: dict[str, Any]) -> list[Row]:
    where = ", ".join(f"{k} {v:.2f} s" for k, v in f["overhead_four"].items())
    return [
        (
            f"{f['cells']} cells of {f['startup_s']:g} s start-up on 4 GPU slots (fake GPUs)",
            f"{f['four_slots_s']:.1f} s; beyond the start-ups, per slot: {where}",
            f"one slot: {f['one_slot_s']:.1f} s",
            f"{f['speedup']:.2f}x of 4",
        )
    ]


def latency_rows(f: dict[str, Any]) -> list[Row]:
    this, base = f["sides"].get("this"), f["sides"].get("base")
    if this is None or base is None:
        return []
    return [
        (
            f"decision latency, ready line written -> SIGTERM handled ({f['rounds']} interleaved rounds)",
            f"p50 {this['p50_ms']:.2f} ms, p99 {this['p99_ms']:.2f} ms ({this['n']} launches)",
            f"commit {f['base']}: p50 {base['p50_ms']:.2f} ms, p99 {base['p99_ms']:.2f} ms ({base['n']} launches)",
            f"base / this: p50 {base['p50_ms'] / this['p50_ms']:.2f}, p99 {base['p99_ms'] / this['p99_ms']:.2f}"
            if this["p50_ms"] and this["p99_ms"]
            else "",
        )
    ]


RENDER: dict[str, Callable[[dict[str, Any]], list[Row]]] = {
    "scan": scan_rows,
    "isolate": isolate_rows,
    "slots": slots_rows,
    "latency": latency_rows,
}


def section(results: Path) -> str:
    """The figures as Markdown: one table per benchmark, each under the machine it ran on."""
    out = [START, "", "Regenerate with `python benchmarks/perfpage.py` (`--quick` for smaller runs).", ""]
    for name, render in RENDER.items():
        path = results / f"{name}.json"
        if not path.is_file():
            out += [f"*{name}: not measured yet (`python benchmarks/perfpage.py` records it).*", ""]
            continue
        data = json.loads(path.read_text())
        m = data["machine"]
        load = f"load {m['load_start'][0]:.1f} at the start, {m['load_end'][0]:.1f} at the end"
        out += [
            f"**{name}** (`benchmarks/results/{name}.json`): {m['cpu']}, {m['cores']} cores, {load}; "
            f"commit {data['commit']}, {data['date']}",
            "",
            "| figure | diagbench | baseline, same run | ratio |",
            "|---|---|---|---|",
            *(f"| {' | '.join(cell.replace('|', '/') for cell in row)} |" for row in render(data["figures"])),
            "",
        ]
    return "\n".join([*out, END])


def write_page(results: Path, page: Path) -> None:
    """Put the figures between the page's marks (the page is made with them if it has none)."""
    text = page.read_text() if page.is_file() else "# Performance\n\n"
    if START in text and END in text:
        head, rest = text.split(START, 1)
        tail = rest.split(END, 1)[1]
    else:
        head, tail = text.rstrip("\n") + "\n\n", "\n"
    page.write_text(head + section(results) + tail)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="each benchmark's quick run")
    parser.add_argument("--from-results", action="store_true", help="write the page from the recorded results only")
    parser.add_argument("--results", type=Path, default=HERE / "results", help="where the recorded results are read")
    parser.add_argument("--page", type=Path, default=PAGE, help="the page to write")
    args = parser.parse_args()
    if not args.from_results:
        run_benchmarks(args.quick)
    write_page(args.results, args.page)
    print(f"wrote {args.page}")


if __name__ == "__main__":
    main()
