"""diagbench's figures, each printed beside its baseline measured in the same run.

    python benchmarks/bench.py [--quick] [all|latency|scan|memory|overhead|teardown|startup|phases]

Nothing here is a test: it measures and prints. Sizes are the design's (200 MB log,
1 GB flood); --quick shrinks them for a smoke run.
"""

from __future__ import annotations

import argparse
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import psutil

from common import fake_command, write_spec
from diagbench.execute.events import QuietEvents
from diagbench.execute.pipeline import RunOptions, execute
from diagbench.spec.load import load_spec
from scanbench import bench_phases, bench_scan, bench_startup


def pct(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(p / 100 * (len(ordered) - 1)))]


def run_spec(folder: Path, server: dict, matrix: dict | None = None, repeat: int = 1):
    folder.mkdir(parents=True, exist_ok=True)
    spec = load_spec(write_spec(folder, server, matrix))
    return execute(spec, RunOptions(folder / "runs", repeat=repeat), QuietEvents())


def bench_latency(n: int) -> None:
    """Line written -> SIGTERM sent, over many launches of a server that fails then hangs."""
    with tempfile.TemporaryDirectory() as tmp:
        server = {
            "command": fake_command(
                "out=Load weight begin.", "sleep=0.05", "stamp=torch.OutOfMemoryError: CUDA out of memory.", "hang"
            )
        }
        failing = run_spec(Path(tmp), server, repeat=n)
        settle = [_latency(Path(tmp), r) for r in failing.records]
        ready_server = {
            "command": fake_command(
                "out=Load weight begin.", "sleep=0.05", "stamp=The server is fired up and ready to roll!", "hang"
            )
        }
        ready = run_spec(Path(tmp) / "r", ready_server, repeat=n)
        immediate = [_latency(Path(tmp) / "r", r) for r in ready.records]
        poll = _baseline_poll_loop(Path(tmp), n, 0.5)
    print(f"\n== detection latency, line written -> SIGTERM sent ({n} launches each)")
    print(
        f"  diagbench, ready line:             p50 {pct(immediate, 50) * 1000:7.1f} ms   p99 {pct(immediate, 99) * 1000:7.1f} ms"
    )
    print(
        f"  diagbench, failure line (+settle): p50 {pct(settle, 50) * 1000:7.1f} ms   p99 {pct(settle, 99) * 1000:7.1f} ms"
    )
    print(
        f"  vLLM-style 0.5 s poll loop (run):  p50 {pct(poll, 50) * 1000:7.1f} ms   p99 {pct(poll, 99) * 1000:7.1f} ms"
    )
    for name, interval in (("SGLang harness, 10 s poll", 10.0), ("the seed's 30 s grep loop", 30.0)):
        print(
            f"  {name + ' (uniform, computed):':34} p50 {interval / 2 * 1000:7.0f} ms   p99 {interval * 0.99 * 1000:7.0f} ms"
        )
    print(f"  ratio p50, 30 s loop / diagbench failure: {15.0 / statistics.median(settle):,.0f}x")


def _latency(folder: Path, record) -> float:
    log = (next(folder.glob("runs/2*")) / "cells" / record.attempt / "server.log").read_text()
    stamp = float(re.search(r"@(\d+\.\d+)", log).group(1))
    return record.sigterm_at - stamp


