"""Lines as diagbench counts them, and buffers of whole lines read from a stream.

"\\n" ends a line. "\\r" ends one too (tqdm progress bars redraw their line with "\\r"),
unless it stands next to a "\\n": "\\r\\n" is one ending, and a "\\r" that opens a line
(a bar's leading "\\r") ends nothing. So line numbers match an editor's wherever a log has
no bare "\\r", and a progress bar's redraws are lines of their own.

Readers (`run` live, `classify` from a file) hand the scanner buffers that end at a line
end, so a line is never split across two scans; only a line longer than `MAX_LINE` is
handed over in pieces, so memory stays flat on megabyte-long lines.

Pasted logs carry junk that would hide a line from an anchored pattern: ANSI colour codes
(also as syslog's rendered `#033[`) and HTML colour tags around a prefix. `clean` removes
them; it never touches a line end, so line numbers do not move.
"""

from __future__ import annotations

import re
import threading
from array import array
from bisect import bisect_left
from collections.abc import Iterator, Sequence
from queue import SimpleQueue
from typing import Protocol

__all__ = [
    "BLOCK",
    "GLUED_CRS",
    "JUNK_START",
    "MAX_LINE",
    "Buffer",
    "Endings",
    "LineSplitter",
    "RawFile",
    "clean",
    "count_endings",
    "has_junk",
    "line_bounds",
    "lone_crs",
    "read_blocks",
    "split_lines",
    "whole_lines_end",
]

Buffer = bytes | bytearray


class RawFile(Protocol):
    def readinto(self, buffer: memoryview, /) -> int | None: ...


MAX_LINE = 1 << 20
BLOCK = 8 << 20  # classify reads this much at a time: one engine call per block

# A "\r" that ends a line: not after a "\n" (it opens one), nor before one ("\r\n" is one
# ending). The literal comes first, so `re` searches for it at C speed.
_LONE_CR = re.compile(rb"\r(?<=[^\n]\r)(?!\n)")
GLUED_CRS = 64  # "\r"s next to a "\n" before `lone_crs` hands the walk over to `re`
# Bytes that start junk (hyperscan form), and the junk itself
JUNK_START = rb"\x1b\[|#033\[|</?(?:span|font)\b"
_JUNK_START = re.compile(JUNK_START)
_JUNK = re.compile(rb"\x1b\[[0-9;?]*[ -/]*[@-~]|#033\[[0-9;]*[A-Za-z]|</?(?:span|font)\b[^>\n\r]*>")


def count_endings(buf: Buffer, start: int, end: int, crs: Sequence[int] | None = None) -> int:
    """Line endings in buf[start:end] (a buffer of whole lines: see `whole_lines_end`).
    `crs`: the buffer's "\\r"s that end a line, sorted, if an engine found them already."""
    count = buf.count(b"\n", start, end)
    if crs is not None:
        return count + bisect_left(crs, end) - bisect_left(crs, start)
    if buf.find(b"\r", start, end) >= 0:
        count += len(_LONE_CR.findall(buf, start, end))  # a "\r" that ends the buffer counts too
    return count


def lone_crs(buf: Buffer, end: int) -> array[int]:
    """The "\\r"s that end a line in buf[:end] (a buffer of whole lines), sorted (8 bytes each:
    a block of progress bars holds millions).

    Progress bars make them common and "\\r\\n" line ends make the others common, so a
    `bytes.find` walk takes the "\\r"s one by one until it has met `GLUED_CRS` "\\r"s next to
    a "\\n"; then `re` walks the rest at C speed (a "\\r\\n" log's million line ends)."""
    crs = array("q")
    glued = 0
    pos = buf.find(b"\r", 0, end)
    while pos >= 0:
        if pos and buf[pos - 1] != 10 and (pos + 1 == end or buf[pos + 1] != 10):
            crs.append(pos)
        elif (glued := glued + 1) > GLUED_CRS:
            crs.extend(m.start() for m in _LONE_CR.finditer(buf, pos + 1, end))
            break
        pos = buf.find(b"\r", pos + 1, end)
    return crs


