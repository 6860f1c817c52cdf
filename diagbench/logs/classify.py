"""Offline classification of a finished log, or of a stream until its decision: the same
scanner and watch as `run`."""

from __future__ import annotations

import io
import os
import select
import time
from collections.abc import Sequence
from dataclasses import dataclass, fields, replace
from pathlib import Path
from typing import BinaryIO

from diagbench.errors import UserError
from diagbench.jsonvalue import JSON
from diagbench.logs.decision import ReadyRule
from diagbench.logs.lines import BLOCK, Buffer, LineSplitter, RawFile, count_endings, read_blocks, split_lines
from diagbench.logs.reading import CAUSE_BELOW, SERVING, Reading, causes_of, refine
from diagbench.logs.scan import MARKER_BYTES, Scanner
from diagbench.logs.signatures import Signature
from diagbench.logs.watch import Watch
from diagbench.safefiles import Unsafe, open_input
from diagbench.vocab import Evidence, Outcome

__all__ = ["CHUNK", "Classification", "classify_file", "classify_stream", "context", "open_log"]

CHUNK = 1 << 20  # a stream's reads


@dataclass(frozen=True, kw_only=True)
class Classification(Reading):
    """The log reader's reading of a finished log or stream (`Reading`), with what the scan
    saw besides: the signature that decided, how much it read, the server it wrote."""

    signature: str | None = None
    lines: int = 0
    bytes: int = 0
    server: str | None = None  # given, or detected from the log's markers
    bound_early: Evidence | None = None  # a listening line a model load came after (not readiness)

    @property
    def line_no(self) -> int | None:
        return self.evidence.line_no if self.evidence else None

    @property
    def line(self) -> str | None:
        return self.evidence.text if self.evidence else None

    @property
    def chain(self) -> str | None:
        """The reading and the root cause under it: `failed:cuda_graph_capture <- oom:
        torch.OutOfMemoryError: CUDA out of memory ... (L212)`."""
        if self.cause is None:
            return None
        label = f"{self.outcome}:{self.failure_class}" if self.failure_class else self.outcome
        return f"{label} <- {self.cause.failure_class}: {self.cause.text()}"

    def to_json(self) -> dict[str, JSON]:
        """Exactly the shape of `diagbench schema classify`."""
        return {
            "cause": self.cause.to_json() if self.cause else None,
            "chain": self.chain,
            "ready_line": self.ready.to_json() if self.ready else None,
            "outcome": self.outcome,
            "failure_class": self.failure_class,
            "secondary_classes": list(self.secondary_classes),
            "signature": self.signature,
            "line_no": self.line_no,
            "line": self.line,
            "phase": self.phase,
            "server": self.server,
            "first_failed_rank": self.first_failed_rank,
        }


def classify_file(
    path: Path, signatures: Sequence[Signature], engine: str = "auto", server: str | None = None
) -> Classification:
    """Classify a finished log file (a regular file: see `open_log`); `server`: the server
    that wrote it, if known (else detected from its lines). After a ready line the rest is
    read for a bind error, which alone overrules it, so the outcome does not depend on where
    the blocks fall."""
    with open_log(path) as handle:
        scanner, watch = _start(signatures, engine, server, whole_log=True)
        line_no = size = 0
        for buf, end in read_blocks(handle, _block_size(handle)):  # whole blocks, one reused buffer
            line_no = _feed(watch, scanner, buf, end, line_no, size < MARKER_BYTES, 0.0)
            size += end
            if watch.decision is not None:
                break
        else:
            watch.end_of_log(0.0)
        found = _finish(watch, line_no, size)
    return _read_again(found, path)


def _read_again(found: Classification, path: Path) -> Classification:
    """The watch's reading, with the root cause the log reports and its last state."""
    first = Reading(
        found.outcome, found.failure_class, found.secondary_classes, found.evidence, found.phase, ready=found.ready
    )
    if found.outcome == "ready" and (found.signature or "").startswith("serving."):
        first = replace(first, phase=SERVING)
    upto = found.line_no + CAUSE_BELOW if found.outcome == "failed" and found.line_no else None  # else: all
    got = refine(first, causes_of(path, upto, found.lines, found.bytes), found.lines)
    if got == first:
        return replace(found, phase=first.phase)
    signature = found.signature if got.outcome == found.outcome else "rootcause" if got.outcome != "unknown" else None
    if got.first_failed_rank is not None and got.failure_class != found.failure_class:
        signature = "rootcause"  # the first rank's error decided, not the line a pack named (fallout)
    return replace(found, **{f.name: getattr(got, f.name) for f in fields(Reading)}, signature=signature)


