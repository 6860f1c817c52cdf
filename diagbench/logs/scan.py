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

import contextlib
import copy
import hashlib
import os
import re
import sys
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from diagbench.logs.signatures import Kind, Signature, expand

if sys.version_info >= (3, 11):
    from re import _constants as _sre
    from re import _parser as _sre_parser
else:  # Python 3.10
    import sre_constants as _sre
    import sre_parse as _sre_parser

try:  # the fast engine is an optional extra: diagbench[fast]
    import hyperscan
except ImportError:  # pragma: no cover - exercised where hyperscan is absent
    hyperscan = None  # type: ignore[assignment]  # the re engine is used instead

_KIND_RANK = {Kind.PHASE: 0, Kind.READY: 1, Kind.FAILURE: 2}
_NAMED_GROUP = re.compile(r"\(\?P<\w+>")
Candidates = Callable[[bytes], "list[tuple[int, int]]"]  # buffer -> [(offset in a line, signature index)]


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


class _ReEngine:
    """One combined alternation; after each hit, every pattern is tried on that line."""

    def __init__(self, indexed: Sequence[tuple[int, bytes]]):
        self.indexed = [(i, re.compile(p, re.MULTILINE)) for i, p in indexed]
        joined = b"|".join(b"(?:" + p + b")" for _, p in indexed)
        self.combined = re.compile(joined, re.MULTILINE) if indexed else None

    def __call__(self, buf: bytes) -> list[tuple[int, int]]:
        found: list[tuple[int, int]] = []
        if self.combined is None:
            return found
        pos = 0
        while (hit := self.combined.search(buf, pos)) is not None:
            start = buf.rfind(b"\n", 0, hit.start()) + 1
            end = buf.find(b"\n", hit.start())
            end = len(buf) if end < 0 else end
            line = buf[start:end]
            found.extend((start, i) for i, rx in self.indexed if rx.search(line))
            pos = end + 1
        return found


class _LiteralEngine:
    """For the `re` path: lines holding a literal that every match must contain, found with
    bytes.find (C speed). The caller confirms each line with the full pattern."""

    def __init__(self, indexed: Sequence[tuple[int, list[bytes]]]):
        self.by_literal: dict[bytes, list[int]] = {}
        for index, literals in indexed:
            for literal in literals:
                self.by_literal.setdefault(literal, []).append(index)

    def __call__(self, buf: bytes) -> list[tuple[int, int]]:
        found: list[tuple[int, int]] = []
        for literal, indexes in self.by_literal.items():
            pos = buf.find(literal)
            while pos >= 0:
                found.extend((pos, i) for i in indexes)
                end = buf.find(b"\n", pos)
                pos = buf.find(literal, end + 1) if end >= 0 else -1
        return found


def required_literals(pattern: str) -> list[bytes] | None:
    """Byte strings at least one of which every match contains, or None if none is found."""
    try:
        parsed = _sre_parser.parse(pattern)
    except re.error:
        return None
    if parsed.state.flags & re.IGNORECASE:
        return None
    return _alternatives(list(parsed))  # type: ignore[call-overload]  # SubPattern is a sequence at run time


def _alternatives(items: list[tuple[object, object]]) -> list[bytes] | None:
    best: list[bytes] | None = None

    def consider(candidate: list[bytes] | None) -> None:
        nonlocal best
        if candidate and (best is None or min(map(len, candidate)) > min(map(len, best))):
            best = candidate

    run = bytearray()
    for op, av in items:
        if op is _sre.LITERAL and isinstance(av, int) and av < 128:
            run.append(av)
            continue
        consider([bytes(run)] if run else None)
        run = bytearray()
        if op is _sre.BRANCH:
            branches = [_alternatives(list(b)) for b in av[1]]  # type: ignore[index]
            consider(None if any(b is None for b in branches) else [x for b in branches if b for x in b])
        elif op is _sre.SUBPATTERN:
            consider(_alternatives(list(av[-1])))  # type: ignore[index]
    consider([bytes(run)] if run else None)
    return best if best is not None and min(map(len, best)) >= 3 else None


