"""The sharper line a debug launch brings, read from the two launches' logs.

Three kinds, tried in this order: a line a debug set says it brings (`finds`: NCCL's WARN
line, compute-sanitizer's report, the Triton kernel being autotuned), absent from the first
launch's log; the debug launch's deciding line (or the cause the log reader followed) naming
a place in the code (`kernel.cu:42`, `File "x.py", line 7`) the first one did not; the
innermost frame of the failure's traceback, when it moved (CUDA_LAUNCH_BLOCKING raises the
error at the launch that failed, not at a later call). Logs are read a line at a time, each
cut at `LINE_CHARS`, never more than `window` lines kept.
"""

from __future__ import annotations

import re
from collections import deque
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from diagbench.debug.sets import DebugSet
from diagbench.jsonvalue import JSON
from diagbench.logs.guard import Guarded
from diagbench.logs.lines import clean, read_blocks, split_lines
from diagbench.records.record import AttemptRecord
from diagbench.safefiles import open_regular

__all__ = ["Sharper", "deciding_line_no", "find_sharper", "innermost_frame", "location"]

LINE_CHARS = 2000  # of a line, what is matched and kept
FRAMES_BACK = 400  # lines above the failure searched for its traceback's frames
AFTER = 50  # lines after the failure still searched for a set's lines (a report printed at exit)
# a place in code: a Python frame, or a source file and line (not a log prefix's `[core.py:1510]`,
# nor glog's `convert_frame.py:2415]`)
_FRAME = re.compile(r'File "([^"]+)", line (\d+)(?:, in |\s+in\s+)(\S+)')
_SOURCE = re.compile(
    r"(?<![\w./\[-])([\w./-]+\.(?:cu|cuh|cpp|cc|cxx|c|h|hpp|py|ptx|ttir|ttgir|mlir|cc\.inc)):(\d+)(?![\d\]])"
)
_TRACEBACK_START = "Traceback (most recent call last)"
_FAULTHANDLER_START = re.compile(r"^(Current thread|Thread) 0x[0-9a-f]+ .*most recent call first")


@dataclass(frozen=True)
class Sharper:
    """A line of the debug launch's log that says more than the first launch's did."""

    line_no: int
    text: str
    kind: str  # found (a set's own line), line (the deciding line names a place), frame (the innermost frame moved)
    set: str | None  # the set whose line it is (kind found)
    why: str

    def to_json(self) -> dict[str, JSON]:
        return {"line_no": self.line_no, "text": self.text, "kind": self.kind, "set": self.set, "why": self.why}


def deciding_line_no(record: AttemptRecord) -> int | None:
    """The line that decided the launch, or the cause's line where the log reader followed one."""
    if record.cause is not None and record.cause.line_no > 0:
        return record.cause.line_no
    return record.evidence.line_no if record.evidence else None


def location(text: str) -> str | None:
    """The place in code a line names (`kernel.cu:42`, `x.py:7`), or None."""
    if found := _FRAME.search(text):
        return f"{found[1]}:{found[2]}"
    if found := _SOURCE.search(text):
        return f"{found[1]}:{found[2]}"
    return None


def find_sharper(
    before: tuple[AttemptRecord, Path], after: tuple[AttemptRecord, Path], sets: Sequence[DebugSet]
) -> Sharper | None:
    """The sharpest line the debug launch (`after`) brings over the first launch (`before`)."""
    record, log = after
    line_no = deciding_line_no(record)
    if line_no is None:
        return None
    found = [f for f in (_found(log, line_no, s) for s in sets if s.finds) if f is not None]
    if found:
        old = _present(before[1], [f.text for f in found])
        new = [f for f in found if f.text not in old]
        if new:
            return new[0]
    return _moved_line(before[0], record, log, line_no) or _moved_frame(before, log, line_no)


