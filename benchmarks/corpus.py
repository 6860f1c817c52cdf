"""The corpus in one run: the whole of it, leave-thread-out, and the signatures one log needs.

    python benchmarks/corpus.py

- whole: every labelled log (tests/corpus: the first 92, and batch 2's 100) classified as
  `classify` would;
- leave-thread-out: each log classified again without the signatures whose `source:` cites
  its own thread (a signature fitted to a log earns nothing on it);
- false ready: a failed or stalled launch called ready, the worst mistake (it must be 0);
- server packs off: each log read with no server's pack (the root-cause reader, and the
  packs of frameworks, libraries and runtimes only): a new version's unknown wording;
- the order of a log's states: the logs read as a server that came up and then died, and
  those whose listening line came before the model load (a server that binds first);
- signatures: how many there are, and how many match lines of exactly one corpus log (a
  sign of a signature fitted to that log) or of none; of the one-log ones, those its log
  needs offline (read wrong without it: the root-cause reader does not cover it).
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT / "tests"), str(ROOT / "tests" / "logs")]

from test_corpus import CORPUS, ITEMS, SIGS, Scored, held_out, score  # noqa: E402

from diagbench.logs.classify import classify_file  # noqa: E402
from diagbench.logs.lines import split_lines  # noqa: E402
from diagbench.logs.signatures import Signature  # noqa: E402


def figures(name: str, scored: list[Scored]) -> str:
    parts = []
    for label, part in (("first 92", "first"), ("batch 2", "b2"), ("all", "all")):
        mine = [s for s in scored if part == "all" or (s.item["id"].startswith("b2-")) == (part == "b2")]
        right = sum(s.right for s in mine)
        parts.append(f"{label} {right}/{len(mine)} ({right / len(mine):.1%})")
    false_ready = sum(s.got.outcome == "ready" and s.item["outcome"] != "ready" for s in scored)
    return f"  {name:17} " + ", ".join(parts) + f"; false ready {false_ready}"


def orders(scored: list[Scored]) -> str:
    """The logs read as a server that came up and then died (failed, its ready line kept),
    and those whose listening line came before their model load (not readiness)."""
    died = [s.item["id"] for s in scored if s.got.outcome == "failed" and s.got.ready is not None]
    early = [s.item["id"] for s in scored if s.got.bound_early is not None]
    return (
        f"  ready, then died: {len(died)} ({', '.join(died)}); "
        f"listening before the model load: {len(early)} ({', '.join(early)})"
    )


def usage(signatures: list[Signature]) -> dict[str, int]:
    """For each signature, how many corpus logs hold a line it matches."""
    texts = [split_lines((CORPUS / item["file"]).read_bytes()) for item in ITEMS]
    return {sig.id: sum(any(sig.compiled.search(line) for line in lines) for lines in texts) for sig in signatures}


def main() -> None:
    scored = score()
    held = held_out(scored)
    print(f"== corpus: {len(ITEMS)} real launch logs from public threads")
    print(figures("whole", scored))
    print(figures("leave-thread-out", held))
    print(figures("server packs off", without_server_packs()))
    print(orders(scored))
    used = usage(SIGS)
    failures = [s for s in SIGS if s.kind.value == "failure"]
    one = sorted(s for s, n in used.items() if n == 1)
    print(
        f"== signatures: {len(SIGS)} ({len(failures)} failure lines); matched by exactly one corpus log: {len(one)}; "
        f"by none: {sum(n == 0 for n in used.values())}"
    )
    print("  one-log signatures: " + ", ".join(one))
    needed = [sig for sig in one if not _right_without(sig, used_by(sig))]
    print(
        f"  of them, needed offline (its log is read wrong without it): {len(needed)}: {', '.join(needed)}; "
        "the others matter live: they decide a launch (or name its phase) at their line, before the log ends"
    )


def without_server_packs() -> list[Scored]:
    """Each log read with no server's pack (only the root-cause reader and the packs of
    frameworks, libraries and runtimes): what a server whose pack does not know its new
    wording gets."""
    rest = [s for s in SIGS if s.server is None]
    return [Scored(item, classify_file(CORPUS / item["file"], rest)) for item in ITEMS]


def used_by(sig_id: str) -> dict[str, object]:
    sig = next(s for s in SIGS if s.id == sig_id)
    return next(
        item
        for item in ITEMS
        if any(sig.compiled.search(line) for line in split_lines((CORPUS / item["file"]).read_bytes()))
    )


def _right_without(sig_id: str, item: dict[str, object]) -> bool:
    rest = [s for s in SIGS if s.id != sig_id]
    return Scored(item, classify_file(CORPUS / str(item["file"]), rest, "re")).right


if __name__ == "__main__":
    main()