class _HyperscanEngine:
    """All patterns in one hyperscan block-mode database (cached on disk once compiled:
    compiling the built-in packs takes ~0.15 s, loading them back ~0.1 ms).

    The database is read-only and shared; a scratch is a scan's working memory and
    serves one scan at a time (hyperscan releases the GIL while it scans), so every
    `fork` gets its own scratch, cloned from a prototype that never scans."""

    _clone_lock = threading.Lock()

    def __init__(self, indexed: Sequence[tuple[int, bytes]]):
        key = hashlib.sha256(repr((getattr(hyperscan, "__version__", "?"), list(indexed))).encode()).hexdigest()[:32]
        cached = _cache_dir() / f"hyperscan-{key}.db"
        try:
            self.db = hyperscan.loadb(cached.read_bytes(), hyperscan.HS_MODE_BLOCK)
        except (OSError, hyperscan.error):
            self.db = hyperscan.Database(mode=hyperscan.HS_MODE_BLOCK)
            self.db.compile(
                expressions=[p for _, p in indexed],
                ids=[i for i, _ in indexed],
                elements=len(indexed),
                flags=[hyperscan.HS_FLAG_MULTILINE] * len(indexed),
            )
            _store(cached, hyperscan.dumpb(self.db))
        self._prototype = hyperscan.Scratch(self.db)
        self.scratch = self._clone_scratch()

    def _clone_scratch(self) -> hyperscan.Scratch:
        with self._clone_lock:
            return self._prototype.clone()

    def fork(self) -> _HyperscanEngine:
        """The same database with a scratch of its own, for one more concurrent scanner."""
        twin = copy.copy(self)
        twin.scratch = self._clone_scratch()
        return twin

    def __call__(self, buf: bytes) -> list[tuple[int, int]]:
        found: list[tuple[int, int]] = []
        add = found.append

        def on_match(sig: int, _start: int, end: int, _flags: int, _ctx: object) -> None:
            add((end - 1, sig))  # an offset inside the matched line

        self.db.scan(buf, match_event_handler=on_match, scratch=self.scratch)
        return found


def _cache_dir() -> Path:
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "diagbench"


def _store(path: Path, data: bytes, keep: int = 16) -> None:
    """Best effort: a read-only home only costs the compile next time. Keeps the newest few."""
    with contextlib.suppress(OSError):
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_bytes(data)
        os.replace(tmp, path)
        cached = sorted(path.parent.glob("hyperscan-*.db"), key=lambda p: p.stat().st_mtime, reverse=True)
        for old in cached[keep:]:
            old.unlink()


def _hyperscan_split(indexed: list[tuple[int, bytes]]) -> tuple[_HyperscanEngine | None, list[tuple[int, bytes]]]:
    """An engine for the patterns hyperscan compiles, and those left to `re` (lookarounds)."""
    with contextlib.suppress(hyperscan.error):
        return _HyperscanEngine(indexed), []
    fast, slow = [], []
    for item in indexed:
        try:  # a probe: compiled but neither kept nor cached
            hyperscan.Database(mode=hyperscan.HS_MODE_BLOCK).compile(
                expressions=[item[1]], ids=[0], elements=1, flags=[hyperscan.HS_FLAG_MULTILINE]
            )
            fast.append(item)
        except hyperscan.error:
            slow.append(item)
    return (_HyperscanEngine(fast) if fast else None), slow


PHASE_BLOCK = 1 << 16  # phase lines are looked for backwards, a block at a time


def _build_engines(signatures: list[tuple[int, Signature]], engine: str) -> tuple[list[Candidates], str]:
    engines: list[Candidates] = []
    name = "re"
    indexed = [(i, _plain(s.pattern)) for i, s in signatures]
    if engine != "re" and hyperscan is not None and indexed:
        fast, indexed = _hyperscan_split(indexed)
        if fast is not None:
            engines.append(fast)
            name = "hyperscan" if not indexed else "hyperscan+re"
    literals = {i: required_literals(expand(s.pattern)) for i, s in signatures}
    with_literal = [(i, lits) for i, _ in indexed if (lits := literals[i])]
    if with_literal:
        engines.append(_LiteralEngine(with_literal))
    if rest := [(i, p) for i, p in indexed if not literals[i]]:
        engines.append(_ReEngine(rest))
    return engines, name