def classify_stream(
    fd: int,
    signatures: Sequence[Signature],
    engine: str = "auto",
    copy: BinaryIO | None = None,
    server: str | None = None,
) -> Classification:
    """Classify a stream (standard input) as it is written, until the decision or its end.
    As in `run`, a failure line's settle window closes on the clock, so a server that prints
    its error and hangs is decided without waiting for an end. What is read is copied to `copy`."""
    scanner, watch = _start(signatures, engine, server)
    splitter = LineSplitter()
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
        buf = splitter.feed(data)
        line_no = _feed(watch, scanner, buf, len(buf), line_no, size < MARKER_BYTES, time.monotonic())
        size += len(data)
    if watch.decision is None:
        buf = splitter.flush()
        line_no = _feed(watch, scanner, buf, len(buf), line_no, size < MARKER_BYTES, time.monotonic())
        watch.end_of_log(time.monotonic())
    return _finish(watch, line_no, size)


def open_log(path: Path) -> io.BufferedReader:
    """A log opened for reading through the input door: refused unless it is a regular file
    (a FIFO, a device or a socket could block or never end; `diagbench classify -` reads a stream)."""
    try:
        return open_input(path)
    except Unsafe as exc:
        fix = "to classify a stream, pipe it in: ... | diagbench classify -"
        raise UserError(f"{path}: {(exc.strerror or '').split(', not ')[0]}, not a log file ({fix})") from None
    except OSError as exc:
        raise UserError(f"{path}: cannot read the log ({exc.strerror})") from None


def _start(
    signatures: Sequence[Signature], engine: str, server: str | None, whole_log: bool = False
) -> tuple[Scanner, Watch]:
    return Scanner(signatures, engine), Watch(ReadyRule(log=True), deadline=None, server=server, whole_log=whole_log)


def _finish(watch: Watch, line_no: int, size: int) -> Classification:
    d, server, bound = watch.decision, watch.detector.server, watch.bound_early
    if d is None:
        return Classification(
            "unknown", None, (), None, watch.phase, lines=line_no, bytes=size, server=server, bound_early=bound
        )
    return Classification(
        d.outcome.value if d.outcome in (Outcome.READY, Outcome.FAILED) else "unknown",
        d.failure_class,
        d.secondary_classes,
        d.evidence,
        watch.phase,
        ready=watch.came_up,
        signature=d.signature,
        lines=line_no,
        bytes=size,
        server=server,
        bound_early=bound,
    )


def _block_size(handle: io.BufferedReader) -> int:
    """A small log gets a small buffer (a fresh 8 MB one costs more than reading it)."""
    try:
        return max(1 << 16, min(BLOCK, os.fstat(handle.fileno()).st_size + 1))
    except OSError:
        return BLOCK


def _feed(watch: Watch, scanner: Scanner, buf: Buffer, end: int, line_no: int, markers: bool, now: float) -> int:
    """Scan buf[:end] (whole lines) into the watch; returns the new last line number."""
    if not end:
        return line_no
    scanned = scanner.scan_block(buf, line_no + 1, end, markers)
    watch.feed(scanned.hits, line_no + scanned.lines, now)
    return line_no + scanned.lines


def context(source: Path | RawFile, line_no: int, around: int = 3) -> list[tuple[int, str]]:
    """The lines around `line_no` (1-based, counted as the scanner counts them), for people."""
    if isinstance(source, Path):
        with open_log(source) as handle:
            return context(handle, line_no, around)
    out: list[tuple[int, str]] = []
    seen = 0  # lines begun so far
    midline = False  # the last block ended inside a line longer than a block (begun, counted)
    for buf, end in read_blocks(source):
        ends_midline = end > 0 and buf[end - 1] not in b"\r\n"
        begun = count_endings(buf, 0, end) + ends_midline - midline
        if seen + begun >= line_no - around:  # the wanted lines start in this block
            for index, raw in enumerate(split_lines(bytes(buf[:end]))):
                if index == 0 and midline:
                    continue  # the rest of a line counted already (and shown from its start)
                seen += 1
                if line_no - around <= seen <= line_no + around:
                    out.append((seen, raw.decode("utf-8", errors="replace")[:300]))
        else:
            seen += begun
        midline = ends_midline
        if seen >= line_no + around:
            break
    return out
