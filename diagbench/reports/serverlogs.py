"""`diagbench logs RUN [ATTEMPT] [--tail N]`: a finished run's server logs, through the records'
readers (a run folder walked without following a link) and the redaction of the secrets the run
knows (`records.redact`, as every report blanks them), so a log read later shows none."""

from __future__ import annotations

import io
import os
import sys
from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass
from io import BufferedReader
from pathlib import Path

from diagbench.errors import UserError
from diagbench.records.redact import Redactor, run_redactor
from diagbench.records.store import load_run
from diagbench.safefiles import Folder
from diagbench.safetext import terminal

__all__ = ["AttemptLog", "RunLogs", "log_lines", "logs_text", "run_logs"]

CHUNK = 1 << 16  # bytes read at a time: a log of any size is streamed, never held whole
LONG_LINE = 1 << 20  # a line longer than this is shown in parts (memory stays flat)


@dataclass(frozen=True)
class AttemptLog:
    attempt: str
    label: str  # how it ended (`failed:oom`), or why there is no record
    run: Path  # the run's folder: the log is cells/<attempt>/server.log below it, no link followed


@dataclass(frozen=True)
class RunLogs:
    logs: tuple[AttemptLog, ...]
    redactor: Redactor


def run_logs(run: Path, attempt: str | None) -> RunLogs:
    """The attempts of `run` (ATTEMPT: the one named, by its folder name or a unique start of it,
    `001` for the first), in the order they were planned."""
    loaded = load_run(run)
    labels = {r.attempt: r.label for r in loaded.records}
    names = list(dict.fromkeys([*(a.attempt for a in loaded.manifest.attempts), *labels]))
    every = [AttemptLog(n, labels.get(n, "no record"), loaded.path) for n in names]
    if attempt is not None:
        every = _named(every, attempt, run)
    return RunLogs(tuple(every), run_redactor(loaded.manifest.spec_file))


def _named(every: list[AttemptLog], attempt: str, run: Path) -> list[AttemptLog]:
    exact = [a for a in every if a.attempt == attempt]
    found = exact or [a for a in every if a.attempt.startswith(attempt)]
    if len(found) == 1:
        return found
    there = ", ".join(a.attempt for a in every) or "none"
    what = "names more than one" if found else "is not one"
    raise UserError(f"{run}: attempt '{attempt}' {what} of this run's attempts ({there})")


def log_lines(log: AttemptLog, redactor: Redactor, tail: int | None) -> Iterator[str]:
    """The log's lines (the last `tail` of them), each blanked and its control characters shown
    as escapes (a server's ESC sequences never reach the terminal); none where the attempt never
    launched (no server.log, or anything but a regular file in a real folder of the run: a cell
    folder planted as a link, or an attempt named `../x` in an edited manifest, is not read)."""
    handle = _open_log(log)
    if handle is None:
        return
    with handle:
        lines = _lines(handle) if tail is None else _tail_lines(handle, tail)
        for line in deque(lines, maxlen=min(tail, sys.maxsize)) if tail is not None else lines:
            yield terminal(redactor.log(line))


def _tail_lines(handle: BufferedReader, tail: int) -> Iterator[str]:
    """The lines of the file's end that can hold the last `tail` (each shown line is at most
    LONG_LINE + CHUNK bytes): `--tail 5` of a 1 TB file (sparse, planted) reads 5 MiB, not all."""
    size = os.fstat(handle.fileno()).st_size
    start = max(0, size - min(tail + 1, size) * (LONG_LINE + CHUNK))
    if start == 0:
        return _lines(handle)
    handle.seek(start)
    lines = _lines(handle)
    next(lines, None)  # a line cut by the seek
    return lines


def _open_log(log: AttemptLog) -> BufferedReader | None:
    if log.attempt in ("", ".", "..") or "/" in log.attempt or "\0" in log.attempt:
        return None
    try:
        with Folder.open(log.run) as run, run.walk(("cells", log.attempt)) as cell:
            return io.BufferedReader(io.FileIO(cell.open_file("server.log"), "rb"))
    except OSError:
        return None


def _lines(handle: BufferedReader) -> Iterator[str]:
    """Each line, a line longer than LONG_LINE in parts of that size: a log of one line (a
    progress bar that writes only \r) is streamed, never joined whole (that was quadratic:
    200 MB took minutes)."""
    pending: list[bytes] = []
    size = 0
    while chunk := handle.read(CHUNK):
        start = 0
        while (end := chunk.find(b"\n", start)) >= 0:
            pending.append(chunk[start:end])
            yield _decoded(pending)
            pending, size, start = [], 0, end + 1
        if start < len(chunk):
            pending.append(chunk[start:])
            size += len(chunk) - start
        if size >= LONG_LINE:
            yield _decoded(pending)
            pending, size = [], 0
    if pending:
        yield _decoded(pending)


def _decoded(parts: list[bytes]) -> str:
    return b"".join(parts).decode("utf-8", errors="replace") + "\n"


def logs_text(found: RunLogs, tail: int | None) -> Iterator[str]:
    """What `logs` prints, in pieces of about CHUNK characters: each log under a header naming its
    attempt and how it ended where there are several (as `tail` does), else the log alone."""
    piece: list[str] = []
    size = 0
    for n, log in enumerate(found.logs):
        if len(found.logs) > 1:
            piece.append(f"{chr(10) if n else ''}==> {terminal(log.attempt)} ({terminal(log.label)}) <==\n")
        for line in log_lines(log, found.redactor, tail):
            piece.append(line)
            size += len(line)
            if size >= CHUNK:
                yield "".join(piece)
                piece, size = [], 0
    if piece:
        yield "".join(piece)
