"""The scanner: every signature hit in a buffer of whole lines, with its line number.

One scanner serves `run` (small buffers as a server writes them) and `classify` (8 MB
blocks of a file). The engines (engines.py) find candidate lines in one pass over the
whole buffer; Python's `re` confirms each candidate on its own line and extracts named
groups. Candidates are rare, so a clean log costs one engine pass and one count of its
line ends, which for a big buffer runs in another thread beside the pass (lines.Endings);
the line model (what ends a line, what junk is ignored) is in lines.py.

Phase lines are frequent (progress bars, autotune chatter), so they have their own
engine. A live run asks for every phase change in its buffer (`every_phase`: the record's
timeline keeps them all); for the rest only the last phase line before each ready or
failure line, and the last one in the buffer, can matter, so the engine runs backwards over
the buffer a block at a time until it finds one.
Marker lines (which server wrote the log) are reported once per buffer each, and looked
for only where the caller asks (a log's first MB) and in buffers with a ready or failure
candidate.
"""

from __future__ import annotations

import copy
from collections.abc import Sequence
from dataclasses import dataclass

from diagbench.logs.engines import (
    Engine,
    HyperscanEngine,
    Pattern,
    build_engines,
    candidate_regex,
    fork,
    hyperscan,
    required_literals,
)
from diagbench.logs.guard import LineMatch
from diagbench.logs.lines import (
    JUNK_START,
    Buffer,
    Endings,
    clean,
    count_endings,
    has_junk,
    line_bounds,
    lone_crs,
    split_lines,
)
from diagbench.logs.signatures import Kind, Signature, expand

__all__ = ["COUNT_APART", "Hit", "Scanned", "Scanner", "hyperscan", "required_literals"]

_KIND_RANK = {Kind.MARKER: 0, Kind.PHASE: 1, Kind.READY: 2, Kind.FAILURE: 3}
PHASE_BLOCK = 1 << 16  # phase lines are looked for backwards, a block at a time
# Markers are looked for everywhere in a log's first bytes (a server names itself as it starts),
# later only in buffers with a ready or failure line: frequent markers make a pass twice as slow.
MARKER_BYTES = 4 << 20
COUNT_APART = 1 << 20  # a buffer this big has its line ends counted in another thread, beside the scan


@dataclass(frozen=True)
class Hit:
    """A signature confirmed on one line."""

    signature: Signature
    line_no: int
    line: bytes
    match: LineMatch

    @property
    def text(self) -> str:
        return self.line.decode("utf-8", errors="replace")


@dataclass(frozen=True)
class Scanned:
    """What one buffer held: its hits in line order, and how many line endings."""

    hits: list[Hit]
    lines: int


@dataclass(frozen=True)
class _Found:
    start: int
    end: int
    line: bytes
    index: int
    match: LineMatch


_Kept = dict[tuple[int, int, int], _Found]  # (line start, kind rank, signature index) -> the match


