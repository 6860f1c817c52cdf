"""Candidate engines: find where, in a buffer, each pattern may match; the scanner confirms.

An engine is called with a buffer and the end of its data, and returns (offset, id) pairs:
an offset inside the line that may match pattern `id`. Candidates may be false (a literal
that the line holds, a match across lines); they are never missed.

- hyperscan: every pattern in one database, one pass over the buffer (~GB/s). Patterns
  marked `first_only` report once per buffer (HS_FLAG_SINGLEMATCH): frequent markers cost
  one callback per buffer, not one per line. The compiled database is cached on disk,
  keyed by its patterns: compiling takes ~0.2 s, loading it back well under 1 ms.
- literal: for the pure-Python path, a byte string every match must contain, found with
  `bytes.find` (C speed).
- re: one combined alternation for the rest; correct, an order of magnitude slower.
"""

from __future__ import annotations

import contextlib
import hashlib
import re
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from diagbench.logs.cache import cache_dir, store
from diagbench.logs.lines import Buffer, line_bounds

if sys.version_info >= (3, 11):
    from re import _constants as _sre
    from re import _parser as _sre_parser
else:  # Python 3.10
    import sre_constants as _sre
    import sre_parse as _sre_parser

try:  # installed with diagbench where the platform has wheels (pyproject's markers)
    import hyperscan
except ImportError:  # pragma: no cover - exercised where hyperscan is absent
    hyperscan = None  # type: ignore[assignment]  # the re engines are used instead

__all__ = ["Engine", "Pattern", "build_engines", "candidate_regex", "hyperscan", "required_literals"]
Engine = Callable[[Buffer, int], "list[tuple[int, int]]"]
FIRST_ONLY_REPEATS = 8  # the pure-Python engines report a first-only pattern this often per buffer


@dataclass(frozen=True)
class Pattern:
    """One pattern for the engines: its id, its regex (bytes), and whether one hit per buffer is enough."""

    id: int
    regex: bytes
    first_only: bool = False


def candidate_regex(expanded: str) -> bytes:
    """A pattern for finding lines: no named groups, and "\\r" (which ends a line too) allowed
    wherever the pattern is anchored to the start or the end of a line."""
    return _line_anchors(re.sub(r"\(\?P<\w+>", "(?:", expanded)).encode()


def _line_anchors(pattern: str) -> str:
    """`^` and `$` outside character classes also match at a "\\r" (engines see raw lines)."""
    out: list[str] = []
    i, in_class = 0, False
    while i < len(pattern):
        char = pattern[i]
        if char == "\\":
            out.append(pattern[i : i + 2])
            i += 2
            continue
        if in_class:
            in_class = char != "]" or pattern[i - 1] == "[" or pattern[i - 2 : i] == "[^"
        elif char == "[":
            in_class = True
        elif char in "^$":
            char = "(?:^|\r)" if char == "^" else "(?:$|\r)"
        out.append(char)
        i += 1
    return "".join(out)


class ReEngine:
    """One combined alternation; after each hit, every pattern is tried on that line."""

    def __init__(self, patterns: Sequence[Pattern]):
        self.each = [(p.id, re.compile(p.regex, re.MULTILINE), p.first_only) for p in patterns]
        joined = b"|".join(b"(?:" + p.regex + b")" for p in patterns)
        self.combined = re.compile(joined, re.MULTILINE) if patterns else None

    def __call__(self, buf: Buffer, end: int) -> list[tuple[int, int]]:
        found: list[tuple[int, int]] = []
        if self.combined is None:
            return found
        pos = 0
        while (hit := self.combined.search(buf, pos, end)) is not None:
            start, stop = line_bounds(buf, hit.start(), end)
            found.extend((start, i) for i, rx, _ in self.each if rx.search(buf, max(0, start - 1), stop))
            pos = max(stop, hit.end(), pos + 1)
        return _thin_first_only(found, {i for i, _, first in self.each if first})


class LiteralEngine:
    """Lines holding a literal that every match of a pattern contains."""

    def __init__(self, literals: Sequence[tuple[Pattern, list[bytes]]]):
        self.by_literal: dict[bytes, list[int]] = {}
        self.first_only = {p.id for p, _ in literals if p.first_only}
        for pattern, options in literals:
            for literal in options:
                self.by_literal.setdefault(literal, []).append(pattern.id)

    def __call__(self, buf: Buffer, end: int) -> list[tuple[int, int]]:
        found: list[tuple[int, int]] = []
        for literal, ids in self.by_literal.items():
            limit = FIRST_ONLY_REPEATS if all(i in self.first_only for i in ids) else -1
            pos = buf.find(literal, 0, end)
            while pos >= 0 and limit != 0:
                found.extend((pos, i) for i in ids)
                limit -= 1
                stop = _line_stop(buf, pos, end)
                pos = buf.find(literal, stop + 1, end) if stop < end else -1
        return found


