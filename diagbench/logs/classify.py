"""Offline classification of a finished log: the same scanner and watch as `run`."""

from __future__ import annotations

import os
import select
import stat
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO

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
    """Classify a finished log file (a regular file: see `open_log`)."""
    with open_log(path) as handle:
        scanner, watch, splitter = _start(signatures, engine)
        line_no = size = 0
        while watch.decision is None and (data := handle.read(CHUNK)):
            size += len(data)
            line_no = _feed(watch, scanner, splitter.feed(data), line_no, 0.0)
        return _finish(watch, scanner, splitter, line_no, size, 0.0)


def classify_stream(
    fd: int, signatures: Sequence[Signature], engine: str = "auto", copy: BinaryIO | None = None
) -> Classification:
    """Classify a stream (standard input) as it is written, until the decision or its end.
    As in `run`, a failure line's settle window closes on the clock, so a server that prints
    its error and hangs is decided without waiting for an end. What is read is copied to `copy`."""
    scanner, watch, splitter = _start(signatures, engine)
    line_no = size = 0
    while watch.decision is None:
        wake = watch.wakeup()
        readable, _, _ = select.select([fd], [], [], None if wake is None else max(0.0, wake - time.monotonic()))
        if not readable:
            watch.tick(time.monotonic())
            continue
        data = os.read(fd, CHUNK)
        if not data:
            break
        if copy is not None:
            copy.write(data)
        size += len(data)
        line_no = _feed(watch, scanner, splitter.feed(data), line_no, time.monotonic())
    return _finish(watch, scanner, splitter, line_no, size, time.monotonic())


def open_log(path: Path) -> BinaryIO:
    """A log opened for reading, refused unless it is a regular file: a FIFO, a device or a
    socket could block or never end (`diagbench classify -` reads a stream)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)  # a FIFO with no writer must not block the open
    except OSError as exc:
        raise UserError(f"{path}: cannot read the log ({exc.strerror})") from None
    mode = os.fstat(fd).st_mode
    if not stat.S_ISREG(mode):
        os.close(fd)
        raise UserError(
            f"{path}: {_kind(mode)}, not a log file (to classify a stream, pipe it in: ... | diagbench classify -)"
        )
    os.set_blocking(fd, True)
    return os.fdopen(fd, "rb")


def _kind(mode: int) -> str:
    for test, word in (
        (stat.S_ISDIR, "a directory"),
        (stat.S_ISFIFO, "a named pipe (FIFO)"),
        (stat.S_ISCHR, "a character device"),
        (stat.S_ISBLK, "a block device"),
        (stat.S_ISSOCK, "a socket"),
    ):
        if test(mode):
            return word
    return "not a regular file"


def _start(signatures: Sequence[Signature], engine: str) -> tuple[Scanner, Watch, LineSplitter]:
    return Scanner(signatures, engine), Watch(ReadyRule(log=True), deadline=None), LineSplitter()


def _finish(
    watch: Watch, scanner: Scanner, splitter: LineSplitter, line_no: int, size: int, now: float
) -> Classification:
    if watch.decision is None:
        line_no = _feed(watch, scanner, splitter.flush(), line_no, now)
        watch.end_of_log(now)
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


def _feed(watch: Watch, scanner: Scanner, buf: bytes, line_no: int, now: float) -> int:
    """Scan a buffer of whole lines into the watch; returns the new last line number."""
    last = line_no + buf.count(b"\n")
    watch.feed(scanner.scan(buf, line_no + 1), last, now)
    return last


def context(source: Path | BinaryIO, line_no: int, around: int = 3) -> list[tuple[int, str]]:
    """The lines around `line_no` (1-based, "\\r" ends a line too), for people."""
    if isinstance(source, Path):
        with open_log(source) as handle:
            return context(handle, line_no, around)
    out: list[tuple[int, str]] = []
    splitter, seen = LineSplitter(), 0
    while (data := source.read(CHUNK)) and seen < line_no + around:
        for raw in splitter.feed(data).split(b"\n")[:-1]:
            seen += 1
            if line_no - around <= seen <= line_no + around:
                out.append((seen, raw.decode("utf-8", errors="replace")[:300]))
    return out
