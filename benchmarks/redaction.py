"""Redaction of long log lines: the URL-password pattern before and after it was made linear,
each beside the other in the same run.

    python benchmarks/redaction.py [--n 1000] [--chars 5000]

A record's deciding line and a report's log tails go through `Redactor.cut`, whose
`user:password@` pattern used to start at every letter of a word and rescan the rest of it:
4 ms and more for one 5,000-character line, the time growing with the square of the
longest word (a 100-attempt HTML report spent most of its time there). Each row times
`--n` calls on a `--chars` line: the pattern's own `sub`, then the whole `Redactor.cut` with
the old pattern put back in place of the new one.
"""

from __future__ import annotations

import argparse
import re
import time
from collections.abc import Callable

import diagbench.records.redact as redact
from diagbench.records.redact import Redactor

OLD = re.compile(r"([A-Za-z][A-Za-z0-9+.-]*://[^/\s:@]*:)[^/\s@]+(@)")  # before the fix
NEW = redact._URL_PASSWORD


def lines(chars: int) -> dict[str, str]:
    """Lines of `chars` characters: one long word (a base64 blob, a bar), and ordinary words."""
    words = "INFO 12:00:01 [rank0] loaded shard 3 of 8 from https://u:pw@hub.example/x?a=1 in 0.4 s; "
    return {
        "one long word": "x" * chars,
        "a JWT-ish blob": ("eyJhbGciOiJIUzI1NiJ9." * chars)[:chars],
        "ordinary words": (words * chars)[:chars],
    }


def timed(n: int, call: Callable[[], object]) -> float:
    start = time.perf_counter()
    for _ in range(n):
        call()
    return time.perf_counter() - start


def cut_with(pattern: re.Pattern[str], n: int, line: str) -> tuple[float, str]:
    redact._URL_PASSWORD = pattern
    try:
        out = Redactor().cut(line)
        return timed(n, lambda: Redactor().cut(line)), out
    finally:
        redact._URL_PASSWORD = NEW


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--n", type=int, default=1000, help="redactions per figure (default 1000)")
    parser.add_argument("--chars", type=int, default=5000, help="characters per line (default 5000)")
    args = parser.parse_args()

    def sub(pattern: re.Pattern[str], line: str) -> Callable[[], object]:
        return lambda: pattern.sub(lambda m: f"{m.group(1)}<redacted>{m.group(2)}", line)

    print(f"{args.n} redactions of a {args.chars}-character line (seconds; old = the pattern before the fix)")
    print(f"{'line':<16} {'pattern old':>12} {'new':>9} {'Redactor.cut old':>17} {'new':>9}  same output")
    for name, line in lines(args.chars).items():
        old_sub, new_sub = timed(args.n, sub(OLD, line)), timed(args.n, sub(NEW, line))
        (old_cut, old_out), (new_cut, new_out) = cut_with(OLD, args.n, line), cut_with(NEW, args.n, line)
        same = "yes" if old_out == new_out and sub(OLD, line)() == sub(NEW, line)() else "NO"
        print(f"{name:<16} {old_sub:>12.3f} {new_sub:>9.3f} {old_cut:>17.3f} {new_cut:>9.3f}  {same}")


if __name__ == "__main__":
    main()