def _line_stop(buf: Buffer, pos: int, end: int) -> int:
    stop = buf.find(b"\n", pos, end)
    return end if stop < 0 else stop


def _thin_first_only(found: list[tuple[int, int]], first_only: set[int]) -> list[tuple[int, int]]:
    if not first_only:
        return found
    seen: dict[int, int] = {}
    kept = []
    for pos, i in found:
        if i in first_only:
            seen[i] = seen.get(i, 0) + 1
            if seen[i] > FIRST_ONLY_REPEATS:
                continue
        kept.append((pos, i))
    return kept


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


class HyperscanEngine:
    """All patterns in one block-mode database, loaded from the disk cache when it is there."""

    def __init__(self, patterns: Sequence[Pattern]):
        flags = [_hs_flags(p) for p in patterns]
        material = repr((getattr(hyperscan, "__version__", "?"), [(p.id, p.regex) for p in patterns], flags))
        cached = cache_dir() / f"hyperscan-{hashlib.sha256(material.encode()).hexdigest()[:32]}.db"
        try:
            self.db = hyperscan.loadb(cached.read_bytes(), hyperscan.HS_MODE_BLOCK)
            self.db.scratch = hyperscan.Scratch(self.db)
        except (OSError, hyperscan.error):
            self.db = _compile([p.regex for p in patterns], [p.id for p in patterns], flags)
            store(cached, hyperscan.dumpb(self.db))

    def __call__(self, buf: Buffer, end: int) -> list[tuple[int, int]]:
        found: list[tuple[int, int]] = []
        add = found.append

        def on_match(sig: int, _start: int, stop: int, _flags: int, _ctx: object) -> None:
            add((stop - 1, sig))  # an offset inside the matched line

        data = memoryview(buf)[:end] if end < len(buf) else buf
        self.db.scan(data, match_event_handler=on_match)  # type: ignore[type-var]  # any buffer will do
        return found


def _hs_flags(pattern: Pattern) -> int:
    flags: int = hyperscan.HS_FLAG_MULTILINE
    return flags | hyperscan.HS_FLAG_SINGLEMATCH if pattern.first_only else flags


def _compile(expressions: list[bytes], ids: list[int], flags: list[int]) -> hyperscan.Database:
    db = hyperscan.Database(mode=hyperscan.HS_MODE_BLOCK)
    db.compile(expressions=expressions, ids=ids, elements=len(expressions), flags=flags)
    return db


def hyperscan_split(patterns: Sequence[Pattern]) -> tuple[HyperscanEngine | None, list[Pattern]]:
    """An engine for the patterns hyperscan compiles, and those left to `re` (lookarounds)."""
    with contextlib.suppress(hyperscan.error):
        return HyperscanEngine(patterns), []
    fast, slow = [], []
    for pattern in patterns:
        try:  # a probe: compiled but neither kept nor cached
            _compile([pattern.regex], [0], [_hs_flags(pattern)])
            fast.append(pattern)
        except hyperscan.error:
            slow.append(pattern)
    return (HyperscanEngine(fast) if fast else None), slow


def build_engines(
    patterns: Sequence[Pattern],
    literals: Callable[[int], list[bytes] | None],
    engine: str,
    helpers: Sequence[Pattern] = (),
) -> tuple[list[Engine], str, bool]:
    """The engines that together find every pattern's candidates, the name of the main one,
    and whether the `helpers` (patterns only worth a hyperscan pass) were added to it."""
    engines: list[Engine] = []
    name, helped = "re", False
    rest = list(patterns)
    if engine != "re" and hyperscan is not None and rest:
        fast, rest = hyperscan_split([*rest, *helpers])
        if fast is not None:
            engines.append(fast)
            name, helped = ("hyperscan" if not rest else "hyperscan+re"), True
    found = {p.id: literals(p.id) for p in rest}  # parsed only for the patterns left to Python
    if with_literal := [(p, lits) for p in rest if (lits := found[p.id])]:
        engines.append(LiteralEngine(with_literal))
    if without := [p for p in rest if not found[p.id]]:
        engines.append(ReEngine(without))
    return engines, name, helped