class Scanner:
    """Finds signature hits in buffers of complete lines.

    Ready and failure lines are rare and every one is found. Phase lines are frequent
    (progress bars, autotune chatter) and only the last one before each ready or failure
    line, and the last one in the buffer, can matter; so they have their own engine, run
    backwards over the buffer a block at a time until it finds one: on a busy log that is
    one 64 KB block per buffer instead of a callback per progress line.
    """

    def __init__(self, signatures: Sequence[Signature], engine: str = "auto"):
        self.signatures = list(signatures)
        # on one line, phases first: a progress bar joined to a traceback still sets the phase
        self._rank = [_KIND_RANK[s.kind] for s in self.signatures]
        required = {r for s in self.signatures for r in s.requires}
        # those another signature `requires` (vLLM's route list) are looked for like failures
        collapsible = [s.kind is Kind.PHASE and s.id not in required for s in self.signatures]
        indexed = list(enumerate(self.signatures))
        self._decisive, self.engine_name = _build_engines([x for x in indexed if not collapsible[x[0]]], engine)
        self._phases, phase_engine = _build_engines([x for x in indexed if collapsible[x[0]]], engine)
        if self.engine_name == "re" and not self._decisive:
            self.engine_name = phase_engine

    def fork(self) -> Scanner:
        """A scanner for one more thread: the compiled patterns are shared, the scan state
        (hyperscan's scratch) is its own. One scanner must never scan in two threads at once."""
        twin = copy.copy(self)
        twin._decisive = [_fork(e) for e in self._decisive]
        twin._phases = [_fork(e) for e in self._phases]
        return twin

    def scan(self, buf: bytes, first_line_no: int) -> list[Hit]:
        """Hits in `buf` (whole lines, b"\\n"-terminated), in line order."""
        candidates: list[tuple[int, int]] = []
        for engine in self._decisive:
            candidates += engine(buf)
        kept: dict[tuple[int, int, int], _Found] = {}  # (line start, kind rank, signature) -> match
        floor = 0
        for pos, index in sorted(candidates):
            found = self._confirm(buf, buf.rfind(b"\n", 0, pos) + 1, index)
            if found is None:
                continue  # a literal or a cross-line candidate that the line itself does not match
            if found.start >= floor:  # the last phase line up to and including this line
                kept.update(self._last_phase(buf, floor, found.end))
                floor = found.end + 1
            kept[(found.start, self._rank[index], index)] = found
        kept.update(self._last_phase(buf, floor, len(buf)))
        return self._number(buf, first_line_no, [kept[key] for key in sorted(kept)])

    def _confirm(self, buf: bytes, start: int, index: int) -> _Found | None:
        """The signature's match on the whole line at `start`, if it really matches."""
        end = _line_end(buf, start)
        line = buf[start:end]
        match = self.signatures[index].compiled.search(line)
        return _Found(start, end, line, index, match) if match is not None else None

    def _last_phase(self, buf: bytes, floor: int, top: int) -> dict[tuple[int, int, int], _Found]:
        """The last line in buf[floor:top] (whole lines) that a phase signature matches."""
        while self._phases and top > floor:
            low = max(floor, buf.rfind(b"\n", floor, max(floor, top - PHASE_BLOCK)) + 1)
            found: list[tuple[int, int]] = []
            for engine in self._phases:
                found += engine(buf[low:top])
            for pos, index in sorted(found, reverse=True):
                hit = self._confirm(buf, buf.rfind(b"\n", 0, low + pos) + 1, index)
                if hit is not None:
                    return {(hit.start, self._rank[index], index): hit}
            top = low
        return {}

    def _number(self, buf: bytes, first_line_no: int, found: list[_Found]) -> list[Hit]:
        """Line numbers for the confirmed matches, counted once, front to back."""
        hits: list[Hit] = []
        line_no, counted_to = first_line_no, 0
        for item in found:
            line_no += buf.count(b"\n", counted_to, item.start)
            counted_to = item.start
            hits.append(Hit(self.signatures[item.index], line_no, item.line, item.match))
        return hits


def _fork(engine: Candidates) -> Candidates:
    """Engines with scan state get their own; the `re` engines hold none and are shared."""
    return engine.fork() if isinstance(engine, _HyperscanEngine) else engine


@dataclass(frozen=True)
class _Found:
    start: int
    end: int
    line: bytes
    index: int
    match: re.Match[bytes]


def _line_end(buf: bytes, start: int) -> int:
    end = buf.find(b"\n", start)
    return len(buf) if end < 0 else end


class LineSplitter:
    """Turns raw reads into buffers of whole lines, joining lines split across reads.

    "\\r" ends a line as "\\n" does (tqdm progress bars); "\\r\\n" is one ending, and a "\\r"
    that opens a line (a bar's leading "\\r") ends nothing, so line numbers match an editor's
    wherever the log has no mid-line "\\r". A line longer than `max_line` is cut there, so
    memory stays flat on megabyte-long lines.
    """

    def __init__(self, max_line: int = 1 << 20):
        self.max_line = max_line
        self.pending = b""
        self.after_cr = False
        self.at_line_start = True

    def feed(self, data: bytes) -> bytes:
        if self.after_cr and data.startswith(b"\n"):
            data = data[1:]
        if self.at_line_start and not self.pending and data.startswith(b"\r") and not data.startswith(b"\r\n"):
            data = data[1:]
        if data:
            self.after_cr = data.endswith(b"\r")
            self.at_line_start = data.endswith((b"\r", b"\n"))
        if b"\r" in data:
            data = data.replace(b"\r\n", b"\n").replace(b"\n\r", b"\n").replace(b"\r", b"\n")
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