def _found(log: Path, line_no: int, debug_set: DebugSet) -> Sharper | None:
    """The set's line nearest the failure (`last` before it) or its first (`first`); else its first after."""
    # a user's pattern over a server's line: budgeted (logs/guard.py), `(a+)+$` never freezes the run
    patterns = [Guarded(p.encode(), f"{debug_set.origin}: finds {p!r}") for p in debug_set.finds]
    chosen: tuple[int, str] | None = None
    for number, text in numbered_lines(log, line_no + AFTER):
        if not any(p.search(text.encode()) for p in patterns):
            continue
        if number > line_no:
            chosen = chosen or (number, text)
            break
        if chosen is None or debug_set.pick == "last":
            chosen = (number, text)
    if chosen is None:
        return None
    why = debug_set.why or f"a line {debug_set.id} brings"
    return Sharper(chosen[0], chosen[1].strip(), "found", debug_set.id, why)


def _moved_line(before: AttemptRecord, after: AttemptRecord, log: Path, line_no: int) -> Sharper | None:
    """The debug launch's deciding line or cause names a place the first launch's did not."""
    for number, text in numbered_lines(log, line_no):
        if number < line_no:
            continue
        where = location(text) or location(after.cause.message if after.cause else "")
        if where is None or where in {location(t) for t in _said(before)}:
            return None
        return Sharper(number, text.strip(), "line", None, f"the failure now names a place in the code: {where}")
    return None


def _said(record: AttemptRecord) -> list[str]:
    return [record.evidence.text if record.evidence else "", record.cause.message if record.cause else ""]


def _moved_frame(before: tuple[AttemptRecord, Path], log: Path, line_no: int) -> Sharper | None:
    """The innermost frame of the failure's traceback, when it is not the first launch's."""
    frame = innermost_frame(log, line_no)
    if frame is None:
        return None
    old_line = deciding_line_no(before[0])
    old = innermost_frame(before[1], old_line) if old_line is not None else None
    if old is not None and _FRAME.sub(_frame_key, old[1]) == _FRAME.sub(_frame_key, frame[1]):
        return None
    shown = location(frame[1]) or frame[1].strip()
    was = f" (was {location(old[1]) or old[1].strip()})" if old is not None else ""
    return Sharper(frame[0], frame[1].strip(), "frame", None, f"the failure is raised at another place: {shown}{was}")


def _frame_key(found: re.Match[str]) -> str:
    return f"{found[1]}:{found[2]}"


def innermost_frame(log: Path, line_no: int) -> tuple[int, str] | None:
    """The frame the failure was raised in: a Python traceback's last frame above `line_no`, or
    the first frame of a faulthandler dump (most recent call first) near it."""
    kept: deque[tuple[int, str]] = deque(maxlen=FRAMES_BACK)
    for number, text in numbered_lines(log, line_no + AFTER):
        kept.append((number, text))
    above = [(n, t) for n, t in kept if n <= line_no]
    for n, text in reversed(above):
        if _TRACEBACK_START in text:
            break
        if _FRAME.search(text):
            return n, text
    starts = [(i, t) for i, (_, t) in enumerate(kept) if _FAULTHANDLER_START.search(t)]
    current = [i for i, t in starts if t.startswith("Current thread")]  # the thread that crashed
    dumps = current or [i for i, _ in starts]
    dump = dumps[0] if dumps else None
    if dump is not None:
        return next(((n, t) for n, t in list(kept)[dump + 1 :] if _FRAME.search(t)), None)
    return None


def _present(log: Path, texts: Sequence[str]) -> set[str]:
    """Which of `texts` (stripped lines) appear in the log."""
    wanted, seen = set(texts), set()
    for _, text in numbered_lines(log, None):
        stripped = text.strip()
        if stripped in wanted:
            seen.add(stripped)
            if seen == wanted:
                break
    return seen


def numbered_lines(log: Path, stop: int | None) -> Iterator[tuple[int, str]]:
    """The log's lines (numbered as the scanner numbers them, colour codes removed, each cut at
    LINE_CHARS), up to line `stop`; nothing for a log that is missing or not a regular file."""
    try:
        handle = open_regular(log)
    except OSError:
        return
    seen = 0
    with handle:
        for buf, end in read_blocks(handle):
            for raw in split_lines(bytes(buf[:end])):
                seen += 1
                yield seen, clean(raw[: LINE_CHARS * 4]).decode("utf-8", errors="replace")[:LINE_CHARS]
                if stop is not None and seen >= stop:
                    return
