"""The scan engine: find every signature hit in a buffer of complete lines.

One engine serves `run` (small chunks as a server writes them) and `classify` (1 MB
chunks of a file). Buffers hold whole lines ending in b"\\n" (`split_lines` turns "\\r"
progress lines into lines first). A fast multi-pattern pass finds candidate lines,
then Python's `re` confirms each candidate on its own line and extracts named groups;
candidates are rare, so the confirmation costs nothing on a clean log.

Engines: hyperscan (one pass over the buffer for all patterns, ~GB/s) when it is
installed; otherwise one combined `re` alternation over the buffer, which is correct
but an order of magnitude slower. Patterns hyperscan cannot compile use the `re` path.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from diagbench.signatures import Kind, Signature, expand

try:  # the fast engine is an optional extra: diagbench[fast]
    import hyperscan
except ImportError:  # pragma: no cover - exercised where hyperscan is absent
    hyperscan = None  # type: ignore[assignment]  # the re engine is used instead

_KIND_RANK = {Kind.PHASE: 0, Kind.READY: 1, Kind.FAILURE: 2}
_NAMED_GROUP = re.compile(r"\(\?P<\w+>")
Candidates = Callable[[bytes], "set[tuple[int, int]]"]  # buffer -> {(line_start, signature index)}


@dataclass(frozen=True)
class Hit:
    """A signature confirmed on one line."""

    signature: Signature
    line_no: int
    line: bytes
    match: re.Match[bytes]

    @property
    def text(self) -> str:
        return self.line.decode("utf-8", errors="replace")


def _plain(pattern: str) -> bytes:
    """The pattern without named groups, for engines that only need to find lines."""
    return _NAMED_GROUP.sub("(?:", expand(pattern)).encode()


def _line_start(buf: bytes, end: int) -> int:
    return buf.rfind(b"\n", 0, max(end - 1, 0)) + 1 if end else 0


class _ReEngine:
    """One combined alternation; after each hit, every pattern is tried on that line."""

    def __init__(self, indexed: Sequence[tuple[int, bytes]]):
        self.indexed = [(i, re.compile(p, re.MULTILINE)) for i, p in indexed]
        joined = b"|".join(b"(?:" + p + b")" for _, p in indexed)
        self.combined = re.compile(joined, re.MULTILINE) if indexed else None

    def __call__(self, buf: bytes) -> set[tuple[int, int]]:
        found: set[tuple[int, int]] = set()
        if self.combined is None:
            return found
        pos = 0
        while (hit := self.combined.search(buf, pos)) is not None:
            start = _line_start(buf, hit.start() + 1)
            end = buf.find(b"\n", hit.start())
            end = len(buf) if end < 0 else end
            line = buf[start:end]
            found.update((start, i) for i, rx in self.indexed if rx.search(line))
            pos = end + 1
        return found


class _HyperscanEngine:
    """All patterns in one hyperscan block-mode database."""

    def __init__(self, indexed: Sequence[tuple[int, bytes]]):
        self.db = hyperscan.Database(mode=hyperscan.HS_MODE_BLOCK)
        flags = [hyperscan.HS_FLAG_MULTILINE | hyperscan.HS_FLAG_ALLOWEMPTY] * len(indexed)
        self.db.compile(
            expressions=[p for _, p in indexed],
            ids=[i for i, _ in indexed],
            elements=len(indexed),
            flags=flags,
        )

    def __call__(self, buf: bytes) -> set[tuple[int, int]]:
        ends: set[tuple[int, int]] = set()

        def on_match(sig: int, _start: int, end: int, _flags: int, _ctx: object) -> None:
            ends.add((end, sig))

        self.db.scan(buf, match_event_handler=on_match)
        return {(_line_start(buf, end), sig) for end, sig in ends}


def _hyperscan_accepts(pattern: bytes) -> bool:
    try:
        _HyperscanEngine([(0, pattern)])
    except hyperscan.error:
        return False
    return True


class Scanner:
    """Finds signature hits in buffers of complete lines."""

    def __init__(self, signatures: Sequence[Signature], engine: str = "auto"):
        self.signatures = list(signatures)
        # on one line, phases first: a progress bar joined to a traceback still sets the phase
        self._rank = [_KIND_RANK[s.kind] for s in self.signatures]
        indexed = [(i, _plain(s.pattern)) for i, s in enumerate(self.signatures)]
        self.engine_name = "re"
        self.engines: list[Candidates] = []
        if engine != "re" and hyperscan is not None and indexed:
            fast = [(i, p) for i, p in indexed if _hyperscan_accepts(p)]
            slow = [(i, p) for i, p in indexed if not _hyperscan_accepts(p)] if len(fast) < len(indexed) else []
            if fast:
                self.engines.append(_HyperscanEngine(fast))
                self.engine_name = "hyperscan" if not slow else "hyperscan+re"
            indexed = slow
        if indexed:
            self.engines.append(_ReEngine(indexed))

    def scan(self, buf: bytes, first_line_no: int) -> list[Hit]:
        """Hits in `buf` (whole lines, b"\\n"-terminated), in line order."""
        candidates: set[tuple[int, int]] = set()
        for engine in self.engines:
            candidates |= engine(buf)
        hits: list[Hit] = []
        line_no, counted_to = first_line_no, 0
        for start, _rank, index in sorted((s, self._rank[i], i) for s, i in candidates):
            line_no += buf.count(b"\n", counted_to, start)
            counted_to = start
            end = buf.find(b"\n", start)
            line = buf[start : len(buf) if end < 0 else end]
            signature = self.signatures[index]
            found = signature.compiled.search(line)
            if found is not None:
                hits.append(Hit(signature, line_no, line, found))
        return _drop_stale_phases(hits)


def _drop_stale_phases(hits: list[Hit]) -> list[Hit]:
    """Of a run of hits of one phase signature, only the last matters (progress bars)."""
    kept: list[Hit] = []
    for hit in hits:
        if kept and hit.signature.kind is Kind.PHASE and kept[-1].signature is hit.signature:
            kept[-1] = hit
            continue
        kept.append(hit)
    return kept


class LineSplitter:
    """Turns raw reads into buffers of whole lines, joining lines split across reads.

    "\\r" ends a line as "\\n" does (tqdm progress bars); "\\r\\n" is one ending. A line
    longer than `max_line` is cut there, so memory stays flat on megabyte-long lines.
    """

    def __init__(self, max_line: int = 1 << 20):
        self.max_line = max_line
        self.pending = b""
        self.after_cr = False

    def feed(self, data: bytes) -> bytes:
        if self.after_cr and data.startswith(b"\n"):
            data = data[1:]
        if data:
            self.after_cr = data.endswith(b"\r")
        if b"\r" in data:
            data = data.replace(b"\r\n", b"\n").replace(b"\r", b"\n")
        cut = data.rfind(b"\n")
        if cut < 0:
            self.pending += data
            if len(self.pending) < self.max_line:
                return b""
            whole, self.pending = self.pending + b"\n", b""
            return whole
        whole = self.pending + data[: cut + 1] if self.pending else data[: cut + 1]
        self.pending = data[cut + 1 :]
        if len(self.pending) >= self.max_line:
            whole, self.pending = whole + self.pending + b"\n", b""
        return whole

    def flush(self) -> bytes:
        """The last line, if the stream ended without a line ending."""
        rest, self.pending = self.pending, b""
        return rest + b"\n" if rest else b""