class Endings:
    """A buffer's "\\n"s counted and its lone "\\r"s found (`lone_crs`) in the counting thread,
    while the caller scans the same buffer with hyperscan: the scan lets go of the GIL and the
    count holds it, so on two cores the two overlap (they took turns before: about a third
    of `classify`'s time on a big log). `result()` waits for them; call it exactly once."""

    _jobs: SimpleQueue[Endings] | None = None
    _start_lock = threading.Lock()

    def __init__(self, buf: Buffer, end: int):
        self.buf, self.end = buf, end
        self.newlines = 0
        self.crs = array("q")
        self._error: BaseException | None = None
        self._done = threading.Lock()
        self._done.acquire()  # released by the counting thread
        self._queue().put(self)

    @classmethod
    def _queue(cls) -> SimpleQueue[Endings]:
        with cls._start_lock:
            if cls._jobs is None:  # one thread for the process, started at its first big buffer
                cls._jobs = SimpleQueue()
                threading.Thread(target=cls._serve, args=(cls._jobs,), name="diagbench-endings", daemon=True).start()
            return cls._jobs

    @staticmethod
    def _serve(jobs: SimpleQueue[Endings]) -> None:
        while True:
            job = jobs.get()
            try:
                job.newlines, job.crs = job.buf.count(b"\n", 0, job.end), lone_crs(job.buf, job.end)
            except BaseException as exc:  # noqa: BLE001 - handed to the caller, which raises it
                job._error = exc
            finally:
                job.buf = b""  # the caller's buffer is reused for the next read
                job._done.release()

    def result(self) -> tuple[int, array[int]]:
        """The count of "\\n"s and the lone "\\r"s' offsets."""
        self._done.acquire()
        if self._error is not None:
            raise self._error
        return self.newlines, self.crs


def line_bounds(buf: Buffer, pos: int, end: int) -> tuple[int, int]:
    """Start and stop (before its ending) of the line of buf[:end] holding offset `pos`."""
    nl = buf.rfind(b"\n", 0, pos)
    start = max(nl, buf.rfind(b"\r", nl + 1, pos)) + 1
    stop = buf.find(b"\n", pos, end)
    stop = end if stop < 0 else stop
    cr = buf.find(b"\r", pos, stop)
    return start, stop if cr < 0 else cr


def split_lines(buf: bytes) -> list[bytes]:
    """The lines of a buffer of whole lines, without their endings (for showing them)."""
    if buf.startswith(b"\r") and not buf.startswith(b"\r\n"):
        buf = buf[1:]  # it opens the first line
    text = buf.replace(b"\r\n", b"\n").replace(b"\n\r", b"\n").replace(b"\r", b"\n")
    return text.split(b"\n")[:-1] if text.endswith(b"\n") else text.split(b"\n")


def has_junk(buf: Buffer, end: int) -> bool:
    return _JUNK_START.search(buf, 0, end) is not None


def clean(buf: bytes) -> bytes:
    """The buffer without colour codes and colour tags (line ends untouched)."""
    return _JUNK.sub(b"", buf)


def whole_lines_end(buf: Buffer, end: int) -> int:
    """Where the whole lines of buf[:end] end (0: none). "\\r"s at the very end wait for the
    next read, which may start with their "\\n"; so a buffer never ends between "\\r" and
    "\\n", nor starts with a "\\r" that follows one (which would end a line)."""
    tail = end
    while tail > 0 and buf[tail - 1] == 13:
        tail -= 1
    return max(buf.rfind(b"\n", 0, tail), buf.rfind(b"\r", 0, tail)) + 1


class LineSplitter:
    """Turns raw reads into buffers of whole lines, joining lines split across reads."""

    def __init__(self, max_line: int = MAX_LINE):
        self.max_line = max_line
        self.pending = b""

    def feed(self, data: bytes) -> bytes:
        data = self.pending + data if self.pending else data
        cut = whole_lines_end(data, len(data))
        whole, self.pending = data[:cut], data[cut:]
        if len(self.pending) >= self.max_line:  # a piece of a huge line: no ending of its own
            whole, self.pending = data, b""
        return whole

    def flush(self) -> bytes:
        """The last line, if the stream ended without a line ending."""
        rest, self.pending = self.pending, b""
        return rest + b"\n" if rest else b""


def read_blocks(handle: RawFile, size: int = BLOCK) -> Iterator[tuple[Buffer, int]]:
    """(buffer, end): buf[:end] holds whole lines from a file, `size` bytes at a time.

    One buffer is reused (fresh 8 MB allocations cost more than scanning them); the caller
    is done with it when it asks for the next."""
    buf = bytearray(size)
    view = memoryview(buf)
    carry = 0  # an unfinished line moved to the front
    while read := handle.readinto(view[carry:]):
        filled = carry + read
        end = whole_lines_end(buf, filled)
        if end == 0 and filled < size:
            carry = filled
            continue
        end = end or filled  # no line end in a full buffer: a piece of a huge line
        yield buf, end
        carry = filled - end
        buf[:carry] = buf[end:filled]
    if carry:
        tail = bytes(buf[:carry]) + b"\n"
        yield tail, len(tail)
