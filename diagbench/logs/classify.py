"""Offline classification of a finished log: the same scanner and watch as `run`."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from diagbench.errors import UserError
from diagbench.logs.scan import LineSplitter, Scanner
from diagbench.logs.signatures import Signature
from diagbench.logs.watch import ReadyRule, Watch
from diagbench.vocab import Outcome

CHUNK = 1 << 20


@dataclass(frozen=True)
class Classification:
    outcome: str  # ready | failed | unknown
    failure_class: str | None
    secondary_classes: tuple[str, ...]
    signature: str | None
    line_no: int | None
    line: str | None
    phase: str | None
    lines: int
    bytes: int

    def to_json(self) -> dict[str, Any]:
        """Exactly the shape of `diagbench schema classify`."""
        return {
            "outcome": self.outcome,
            "failure_class": self.failure_class,
            "secondary_classes": list(self.secondary_classes),
            "signature": self.signature,
            "line_no": self.line_no,
            "line": self.line,
            "phase": self.phase,
        }


def classify_file(path: Path, signatures: Sequence[Signature], engine: str = "auto") -> Classification:
    scanner = Scanner(signatures, engine)
    watch = Watch(ReadyRule(log=True), deadline=None)
    splitter = LineSplitter()
    line_no = size = 0
    try:
        handle = path.open("rb")
    except OSError as exc:
        raise UserError(f"{path}: cannot read the log ({exc.strerror})") from None
    with handle:
        while watch.decision is None and (data := handle.read(CHUNK)):
            size += len(data)
            line_no = _feed(watch, scanner, splitter.feed(data), line_no)
        if watch.decision is None:
            line_no = _feed(watch, scanner, splitter.flush(), line_no)
            watch.end_of_log(0.0)
    d = watch.decision
    if d is None:
        return Classification("unknown", None, (), None, None, None, watch.phase, line_no, size)
    outcome = d.outcome.value if d.outcome in (Outcome.READY, Outcome.FAILED) else "unknown"
    return Classification(
        outcome,
        d.failure_class,
        d.secondary_classes,
        d.signature,
        d.evidence.line_no if d.evidence else None,
        d.evidence.text if d.evidence else None,
        watch.phase,
        line_no,
        size,
    )


def _feed(watch: Watch, scanner: Scanner, buf: bytes, line_no: int) -> int:
    """Scan a buffer of whole lines into the watch; returns the new last line number."""
    last = line_no + buf.count(b"\n")
    watch.feed(scanner.scan(buf, line_no + 1), last, 0.0)
    return last


def context(path: Path, line_no: int, around: int = 3) -> list[tuple[int, str]]:
    """The lines around `line_no` (1-based, "\\r" ends a line too), for people."""
    out: list[tuple[int, str]] = []
    splitter, seen = LineSplitter(), 0
    with path.open("rb") as handle:
        while (data := handle.read(CHUNK)) and seen < line_no + around:
            for raw in splitter.feed(data).split(b"\n")[:-1]:
                seen += 1
                if line_no - around <= seen <= line_no + around:
                    out.append((seen, raw.decode("utf-8", errors="replace")[:300]))
    return out
