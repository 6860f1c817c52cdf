"""The last word on a finished log: the watch's decision, read again with the root cause.

- A failure a pack named stays primary; the root cause under it becomes its secondary class
  (capture failed *because of* an OOM). A generic wrapper (class `other`) takes the root's
  class: "Engine core initialization failed" over an `ImportError` is an import error.
- An undecided log that reports an error (a traceback, a native report), or whose last lines
  log an error record, is failed with the error's class.
- A failure of no finer class during the capture phase is a capture failure.
- A stop from outside (Ctrl-C, a SIGTERM the server reports) ends what is read.
- The last state wins: a log that reached its ready line or its serving phase and then
  died (a native crash, a killed process, a GPU error outside a request) is failed, with
  `phase: serving` and its ready line kept; handled tracebacks, request errors and a clean
  shutdown after it leave it ready.
"""

from __future__ import annotations

import io
import os
import re
from collections import deque
from dataclasses import dataclass, replace
from pathlib import Path

from diagbench.logs.firstrank import LAUNCHER_WORDS, first_failure, is_fallout, tag_launchers
from diagbench.logs.lines import count_endings, read_blocks, split_lines
from diagbench.logs.native import DEATHS, ENDING, INTERRUPTED, PROMPT, STOPPED
from diagbench.logs.rootcause import Cause, Causes, read, root_of
from diagbench.vocab import Evidence

__all__ = [
    "BLOCK",
    "CAUSE_BELOW",
    "CHAIN_BYTES",
    "FATAL_CLASSES",
    "FATAL_KINDS",
    "LAST_LINES",
    "LOOK_BEFORE",
    "SERVING",
    "TAIL",
    "Reading",
    "causes_of",
    "refine",
]

TAIL = 1 << 18  # the root cause is read in the last 256 KB before the decision (or the log's end): thousands of lines
BLOCK = 1 << 20
# a window that begins inside a chain of exceptions ("The above exception was the direct cause ...")
# is read further back, up to this far, so the chain's root is named, not the first link read
CHAIN_BYTES = 1 << 24
LOOK_BEFORE = 512  # bytes before a window looked at for the chain's words (the window cuts a line)
_CHAIN_WORDS = re.compile(
    rb"The above exception was the direct cause of the following exception"
    rb"|During handling of the above exception, another exception occurred"
)
_HEADER = b"Traceback (most recent call last)"
CAUSE_BELOW = 50  # a wrapper printed before its traceback (`logger.exception`): lines after it
SERVING = "serving"
LAST_LINES = 5  # a log whose last lines log an error (`ERROR ...`, `[Error]`) or show the shell's prompt failed
# after a ready line, only these end a server: a process killed or crashed, a native runtime's
# fatal report, a GPU fault (a request's Python exception is handled by the server)
FATAL_KINDS = ("signal", "shell", "kernel", "C++", "Rust panic", "Go panic", "Go fatal error", "glog fatal")
FATAL_CLASSES = ("killed", "segfault", "illegal_memory_access", "nccl")


@dataclass(frozen=True)
class Reading:
    """What classify says about a finished log."""

    outcome: str  # ready | failed | unknown
    failure_class: str | None
    secondary_classes: tuple[str, ...]
    evidence: Evidence | None
    phase: str | None
    cause: Cause | None = None
    ready: Evidence | None = None  # the ready line of a server that came up, then died
    interrupted: int | None = None  # the line where a person pressed Ctrl-C: the log is read up to it
    first_failed_rank: int | None = None  # in a launch of many ranks, the rank that failed first
    first_failed: str | None = None  # that rank's process in its prefix's words (`rank1`, `TP1`)


def causes_of(path: Path, upto: int | None = None, lines: int | None = None, size: int | None = None) -> Causes:
    """Every error in the log at `path`, in its lines up to `upto` (all when None), of their
    last TAIL bytes. `lines` and `size`: what a scan already read of it (its first `size`
    bytes hold `lines` lines), so the part wanted is found by a seek, not a second read."""
    with open(path, "rb") as handle:
        end = os.fstat(handle.fileno()).st_size if size is None else size
        back = TAIL
        while True:
            start = max(0, end - back)
            handle.seek(max(0, start - LOOK_BEFORE))
            data = handle.read(end - start + min(start, LOOK_BEFORE))
            opens_in_chain = _opens_in_chain(data, min(start, LOOK_BEFORE))  # the lines the window cuts, too
            data = data[min(start, LOOK_BEFORE) :]
            if start:
                data = data[data.find(b"\n") + 1 :]  # from a whole line
            if not start or back >= CHAIN_BYTES or not opens_in_chain:
                break
            back *= 4  # the window began inside an exception chain: its root is further up
        first = 1 if not start else (lines or 0) - count_endings(data, 0, len(data)) + 1
        if start and (lines is None or (upto is not None and upto < first)):
            data, first = _window(handle, upto)  # the wanted lines are earlier: count from the start
    texts = [raw.decode("utf-8", errors="replace") for raw in split_lines(data)]
    cut = len(texts) if upto is None else max(0, upto - first + 1)
    causes = read(texts[:cut], first, to_end=upto is None)
    causes[:] = tag_launchers(texts[:cut], first, causes)
    if cut < len(texts) and any(LAUNCHER_WORDS.search(t) for t in texts[cut:]):
        # a launcher's report after the lines read names the rank that failed first (torchrun's
        # summary comes after every rank's fallout): its errors are read too
        later = tag_launchers(texts[cut:], first + cut, read(texts[cut:], first + cut, to_end=True))
        causes += [c for c in later if c.launcher]
    return causes