def _baseline_poll_loop(folder: Path, n: int, interval: float) -> list[float]:
    """The hand-written loop: launch, then every `interval` s re-read the log and grep it."""
    out = []
    for i in range(n):
        log = folder / f"poll{i}.log"
        with log.open("wb") as handle:
            proc = subprocess.Popen(
                fake_command(
                    "out=Load weight begin.", "sleep=0.05", "stamp=torch.OutOfMemoryError: CUDA out of memory.", "hang"
                ),
                stdout=handle,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
            time.sleep(interval * (i / n))  # launches land at every offset of the poll cycle
            while True:
                text = log.read_text(errors="replace")
                if "CUDA out of memory" in text:
                    sent = time.time()
                    proc.terminate()
                    break
                time.sleep(interval)
            proc.wait()
        out.append(sent - float(re.search(r"@(\d+\.\d+)", log.read_text()).group(1)))
    return out


def _best(action, runs: int = 3) -> float:
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        action()
        times.append(time.perf_counter() - start)
    return min(times)


def _peak_rss(argv: list[str]) -> int:
    proc = psutil.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    peak = 0
    while proc.poll() is None:
        try:
            peak = max(peak, proc.memory_info().rss)
        except psutil.Error:
            break
        time.sleep(0.02)
    return peak


def bench_memory(megabytes: int) -> None:
    """Peak RSS of `diagbench run` while its server floods the log, beside a tiny log."""
    with tempfile.TemporaryDirectory() as tmp:
        rows = []
        for size in (1, megabytes):
            spec = write_spec(
                Path(tmp),
                {
                    "command": fake_command(f"flood={size}", "out=The server is fired up and ready to roll!", "hang"),
                    "timeout": "600s",
                },
            )
            argv = [sys.executable, "-m", "diagbench", "run", str(spec), "--runs-dir", str(Path(tmp) / "runs")]
            start = time.perf_counter()
            peak = _peak_rss(argv)
            rows.append((size, peak, time.perf_counter() - start))
            shutil.rmtree(Path(tmp) / "runs")
        naive = _peak_rss(
            [
                sys.executable,
                "-c",
                "import subprocess,sys; subprocess.run(sys.argv[1:], capture_output=True)",
                *fake_command(f"flood={megabytes}"),
            ]
        )
    print("\n== peak RSS of diagbench while the server floods the log")
    for size, peak, seconds in rows:
        rate = f"   ({size / seconds:4.0f} MB/s through pipe, log file and scanner)" if size > 1 else ""
        print(f"  {size:5d} MB of log: {peak / (1 << 20):6.1f} MB peak RSS{rate}")
    print(f"  baseline, subprocess.run(capture_output=True) on {megabytes} MB: {naive / (1 << 20):6.0f} MB peak RSS")


def bench_overhead(n: int) -> None:
    """Wall time per cell beyond the server's own, against bare Popen + wait.

    A run has a fixed cost (spec, manifest, provenance) and a cost per cell; the per-cell
    cost is (T(n cells) - T(1 cell)) / (n - 1)."""
    script = fake_command("out=The server is fired up and ready to roll!", "sleep=10")
    bare = []
    for _ in range(n):  # the least any harness does: Popen, read to the ready line, terminate, wait
        start = time.perf_counter()
        proc = subprocess.Popen(script, stdout=subprocess.PIPE)
        while b"ready to roll" not in proc.stdout.readline():
            pass
        proc.terminate()
        proc.wait()
        proc.stdout.close()
        bare.append(time.perf_counter() - start)
    server = {"command": script}
    with tempfile.TemporaryDirectory() as tmp:
        start = time.perf_counter()
        run_spec(Path(tmp) / "one", server, repeat=1)
        one = time.perf_counter() - start
        start = time.perf_counter()
        run_spec(Path(tmp) / "many", server, repeat=n)
        many = time.perf_counter() - start
    per_cell = (many - one) / (n - 1)
    b = statistics.median(bare)
    print(f"\n== per-cell cost ({n} cells)")
    print(f"  bare Popen, read to the ready line, terminate + wait (median): {b * 1000:6.1f} ms")
    print(f"  diagbench per cell: launch -> ready decided -> torn down -> recorded: {per_cell * 1000:6.1f} ms")
    print(
        f"  overhead per cell: {(per_cell - b) * 1000:6.1f} ms   (plus {(one - per_cell) * 1000:.0f} ms once per run)"
    )


def bench_teardown() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        obey = run_spec(
            Path(tmp) / "a",
            {"command": fake_command("out=The server is fired up and ready to roll!", "hang"), "grace": "5s"},
            repeat=3,
        )
        pid = Path(tmp) / "d.pid"
        stubborn = run_spec(
            Path(tmp) / "b",
            {
                "command": fake_command(
                    "ignore-term", f"daemon={pid}", "child", "out=The server is fired up and ready to roll!", "hang"
                ),
                "grace": "2s",
            },
            repeat=3,
        )
    print("\n== teardown")
    print(
        f"  SIGTERM-obeying server (grace 5 s):                         {statistics.median(r.teardown_s for r in obey.records) * 1000:7.1f} ms, "
        f"left behind: {sum(len(r.left_behind) for r in obey.records)}"
    )
    print(
        f"  SIGTERM-ignoring server + setsid daemon + child (grace 2 s): {statistics.median(r.teardown_s for r in stubborn.records) * 1000:7.1f} ms, "
        f"killed {len(stubborn.records[0].killed)} processes, left behind: {sum(len(r.left_behind) for r in stubborn.records)}"
    )


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("what", nargs="*", default=["all"])
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    sizes = {  # name: (benchmark, argument for --quick, argument for the full run)
        "startup": (bench_startup, None, None),
        "latency": (bench_latency, 10, 50),
        "overhead": (bench_overhead, 5, 20),
        "teardown": (bench_teardown, None, None),
        "scan": (bench_scan, 20, 200),
        "memory": (bench_memory, 100, 1024),
        "phases": (bench_phases, 10, 40),
    }
    for name, (bench, quick, full) in sizes.items():
        if "all" in args.what or name in args.what:
            size = quick if args.quick else full
            if size is None:
                bench()
            else:
                bench(size)


if __name__ == "__main__":
    threading.current_thread().name = "bench"
    main()
