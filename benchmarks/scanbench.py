"""Log scan and start-up figures, each beside its baseline measured in the same run.

    python benchmarks/scanbench.py [--quick] [scan|startup|phases ...]    (or: python benchmarks/bench.py scan)

scan: `diagbench classify --json` of a realistic 200 MB log, end to end as a process
(start-up, reading, every built-in signature), against GNU `grep -E -c -f` with the same
packs' patterns on the same file (unanchored: the prefix alternation removed; LC_ALL=C,
grep's fastest mode; its output piped, since GNU grep stops at the first match when it
writes to /dev/null). Ratio = grep's time / diagbench's: 1.00 or more is as fast as grep.
The pure-`re` engine (`--engine re`) is what a platform without hyperscan gets.

startup: `python -c pass`, `diagbench --help`, and `classify --json` of a ten-line log.
Times are the best of several runs (wall clock), CPU time (user + system) beside them.

phases: the scanner in 64 KB reads, as `run` scans a live log (every phase change kept, for
the record's timeline) beside the scan that keeps only the last phase line before each
decisive line (what classify asks for, and what `run` did before), on three kinds of log.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

from common import ROOT
from diagbench.logs.lines import LineSplitter
from diagbench.logs.scan import Scanner
from diagbench.logs.signatures import Signature, builtin_packs, load_packs
from genlog import generate

DIAGBENCH = [sys.executable, "-m", "diagbench"]
# the diagbench installed beside this python (run from elsewhere, not this checkout), with its
# byte code cached as an install leaves it
HOME = tempfile.gettempdir()
ENV = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}


def grep_pattern(sig: Signature) -> str:
    """A signature as GNU grep -E reads it: unanchored (no prefix alternation), no (?:...),
    no named groups, \\d spelt out (inside a bracket expression too)."""
    text = sig.pattern.replace("^{prefix}", "").replace("{prefix}", "")
    text = re.sub(r"\(\?P<\w+>", "(", text).replace("(?:", "(")
    out, in_class, i = [], False, 0
    while i < len(text):
        if text.startswith("\\d", i):
            out.append("0-9" if in_class else "[0-9]")
            i += 2
            continue
        if text[i] == "\\":
            out.append(text[i : i + 2])
            i += 2
            continue
        in_class = (text[i] == "[") or (in_class and text[i] != "]")
        out.append(text[i])
        i += 1
    return "".join(out)


def timed(argv: Sequence[str], runs: int, env: dict[str, str] | None = None) -> tuple[float, float, str, int]:
    """Best wall time and CPU time (user + system) of `runs` runs, the output, the peak RSS."""
    best_wall = best_cpu = float("inf")
    output, peak = "", 0
    for _ in range(runs):
        start = time.perf_counter()
        proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env or ENV, cwd=HOME)
        out = proc.stdout.read() if proc.stdout else b""  # a pipe: grep must not see /dev/null
        _, _, usage = os.wait4(proc.pid, 0)
        proc.returncode = 0  # reaped by wait4
        wall = time.perf_counter() - start
        best_wall, best_cpu = min(best_wall, wall), min(best_cpu, usage.ru_utime + usage.ru_stime)
        output, peak = out.decode(), max(peak, usage.ru_maxrss * 1024)
    return best_wall, best_cpu, output, peak


def warm(path: Path) -> None:
    """Read the file into the page cache for everyone alike, a block at a time (a child's peak
    RSS starts at its parent's: this process must stay small)."""
    with path.open("rb") as handle:
        while handle.read(1 << 20):
            pass


def bench_scan(megabytes: int, runs: int = 5) -> None:
    sigs = load_packs(builtin_packs(), ROOT)
    with tempfile.TemporaryDirectory() as tmp:
        log = Path(tmp) / "server.log"
        generate(log, megabytes)
        size = log.stat().st_size / (1 << 20)
        patterns = Path(tmp) / "patterns"
        patterns.write_text("\n".join(grep_pattern(s) for s in sigs) + "\n")
        warm(log)
        cold, _, _, _ = timed([*DIAGBENCH, "classify", "--json", str(log)], 1)  # may compile and cache the database
        grep_env = {**ENV, "LC_ALL": "C"}
        rows = [
            (
                "GNU grep -E -c -f (LC_ALL=C)",
                *timed(["grep", "-E", "-c", "-f", str(patterns), str(log)], runs, grep_env),
            )
        ]
        rows.append(("diagbench classify --json", *timed([*DIAGBENCH, "classify", "--json", str(log)], runs)))
        rows.append(
            (
                "  ... --engine re (no hyperscan)",
                *timed([*DIAGBENCH, "classify", "--json", "--engine", "re", str(log)], 1),
            )
        )
    print(f"\n== classify vs grep: {size:.0f} MB realistic log, {len(sigs)} signatures, end to end as processes")
    grep_wall = rows[0][1]
    for name, wall, cpu, output, peak in rows:
        print(
            f"  {name:34} {wall:6.2f} s  {size / wall:6.0f} MB/s  cpu {cpu:5.2f} s  "
            f"peak RSS {peak / (1 << 20):4.0f} MB   grep/this {grep_wall / wall:5.2f}"
        )
        if name.startswith(("diagbench", "  ...")):
            got = json.loads(output)
            assert (got["outcome"], got["failure_class"]) == ("failed", "cuda_graph_capture"), got
        else:
            assert int(output) > 0, output
    print(f"  (the first classify, which compiled and cached the signature database: {cold:.2f} s)")


def bench_startup(runs: int = 15) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        tiny = Path(tmp) / "tiny.log"
        tiny.write_text("INFO: loading\n" * 9 + "The server is fired up and ready to roll!\n")
        timed([*DIAGBENCH, "classify", "--json", str(tiny)], 1)  # the caches
        rows = [
            ("python -c pass", *timed([sys.executable, "-c", "pass"], runs)),
            ("diagbench --help", *timed([*DIAGBENCH, "--help"], runs)),
            ("diagbench classify --json (10 lines)", *timed([*DIAGBENCH, "classify", "--json", str(tiny)], runs)),
        ]
    print(f"\n== start-up (best of {runs})")
    base = rows[0][1]
    for name, wall, cpu, _, _ in rows:
        extra = f"  (+{(wall - base) * 1000:.0f} ms over python)" if name != "python -c pass" else ""
        print(f"  {name:38} {wall * 1000:6.0f} ms  cpu {cpu * 1000:5.0f} ms{extra}")


def _scan_reads(scanner: Scanner, data: bytes, every_phase: bool) -> tuple[float, int]:
    """Best-of-3 seconds to scan `data` in 64 KB reads, and the hits found."""
    best, hits = float("inf"), 0
    for _ in range(3):
        splitter, line_no, hits = LineSplitter(), 0, 0
        start = time.perf_counter()
        for offset in range(0, len(data), 1 << 16):
            buf = splitter.feed(data[offset : offset + (1 << 16)])
            if buf:
                scanned = scanner.scan_block(buf, line_no + 1, markers=False, every_phase=every_phase)
                line_no, hits = line_no + scanned.lines, hits + len(scanned.hits)
        best = min(best, time.perf_counter() - start)
    return best, hits


def bench_phases(megabytes: int = 40) -> None:
    scanner = Scanner(load_packs(builtin_packs(), ROOT))
    decode = b"[2025-05-01 10:00:00 TP0] Decode batch. #running-req: 1, #token: 1024, gen throughput (token/s): 42.00\n"
    autotune = b"AUTOTUNE addmm(32x2880, 32x4096, 4096x2880)\n" + b"  triton_mm_21 0.0205 ms 100.0% ACC_TYPE=x\n" * 5
    bar = b"\rCapturing batches (bs=%d avail_mem=59.10 GB):  %d%%|#####     | 12/23 [00:05<00:04,  2.4it/s]"
    bars = b"".join(bar % (bs, pct) for bs in range(512, 0, -8) for pct in range(0, 100, 2)) + b"\n"
    size = megabytes << 20
    logs = {
        "no phase lines (the flood benchmark's)": decode * (size // len(decode)),
        "autotune chatter (one phase, repeated)": autotune * (size // len(autotune)),
        "capture bars: 64 buckets x 50 updates": bars * (size // 8 // len(bars)),  # the worst: every line a phase
    }
    print("\n== live scan in 64 KB reads: every phase change (run) vs the last phase line only (before)")
    for name, data in logs.items():
        every, found = _scan_reads(scanner, data, True)
        last, baseline = _scan_reads(scanner, data, False)
        mb = len(data) / (1 << 20)
        print(
            f"  {name:40} {mb:4.0f} MB: every change {mb / every:5.0f} MB/s ({found} hits), "
            f"last only {mb / last:5.0f} MB/s ({baseline} hits)"
        )


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("what", nargs="*", default=["scan", "startup"])
    parser.add_argument("--quick", action="store_true", help="a 20 MB log")
    args = parser.parse_args()
    if "scan" in args.what:
        bench_scan(20 if args.quick else 200)
    if "startup" in args.what:
        bench_startup()
    if "phases" in args.what:
        bench_phases(10 if args.quick else 40)


if __name__ == "__main__":
    main()