def _opens_in_chain(data: bytes, at: int) -> bool:
    """Whether the window `data[at:]` begins inside a chain: a chain's words come before the
    window's first traceback header (in the window, or in the lines it cuts, before `at`)."""
    header = data.find(_HEADER, at)
    return _CHAIN_WORDS.search(data, 0, header if header >= 0 else len(data)) is not None


def _window(handle: io.BufferedReader, upto: int | None) -> tuple[bytes, int]:
    """The last TAIL bytes of whole lines up to line `upto` (or the end), and the first one's number."""
    handle.seek(0)
    spans: deque[tuple[int, int, int]] = deque()  # (offset, length, first line) of whole-line blocks
    offset = seen = 0
    for buf, end in read_blocks(handle, BLOCK):
        spans.append((offset, end, seen + 1))
        while len(spans) > 2:
            spans.popleft()
        offset += end
        seen += count_endings(buf, 0, end)
        if upto is not None and seen >= upto:
            break
    if not spans:
        return b"", 1
    handle.seek(spans[0][0])
    return handle.read(offset - spans[0][0]), spans[0][2]


def interrupted(cause: Cause) -> bool:
    """A person's Ctrl-C: the terminal's ^C, or Python's KeyboardInterrupt (anywhere in its
    chain: asyncio raises CancelledError under it)."""
    return cause.type == INTERRUPTED or "KeyboardInterrupt" in (cause.type, *cause.chain)


def refine(reading: Reading, causes: list[Cause], last_line: int = 0) -> Reading:
    """The reading with its root cause, and the last state of the log (`last_line`: its
    number of lines). In a launch of many ranks the rank that failed first decides (firstrank.py)."""
    return _in_capture(_by_first_rank(_refine(reading, causes, last_line), causes))


def _by_first_rank(reading: Reading, causes: list[Cause]) -> Reading:
    """A failed launch of many ranks: the first rank's error gives the class, the class the
    other ranks' fallout was read as becomes secondary, and the rank is named."""
    found = first_failure(causes, getattr(causes, "origins", 0)) if reading.outcome == "failed" else None
    if found is None:
        return reading
    reading = replace(reading, first_failed_rank=found.rank, first_failed=found.who)
    root = found.cause
    if root.failure_class == reading.failure_class:
        return replace(reading, cause=root)
    if root.failure_class == "other" and not _elsewhere(reading.cause, found.who):
        return reading  # the first rank's error, of no finer class than the watch read its line as
    primary = reading.failure_class
    secondary = tuple(c for c in (primary, *reading.secondary_classes) if c not in (None, "other", root.failure_class))
    said = f"{root.type}: {root.message}" if root.message else root.type
    return replace(
        reading,
        failure_class=root.failure_class,
        secondary_classes=secondary,
        cause=root,
        evidence=Evidence(root.line_no, f"{found.who}: {said}"),
    )


def _elsewhere(cause: Cause | None, who: str) -> bool:
    """Whether the error a reading followed is fallout or another rank's than `who`."""
    return cause is None or is_fallout(cause) or cause.who not in (None, who)


def _in_capture(reading: Reading) -> Reading:
    """A failure of no finer class while the server was capturing CUDA graphs is a capture
    failure, as SGLang itself words it: CudaGraphRunner wraps what its capture raises in
    "Capture cuda graph failed: {e}" (sglang model_executor/cuda_graph_runner.py; a JIT
    build that fails there reads "Capture cuda graph failed: Ninja build failed."). A root
    of a finer class (OOM, NCCL, a Triton compile error) keeps its class."""
    if reading.outcome == "failed" and reading.failure_class == "other" and (reading.phase or "").startswith("capture"):
        return replace(reading, failure_class="cuda_graph_capture")
    return reading


