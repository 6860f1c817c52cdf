"""server.log with a size cap: past `max_log` bytes it keeps the head and the last part.

A flooding server writes gigabytes a minute. Below the cap every byte goes to the file
as written. Past it, the reader still reads and classifies everything, but the file
keeps only its head and, in memory until the decision, the last part of the stream
(`tail` bytes, 1 to 8 MiB); at the decision that last part is written after a marker
line saying how many bytes were dropped, and the same happens again for what the dying
server prints after it. The deciding line is always in the file: if it fell in a
dropped stretch (a settle window longer than the kept tail), a copy follows the marker.

It is also a sink (`records.sink`): the secret values the run knows (its spec's, its cell's,
diagbench's own environment's) are blanked in the bytes before they reach the file, a value
split across two reads too, so the file holds none of them and whoever reads it later, without
the spec, sees none. The scanner reads the server's own bytes: nothing it decides on changes.
"""

from __future__ import annotations

import os
from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from diagbench.errors import WriteError
from diagbench.records.sink import StreamBlanker
from diagbench.vocab import Evidence

__all__ = ["DEFAULT_MAX_LOG", "TAIL_MAX", "TAIL_MIN", "CappedLog", "LogStats", "tail_size"]

DEFAULT_MAX_LOG = 1 << 30
TAIL_MIN = 1 << 20
TAIL_MAX = 8 << 20


def tail_size(max_log: int) -> int:
    """The last part kept before the decision (and again after it)."""
    return min(max(max_log // 8, TAIL_MIN), TAIL_MAX, max_log // 4)


@dataclass(frozen=True)
class LogStats:
    written: int  # bytes the server wrote
    kept: int  # bytes in server.log, marker lines included
    dropped: int  # bytes the server wrote that server.log does not have

    @property
    def truncated(self) -> bool:
        return self.dropped > 0


class _Ring:
    """The last `size` bytes of a stream, and how many bytes and line endings went past
    before them (so the marker can say which line numbers are missing)."""

    def __init__(self, size: int):
        self.size, self.total, self.dropped, self.dropped_lines = size, 0, 0, 0
        self.chunks: deque[bytes] = deque()

    def add(self, data: bytes) -> None:
        self.chunks.append(data)
        self.total += len(data)
        while self.total > self.size:
            excess = self.total - self.size
            front = self.chunks.popleft()
            if len(front) > excess:
                self.chunks.appendleft(front[excess:])
                front = front[:excess]
            self.total -= len(front)
            self.dropped += len(front)
            self.dropped_lines += front.count(b"\n")

    def take(self) -> tuple[bytes, int, int]:
        """The kept bytes, and the bytes and lines dropped before them; the ring is empty afterwards."""
        taken = (b"".join(self.chunks), self.dropped, self.dropped_lines)
        self.chunks.clear()
        self.total = self.dropped = self.dropped_lines = 0
        return taken


class CappedLog:
    """The attempt's server.log: written as the server writes, within `max_log` bytes."""

    def __init__(self, path: Path, max_log: int = DEFAULT_MAX_LOG, secrets: Iterable[str] = ()):
        self.path, self.max_log = path, max_log
        self.blanker = StreamBlanker(secrets)
        self.fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o644)
        tail = tail_size(max_log)
        self.room = max_log - 2 * tail  # what still goes straight to the file
        self.ring = _Ring(tail)
        self.written = self.kept = self.dropped = 0
        self.head_lines = 0  # line endings written straight through (a lower bound of the lines)
        self.error: WriteError | None = None  # the first failed write; nothing is written after it

    def write(self, data: bytes) -> None:
        self.written += len(data)
        self._keep(self.blanker.feed(data))

    def _keep(self, data: bytes) -> None:
        if self.room > 0:
            head = data[: self.room]
            self.room -= len(head)
            self.head_lines += head.count(b"\n")
            self._out(head)
            data = data[len(head) :]
        if data:
            self.ring.add(data)

    def pin(self, evidence: Evidence | None) -> None:
        """At the decision: the last part before it goes to the file, with its deciding line.
        (What the blanker holds, the start of a secret maybe, stays held: written now, the
        secret's rest, written later, would complete it in the file.)"""
        data, dropped, lines = self.ring.take()
        if dropped:
            self._marker(dropped, lines, "before the decision")
        self._out(data)
        line = None if evidence is None else self.blanker.blank(evidence.text.encode("utf-8", errors="replace"))
        if self.dropped and evidence is not None and line is not None and not self._holds(data, evidence, line):
            self._out(f"\n[diagbench: the deciding line, line {evidence.line_no} of the stream]\n".encode())
            self._out(line + b"\n")

    def close(self) -> LogStats:
        self._keep(self.blanker.flush())
        data, dropped, lines = self.ring.take()
        if dropped:
            self._marker(dropped, lines, "at the end")
        self._out(data)
        os.close(self.fd)
        return LogStats(self.written, self.kept, self.dropped)

    def _marker(self, dropped: int, lines: int, where: str) -> None:
        self.dropped += dropped
        self._out(
            f"\n[diagbench: {dropped} bytes ({lines} line endings) dropped here: server.max_log is "
            f"{self.max_log} bytes; what follows is the last {self.ring.size} bytes {where}]\n".encode()
        )

    def _out(self, data: bytes) -> None:
        if self.error is not None or not data:
            return
        view = memoryview(data)
        try:
            while view:
                view = view[os.write(self.fd, view) :]
        except OSError as exc:
            self.error = WriteError(self.path, exc)
            return
        self.kept += len(data)

    def _holds(self, tail: bytes, evidence: Evidence, line: bytes) -> bool:
        """Whether the file has the deciding line (`line`, blanked): in the head, or in the tail just written."""
        return evidence.line_no <= self.head_lines or line in tail