class Scanner:
    """Finds signature hits in buffers of whole lines."""

    def __init__(self, signatures: Sequence[Signature], engine: str = "auto"):
        self.signatures = list(signatures)
        engine = engine if hyperscan is not None else "re"
        # on one line: markers, then phases (a progress bar joined to a traceback still sets the phase)
        self._rank = [_KIND_RANK[s.kind] for s in self.signatures]
        required = {r for s in self.signatures for r in s.requires}
        patterns = [
            Pattern(i, candidate_regex(s.pattern), first_only=s.kind is Kind.MARKER, guarded=not s.vetted, name=s.id)
            for i, s in enumerate(self.signatures)
        ]

        def literals(index: int) -> list[bytes] | None:
            return required_literals(expand(self.signatures[index].pattern.replace("^{prefix}", "")))

        def engines(kinds: tuple[Kind, ...], helpers: Sequence[Pattern] = ()) -> tuple[list[Engine], str, bool]:
            chosen = [p for p in patterns if self._kind(p.id, required) in kinds]
            return build_engines(chosen, literals, engine, helpers)

        # a helper pattern the hyperscan pass also answers: junk to clean
        self._junk = len(self.signatures)
        helpers = [Pattern(self._junk, JUNK_START, first_only=True)]
        self._decisive, self.engine_name, self._helped = engines((Kind.READY, Kind.FAILURE), helpers)
        self._markers, _, _ = engines((Kind.MARKER,))
        self._phases, _, _ = engines((Kind.PHASE,))

    def _kind(self, index: int, required: set[str]) -> Kind:
        """The kind a signature is looked for as: phases another signature `requires`, and
        retries (each one counts, not only the last phase line), like failures."""
        sig = self.signatures[index]
        return Kind.READY if sig.kind is Kind.PHASE and (sig.id in required or sig.retry) else sig.kind

    def fork(self) -> Scanner:
        """A scanner for one more thread: the compiled patterns are shared, the scan state
        (hyperscan's scratch) is its own. One scanner must never scan in two threads at once."""
        twin = copy.copy(self)
        twin._decisive = [fork(e) for e in self._decisive]
        twin._markers = [fork(e) for e in self._markers]
        twin._phases = [fork(e) for e in self._phases]
        return twin

    def scan(self, buf: Buffer, first_line_no: int) -> list[Hit]:
        """Ready, failure and phase hits in `buf` (whole lines), in line order: `scan_block`
        without the markers, which only name the server."""
        return [
            h for h in self.scan_block(buf, first_line_no, markers=False).hits if h.signature.kind is not Kind.MARKER
        ]

    def scan_block(
        self, buf: Buffer, first_line_no: int, end: int | None = None, markers: bool = True, every_phase: bool = False
    ) -> Scanned:
        """Hits in buf[:end] (whole lines; default: all of it) and its count of line endings.

        `markers`: look for the lines that name the server; when False, only in a buffer that
        holds a ready or failure candidate (a traceback's paths name its server).
        `every_phase`: each line that names another phase than the phase line before it, not
        only the last phase line before each decisive line (a live run's timeline)."""
        end = len(buf) if end is None else end
        endings = Endings(buf, end) if self._helped and end >= COUNT_APART else None  # counted beside the scan
        try:
            candidates, junk = self._first_pass(buf, end)
        finally:
            counted = endings.result() if endings is not None else None
        if not junk:
            return self._scan(buf, end, first_line_no, candidates, counted, markers, every_phase)
        cleaned = clean(bytes(buf[:end]))  # colour codes and tags: scan the log as a person reads it
        candidates, _ = self._first_pass(cleaned, len(cleaned))
        if counted is not None:  # cleaning keeps every "\n", not every "\r"'s neighbours
            counted = (counted[0], lone_crs(cleaned, len(cleaned)))
        scanned = self._scan(cleaned, len(cleaned), first_line_no, candidates, counted, markers, every_phase)
        return _as_written(scanned, buf, end, first_line_no)  # and show its lines as written

    def _scan(
        self,
        buf: Buffer,
        end: int,
        first_line_no: int,
        candidates: list[tuple[int, int]],
        counted: tuple[int, Sequence[int]] | None,
        markers: bool,
        every_phase: bool,
    ) -> Scanned:
        newlines, crs = counted if counted is not None else (None, lone_crs(buf, end))
        if markers or candidates:
            candidates += _run(self._markers, buf, end)
        kept = self._confirm_all(buf, end, sorted(candidates), every_phase)
        return self._number(buf, end, crs, newlines, first_line_no, [kept[key] for key in sorted(kept)])

    def _first_pass(self, buf: Buffer, end: int) -> tuple[list[tuple[int, int]], bool]:
        """Ready and failure candidates, and whether the buffer holds junk."""
        if not self._helped:
            return _run(self._decisive, buf, end), has_junk(buf, end)
        first = self._decisive[0]
        assert isinstance(first, HyperscanEngine)
        candidates, (junk,) = first.split_scan(buf, end, self._junk, 1)
        return candidates + _run(self._decisive[1:], buf, end), bool(junk)

    def _confirm_all(self, buf: Buffer, end: int, candidates: list[tuple[int, int]], every_phase: bool) -> _Kept:
        """Confirmed hits by (line start, kind rank, signature), with the last phase before
        each (or every phase change)."""
        kept: _Kept = self._phase_changes(buf, end) if every_phase else {}
        floor = 0
        markers: set[int] = set()
        for pos, index in candidates:
            if index in markers:
                continue  # a marker counts once per buffer, whichever engine found it how often
            found = self._confirm(buf, pos, end, index)
            if found is None:
                continue  # a literal or a cross-line candidate that the line itself does not match
            if self._rank[index] == _KIND_RANK[Kind.MARKER]:
                markers.add(index)
                kept[(found.start, self._rank[index], index)] = found
                continue  # markers do not decide, so no phase is kept for them
            if not every_phase and found.start >= floor:  # the last phase line up to and including this line
                kept.update(self._last_phase(buf, floor, found.end))
                floor = found.end + 1
            kept[(found.start, self._rank[index], index)] = found
        if not every_phase:
            kept.update(self._last_phase(buf, floor, end))
        return kept

    def _confirm(self, buf: Buffer, pos: int, end: int, index: int, low: int = 0) -> _Found | None:
        """The signature's match on the whole line holding `pos`, if it really matches."""
        start, stop = line_bounds(buf, pos, end)
        start = max(start, low)
        line = bytes(buf[start:stop])
        match = self.signatures[index].compiled.search(line)
        return _Found(start, stop, line, index, match) if match is not None else None

    def _phase_changes(self, buf: Buffer, end: int) -> _Kept:
        """The lines in buf[:end] that a phase signature matches and that name another phase
        than the line before them (a progress bar's updates are one change)."""
        kept: _Kept = {}
        named, last, last_stop = None, -1, -1
        for pos, index in sorted(_run(self._phases, buf, end)):
            if index == last and (pos <= last_stop or "{" not in (self.signatures[index].phase or "")):
                continue  # its line again, or autotune chatter (a fixed name): no change to confirm
            hit = self._confirm(buf, pos, end, index)
            if hit is None:
                continue
            name, last, last_stop = self.signatures[index].phase_name(hit.match), index, hit.end
            if name != named:
                kept[(hit.start, self._rank[index], index)] = hit
                named = name
        return kept

    def _last_phase(self, buf: Buffer, floor: int, top: int) -> _Kept:
        """The last line in buf[floor:top] (whole lines) that a phase signature matches."""
        while self._phases and top > floor:
            low = max(floor, buf.rfind(b"\n", floor, max(floor, top - PHASE_BLOCK)) + 1)
            window = bytes(buf[low:top])
            found: list[tuple[int, int]] = []
            for engine in self._phases:
                found += engine(window, len(window))
            for pos, index in sorted(found, reverse=True):
                hit = self._confirm(buf, low + pos, top, index, low)
                if hit is not None:
                    return {(hit.start, self._rank[index], index): hit}
            top = low
        return {}

    def _number(
        self, buf: Buffer, end: int, crs: Sequence[int], newlines: int | None, first: int, found: list[_Found]
    ) -> Scanned:
        """Line numbers for the confirmed matches. With the buffer's count of "\\n"s known
        (`newlines`), a match in its second half is numbered back from its end, so a failure
        near the end of a block costs no second count of the block; else counted front to back."""
        total = None if newlines is None else newlines + len(crs)
        ahead = found if total is None else [f for f in found if f.start <= end // 2]
        hits: list[Hit] = []
        line_no, counted_to = first, 0
        for item in ahead:
            line_no += count_endings(buf, counted_to, item.start, crs)
            counted_to = item.start
            hits.append(Hit(self.signatures[item.index], line_no, item.line, item.match))
        if total is None:
            return Scanned(hits, line_no - first + count_endings(buf, counted_to, end, crs))
        behind: list[Hit] = []
        line_no, counted_from = first + total, end
        for item in reversed(found[len(ahead) :]):
            line_no -= count_endings(buf, item.start, counted_from, crs)
            counted_from = item.start
            behind.append(Hit(self.signatures[item.index], line_no, item.line, item.match))
        return Scanned(hits + behind[::-1], total)


def _run(engines: list[Engine], buf: Buffer, end: int) -> list[tuple[int, int]]:
    found: list[tuple[int, int]] = []
    for engine in engines:
        found += engine(buf, end)
    return found


def _as_written(scanned: Scanned, buf: Buffer, end: int, first_line_no: int) -> Scanned:
    """Hits found in a cleaned buffer, each with its line as the log has it (cleaning keeps
    every line end, so the n-th line is the n-th line of both)."""
    if not scanned.hits:
        return scanned
    lines = split_lines(bytes(buf[:end]))
    hits = [Hit(h.signature, h.line_no, lines[h.line_no - first_line_no], h.match) for h in scanned.hits]
    return Scanned(hits, scanned.lines)