def _refine(reading: Reading, causes: list[Cause], last_line: int = 0) -> Reading:
    """The reading, up to a stop from outside (a person's Ctrl-C, a supervisor's or diagbench's
    SIGTERM) where there is one: what it made the server print is its fallout, not the
    launch's end. A failure decided before the stop stands (vLLM SIGTERMs its own workers)."""
    stop = next((c.line_no for c in causes if interrupted(c)), None)
    decided = reading.evidence.line_no if reading.outcome == "failed" and reading.evidence else None
    if stop is None or (decided is not None and decided < stop):
        return _read(reading, causes, last_line)
    causes, last_line = [c for c in causes if c.line_no < stop], stop - 1
    if reading.outcome == "failed":  # decided by the fallout: what held before the stop
        came_up = reading.ready
        reading = Reading("ready" if came_up else "unknown", None, (), came_up, reading.phase)
    got = _read(reading, causes, last_line)
    return replace(got, interrupted=stop) if got.outcome == "unknown" else got


def _read(reading: Reading, causes: list[Cause], last_line: int) -> Reading:
    errors = [c for c in causes if c.type not in ENDING]  # logged error records say little on their own
    if reading.outcome == "failed" and reading.evidence is not None and reading.ready is not None:
        ended = [c for c in causes if c.type in (PROMPT, STOPPED) and c.line_no > last_line - LAST_LINES]
        return _after_framework_ready(reading, errors, causes, ended)
    if reading.outcome == "failed" and reading.evidence is not None:
        return _failed(reading, errors or causes)
    if reading.outcome == "ready" and reading.evidence is not None:
        return _after_ready(reading, errors)
    # undecided: it ends in an error, or its last lines log one
    ending = errors + [c for c in causes if c.type in ENDING and c.line_no > last_line - LAST_LINES]
    root = root_of(ending)
    if root is None:
        return reading
    last = ending[-1]
    return replace(
        reading,
        outcome="failed",
        failure_class=root.failure_class,
        evidence=Evidence(last.line_no, last.text()),
        cause=root,
    )


def _failed(reading: Reading, causes: list[Cause]) -> Reading:
    assert reading.evidence is not None
    at = reading.evidence.line_no
    # what follows the deciding line: its traceback (`logger.exception`), not a death it caused
    # unless the deciding line reports a death itself, whose details follow it (Open MPI's signal report)
    died = any(c.line_no == at and c.type in DEATHS for c in causes)
    near = [c for c in causes if c.line_no <= at or (c.line_no <= at + CAUSE_BELOW and (died or c.type not in DEATHS))]
    root = root_of(near)
    if root is None:
        return reading
    primary, secondary = reading.failure_class, list(reading.secondary_classes)
    if primary == "killed" and _killed_for(root, at):
        # killed after an error: the server (or its launcher) killed its tree because of it
        return replace(reading, failure_class=root.failure_class, secondary_classes=("killed",), cause=root)
    if primary in (None, "other") and root.failure_class != "other":
        primary = root.failure_class
        secondary = [c for c in secondary if c != primary]
    elif root.failure_class not in ("other", primary) and root.failure_class not in secondary:
        secondary.insert(0, root.failure_class)
    return replace(reading, failure_class=primary, secondary_classes=tuple(secondary), cause=root)


def _killed_for(root: Cause, death: int) -> bool:
    """Whether an error explains a kill at line `death`: it is no death itself, of a finer
    class, not one the program went on from, and just before the kill (a server kills its
    tree when a worker fails, in the lines after its error; an import that only warned at
    start-up, hundreds of lines before the OOM killer, did not cause it)."""
    return (
        root.type not in DEATHS
        and root.failure_class not in ("other", "killed")
        and not root.handled
        and death - CAUSE_BELOW <= root.line_no
    )


def _after_ready(reading: Reading, causes: list[Cause]) -> Reading:
    assert reading.evidence is not None
    ready_at = reading.evidence.line_no
    fatal = [c for c in causes if c.line_no > ready_at and _fatal(c)]
    if not fatal:
        return reading
    died = fatal[0]
    return Reading(
        "failed",
        died.failure_class,
        (),
        Evidence(died.line_no, died.text()),
        SERVING,
        cause=died,
        ready=reading.evidence,
    )


def _after_framework_ready(reading: Reading, errors: list[Cause], causes: list[Cause], ended: list[Cause]) -> Reading:
    """A log that failed after it came up: an error after a framework's ready line (weak: a
    server may bind before its model is up), or a line that still counts after the server's
    own (its engine died). Errors its handlers logged (a request's error, a warning) are the
    server's life: it stays ready. Any other error, a death, or the shell's prompt or the
    server's "stopped" among its last lines (`ended`) ended it: failed, its ready line kept."""
    assert reading.ready is not None
    after = [c for c in errors if c.line_no > reading.ready.line_no]
    if after and not ended and not any(_fatal(c) or not c.handled for c in after):
        return Reading("ready", None, (), reading.ready, SERVING)
    return replace(_failed(reading, errors or causes), phase=SERVING)


def _fatal(cause: Cause) -> bool:
    """Whether an error after the ready line ended the server: a process killed or crashed, a
    native runtime's fatal report, a GPU fault, or a traceback logged as a worker's death."""
    return cause.type in FATAL_KINDS or cause.failure_class in FATAL_CLASSES or cause.fatal
