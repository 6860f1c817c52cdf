"""Offline classification of a finished log: the same scanner and watch as `run`."""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO

from diagbench.errors import UserError
from diagbench.logs.lines import BLOCK, Buffer, count_endings, read_blocks, split_lines
from diagbench.logs.scan import MARKER_BYTES, Scanner
from diagbench.logs.signatures import Signature
from diagbench.logs.watch import ReadyRule, Watch
from diagbench.vocab import Outcome


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
    server: str | None = None  # given, or detected from the log's markers

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
            "server": self.server,
        }


def classify_file(
    path: Path, signatures: Sequence[Signature], engine: str = "auto", server: str | None = None
) -> Classification:
    """Classify a finished log; `server`: the server that wrote it, if known (else detected)."""
    scanner = Scanner(signatures, engine)
    watch = Watch(ReadyRule(log=True), deadline=None, server=server)
    line_no = size = 0
    try:
        handle = path.open("rb", buffering=0)  # whole blocks are read into one reused buffer
    except OSError as exc:
        raise UserError(f"{path}: cannot read the log ({exc.strerror})") from None
    with handle:
        for buf, end in read_blocks(handle, _block_size(handle)):
            line_no = _feed(watch, scanner, buf, end, line_no, size < MARKER_BYTES)
            size += end
            if watch.decision is not None:
                break
        else:
            watch.end_of_log(0.0)
    d = watch.decision
    if d is None:
        return Classification("unknown", None, (), None, None, None, watch.phase, line_no, size, watch.detector.server)
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
        watch.detector.server,
    )


def _block_size(handle: BinaryIO) -> int:
    """A small log gets a small buffer (a fresh 8 MB one costs more than reading it)."""
    try:
        return max(1 << 16, min(BLOCK, os.fstat(handle.fileno()).st_size + 1))
    except OSError:
        return BLOCK


def _feed(watch: Watch, scanner: Scanner, buf: Buffer, end: int, line_no: int, markers: bool) -> int:
    """Scan buf[:end] (whole lines) into the watch; returns the new last line number."""
    scanned = scanner.scan_block(buf, line_no + 1, end, markers)
    watch.feed(scanned.hits, line_no + scanned.lines, 0.0)
    return line_no + scanned.lines


def context(path: Path, line_no: int, around: int = 3) -> list[tuple[int, str]]:
    """The lines around `line_no` (1-based, counted as the scanner counts them), for people."""
    out: list[tuple[int, str]] = []
    seen = 0
    with path.open("rb", buffering=0) as handle:
        for buf, end in read_blocks(handle):
            count = count_endings(buf, 0, end)
            if seen + count + 1 >= line_no - around:  # the wanted lines start in this block
                for raw in split_lines(bytes(buf[:end])):
                    seen += 1
                    if line_no - around <= seen <= line_no + around:
                        out.append((seen, raw.decode("utf-8", errors="replace")[:300]))
            else:
                seen += count
            if seen >= line_no + around:
                break
    return out
