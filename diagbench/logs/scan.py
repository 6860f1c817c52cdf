"""The scanner: every signature hit in a buffer of whole lines, with its line number.

One scanner serves `run` (small buffers as a server writes them) and `classify` (8 MB
blocks of a file). The engines (engines.py) find candidate lines in one pass over the
whole buffer; Python's `re` confirms each candidate on its own line and extracts named
groups. Candidates are rare, so a clean log costs one engine pass and one count of its
line ends; the line model (what ends a line, what junk is ignored) is in lines.py.

Phase lines are frequent (progress bars, autotune chatter) and only the last one before
each ready or failure line, and the last one in the buffer, can matter; so they have
their own engine, run backwards over the buffer a block at a time until it finds one.
Marker lines (which server wrote the log) are reported once per buffer each.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from diagbench.logs.engines import Pattern, build_engines, candidate_regex, hyperscan, required_literals
from diagbench.logs.lines import JUNK_START, LONE_CR, Buffer, clean, count_endings, has_junk, line_bounds, lone_crs
from diagbench.logs.signatures import Kind, Signature, expand

__all__ = ["Hit", "Scanned", "Scanner", "hyperscan", "required_literals"]

_KIND_RANK = {Kind.MARKER: 0, Kind.PHASE: 1, Kind.READY: 2, Kind.FAILURE: 3}
PHASE_BLOCK = 1 << 16  # phase lines are looked for backwards, a block at a time


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
    match: re.Match[bytes]


_Kept = dict[tuple[int, int, int], _Found]  # (line start, kind rank, signature index) -> the match


class Scanner:
    """Finds signature hits in buffers of whole lines."""

    def __init__(self, signatures: Sequence[Signature], engine: str = "auto"):
        self.signatures = list(signatures)
        # on one line: markers, then phases (a progress bar joined to a traceback still sets the phase)
        self._rank = [_KIND_RANK[s.kind] for s in self.signatures]
        required = {r for s in self.signatures for r in s.requires}
        # phases another signature `requires` are looked for like failures
        collapsible = [s.kind is Kind.PHASE and s.id not in required for s in self.signatures]
        patterns = [
            Pattern(i, candidate_regex(expand(s.pattern)), first_only=s.kind is Kind.MARKER)
            for i, s in enumerate(self.signatures)
        ]

        def literals(index: int) -> list[bytes] | None:
            return required_literals(expand(self.signatures[index].pattern))

        n = len(self.signatures)
        self._lone_cr, self._junk = n, n + 1  # helper patterns the hyperscan pass also answers
        helpers = [Pattern(self._lone_cr, LONE_CR), Pattern(self._junk, JUNK_START, first_only=True)]
        decisive = [p for p in patterns if not collapsible[p.id]]
        self._decisive, self.engine_name, self._helped = build_engines(decisive, literals, engine, helpers)
        phases = [p for p in patterns if collapsible[p.id]]
        self._phases, phase_engine, _ = build_engines(phases, literals, engine)
        if self.engine_name == "re" and not decisive:
            self.engine_name = phase_engine

    def scan(self, buf: Buffer, first_line_no: int) -> list[Hit]:
        """Hits in `buf` (whole lines), in line order."""
        return self.scan_block(buf, first_line_no).hits

    def scan_block(self, buf: Buffer, first_line_no: int, end: int | None = None) -> Scanned:
        """Hits in buf[:end] (whole lines; default: all of it) and its count of line endings."""
        end = len(buf) if end is None else end
        candidates = self._candidates(buf, end)
        if any(i == self._junk for _, i in candidates) if self._helped else has_junk(buf, end):
            buf = clean(bytes(buf[:end]))  # colour codes and tags: scan the log as a person reads it
            end = len(buf)
            candidates = self._candidates(buf, end)
        crs = lone_crs(buf, end, [p - 1 for p, i in candidates if i == self._lone_cr] if self._helped else None)
        kept = self._confirm_all(buf, end, sorted(c for c in candidates if c[1] < self._lone_cr))
        return self._number(buf, end, crs, first_line_no, [kept[key] for key in sorted(kept)])

    def _candidates(self, buf: Buffer, end: int) -> list[tuple[int, int]]:
        found: list[tuple[int, int]] = []
        for engine in self._decisive:
            found += engine(buf, end)
        return found

    def _confirm_all(self, buf: Buffer, end: int, candidates: list[tuple[int, int]]) -> _Kept:
        """Confirmed hits by (line start, kind rank, signature), with the last phase before each."""
        kept: _Kept = {}
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
            if found.start >= floor:  # the last phase line up to and including this line
                kept.update(self._last_phase(buf, floor, found.end))
                floor = found.end + 1
            kept[(found.start, self._rank[index], index)] = found
        kept.update(self._last_phase(buf, floor, end))
        return kept

    def _confirm(self, buf: Buffer, pos: int, end: int, index: int, low: int = 0) -> _Found | None:
        """The signature's match on the whole line holding `pos`, if it really matches."""
        start, stop = line_bounds(buf, pos, end)
        start = max(start, low)
        line = bytes(buf[start:stop])
        match = self.signatures[index].compiled.search(line)
        return _Found(start, stop, line, index, match) if match is not None else None

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

    def _number(self, buf: Buffer, end: int, crs: list[int], first: int, found: list[_Found]) -> Scanned:
        """Line numbers for the confirmed matches, counted once, front to back."""
        hits: list[Hit] = []
        line_no, counted_to = first, 0
        for item in found:
            line_no += count_endings(buf, crs, counted_to, item.start)
            counted_to = item.start
            hits.append(Hit(self.signatures[item.index], line_no, item.line, item.match))
        return Scanned(hits, line_no - first + count_endings(buf, crs, counted_to, end))
