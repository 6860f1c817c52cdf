"""An attempt's log as it is written: pipe -> server.log -> scanner -> watch, a chunk at a time."""

from __future__ import annotations

import time

from diagbench.launch.logfile import CappedLog
from diagbench.launch.process import ServerProcess
from diagbench.logs.lines import LineSplitter
from diagbench.logs.scan import MARKER_BYTES, Scanner
from diagbench.logs.watch import Watch
from diagbench.vocab import Outcome

__all__ = ["READS_PER_WAKE", "LogReader"]

READS_PER_WAKE = 32  # up to 2 MB per wake-up, then select again so the clock is checked
LAST_LINE_BYTES = 4096  # a timeout's reason quotes the last line; longer lines are cut anyway
PROVISIONAL_MAX = 1 << 16  # longer unfinished lines wait for their ending (no quadratic rescans)


class LogReader:
    """Pipe -> server.log and -> scanner -> watch, a chunk at a time."""

    def __init__(self, server: ServerProcess, log: CappedLog, scanner: Scanner, watch: Watch):
        self.server, self.log, self.scanner, self.watch = server, log, scanner, watch
        self.splitter = LineSplitter()
        self.line_no = 0
        self.bytes = 0
        self.eof = False
        self._last = b""  # the last block of lines with something on them
        self._held = b""  # the read that decided, not yet in server.log

    def catch_up(self) -> None:
        """server.log gets the read that decided (held back so that the SIGTERM went first);
        before anything else is written to it, and before its tail is pinned."""
        held, self._held = self._held, b""
        if held:
            self.log.write(held)

    def pump(self, reads: int = READS_PER_WAKE, after_decision: bool = False) -> None:
        """Read up to `reads` chunks; stop at the decision (the log's tail is pinned there)
        unless this is the drain after it."""
        self.catch_up()
        for _ in range(reads):
            if self.watch.decision is not None and not after_decision:
                return
            data = self.server.read()
            if data is None:
                self.eof = True
                self._lines(self.splitter.flush())
                return
            if not data:
                self._provisional()
                return
            self.bytes += len(data)
            if self.watch.decision is None:  # scanned first: what the file costs (blanking) never delays a decision
                self._lines(self.splitter.feed(data))
                if self.watch.decision is not None and not after_decision:
                    self._held = data  # nor its SIGTERM: written after it (`catch_up`)
                    return
            self.log.write(data)
            if self.log.error is not None:  # the disk, not the server: stop this attempt (and the run)
                self.watch.stop(Outcome.CANCELLED, f"stopped: {self.log.error}", time.monotonic())
        self._provisional()

    def _provisional(self) -> None:
        """A last line with no line ending yet (`print("ready", end="")`, then silence) is
        scanned as it stands; when its ending arrives it is scanned again, as the same line."""
        pending = self.splitter.pending
        if pending and len(pending) <= PROVISIONAL_MAX and self.watch.decision is None:
            hits = self.scanner.scan(pending + b"\n", self.line_no + 1)
            if hits:
                self.watch.feed(hits, self.line_no, time.monotonic())

    @property
    def last_line(self) -> str:
        """The last line with something on it (a pending one without its ending too)."""
        for chunk in (self.splitter.pending, self._last):
            text = chunk.rstrip()[-LAST_LINE_BYTES:].replace(b"\r", b"\n").rsplit(b"\n", 1)[-1]
            if text.strip():
                return text.decode("utf-8", "replace")
        return ""

    def _lines(self, buf: bytes) -> None:
        if not buf:
            return
        if not buf.isspace():  # stops at the first non-blank byte: no copy of the block per read
            self._last = buf
        scanned = self.scanner.scan_block(buf, self.line_no + 1, markers=self.bytes <= MARKER_BYTES, every_phase=True)
        self.line_no += scanned.lines
        self.watch.feed(scanned.hits, self.line_no, time.monotonic())
