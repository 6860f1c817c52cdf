"""Candidate engines: find where, in a buffer, each pattern may match; the scanner confirms.

An engine is called with a buffer and the end of its data, and returns (offset, id) pairs:
an offset inside the line that may match pattern `id`. Candidates may be false (a literal
that the line holds, a match across lines); they are never missed.

- hyperscan: every pattern in one database, one pass over the buffer (~GB/s). Patterns
  marked `first_only` report once per buffer (HS_FLAG_SINGLEMATCH): frequent markers cost
  one callback per buffer, not one per line. The compiled database is cached on disk,
  keyed by its patterns: compiling takes ~0.2 s, loading it back well under 1 ms.
- literal: for the pure-Python path, a byte string every match must contain, found with
  `bytes.find` (C speed, one pass per distinct literal: that is its whole cost).
- re: one combined alternation for the rest; correct, an order of magnitude slower.
"""

from __future__ import annotations

import contextlib
import copy
import re
import sys
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from diagbench.logs.cache import entry, read_entry, write_entry
from diagbench.logs.guard import Guarded
from diagbench.logs.lines import Buffer, line_bounds
from diagbench.logs.signatures import expand

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
SPELLINGS = 8  # how many spellings of a literal small classes may expand it to


@dataclass(frozen=True)
class Pattern:
    """One pattern for the engines: its id, its regex (bytes), and whether one hit per buffer is enough."""

    id: int
    regex: bytes
    first_only: bool = False
    guarded: bool = False  # a user's pattern: searched alone, under a time budget (logs/guard.py)
    name: str = ""  # the signature's id, for the message when its budget runs out


def candidate_regex(pattern: str) -> bytes:
    """A pattern for finding candidate lines: without the prefixes an anchored pattern allows
    (the big alternation is what makes a database slow; `re` checks them on the line), no
    named groups, and "\\r" allowed wherever the pattern is anchored to a line's start or end."""
    text = expand(pattern.replace("^{prefix}", ""))
    return _line_anchors(re.sub(r"\(\?P<\w+>", "(?:", text)).encode()


# an escape, a bracket expression (with its special first "]"), or an anchor
_TOKEN = re.compile(r"\\.|\[\^?\]?(?:\\.|[^\\\]])*\]|[$^]", re.DOTALL)
_ANCHORS = {"^": "(?:^|\r)", "$": "(?:$|\r)"}


def _line_anchors(pattern: str) -> str:
    """`^` and `$` outside bracket expressions also match at a "\\r" (engines see raw lines)."""
    return _TOKEN.sub(lambda m: _ANCHORS.get(m.group(), m.group()), pattern)


class ReEngine:
    """One combined alternation; after each hit, every pattern is tried on that line. A
    first-only pattern (a frequent marker) is searched on its own, a few lines at most."""

    def __init__(self, patterns: Sequence[Pattern]):
        compiled = [(p, _compile_line(p)) for p in patterns]
        plain = [(p.id, rx) for p, rx in compiled if not p.guarded and not p.first_only]
        self.each: list[tuple[int, re.Pattern[bytes] | Guarded]] = list(plain)
        # a first-only marker is searched on its own, a few lines at most; a user's pattern
        # alone too, under its budget, on every line: never inside the combined `re`
        self.alone = [
            (p.id, rx, FIRST_ONLY_REPEATS if p.first_only else -1) for p, rx in compiled if p.guarded or p.first_only
        ]
        joined = b"|".join(b"(?:" + p.regex + b")" for p in patterns if not p.first_only and not p.guarded)
        self.combined = re.compile(joined, re.MULTILINE) if joined else None

    def __call__(self, buf: Buffer, end: int) -> list[tuple[int, int]]:
        found: list[tuple[int, int]] = []
        for i, rx, limit in self.alone:
            pos = 0
            while limit != 0 and pos <= end and (hit := rx.search(buf, pos, end)) is not None:
                start, stop = line_bounds(buf, hit.start(), end)
                found.append((start, i))
                pos = max(stop, hit.end(), pos + 1)
                limit -= 1
        pos = 0
        while self.combined is not None and (hit := self.combined.search(buf, pos, end)) is not None:
            start, stop = line_bounds(buf, hit.start(), end)
            found.extend((start, i) for i, rx in self.each if rx.search(buf, max(0, start - 1), stop))
            pos = max(stop, hit.end(), pos + 1)
        return found


class LiteralEngine:
    """Lines holding a literal that every match of a pattern contains.

    One `bytes.find` pass per literal is the cost, so a literal that holds another is found by
    that one's pass and told apart on the line."""

    def __init__(self, literals: Sequence[tuple[Pattern, list[bytes]]]):
        by_literal: dict[bytes, list[int]] = {}
        for pattern, options in literals:
            for literal in options:
                by_literal.setdefault(literal, []).append(pattern.id)
        first_only = {p.id for p, _ in literals if p.first_only}
        self.keys = _keys(by_literal)  # key -> [(literal, pattern ids)]
        self.limits = {key: _limit(entries, first_only) for key, entries in self.keys.items()}

    def __call__(self, buf: Buffer, end: int) -> list[tuple[int, int]]:
        found: list[tuple[int, int]] = []
        for key, entries in self.keys.items():
            limit = self.limits[key]
            pos = buf.find(key, 0, end)
            while pos >= 0 and limit != 0:
                start, stop = line_bounds(buf, pos, end)
                line = buf[start:stop]
                for literal, ids in entries:
                    if literal in line:
                        found.extend((start, i) for i in ids)
                limit -= 1
                pos = buf.find(key, stop + 1, end) if stop < end else -1
        return found


def _compile_line(pattern: Pattern) -> re.Pattern[bytes] | Guarded:
    if pattern.guarded:
        return Guarded(pattern.regex, pattern.name or f"#{pattern.id}", re.MULTILINE)
    return re.compile(pattern.regex, re.MULTILINE)


def _limit(entries: list[tuple[bytes, list[int]]], first_only: set[int]) -> int:
    """How many lines a key may report per buffer: all of them, unless it only serves markers."""
    return FIRST_ONLY_REPEATS if all(i in first_only for _, ids in entries for i in ids) else -1


def _keys(by_literal: dict[bytes, list[int]]) -> dict[bytes, list[tuple[bytes, list[int]]]]:
    """The literals to search for: a literal that holds a shorter one is found by that one's pass."""
    keys: dict[bytes, list[tuple[bytes, list[int]]]] = {}
    for literal in sorted(by_literal, key=lambda lit: (len(lit), lit)):
        key = next((k for k in keys if k in literal), literal)
        keys.setdefault(key, []).append((literal, by_literal[literal]))
    return keys


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

    runs = [b""]  # the literal text so far, one string per spelling a small class allows ("[Ee]rror")
    for op, av in items:
        if op is _sre.LITERAL and isinstance(av, int) and av < 128:
            runs = [run + bytes((av,)) for run in runs]
            continue
        if (chars := _small_class(op, av)) and len(runs) * len(chars) <= SPELLINGS:
            runs = [run + bytes((c,)) for run in runs for c in chars]
            continue
        consider(runs if runs[0] else None)
        runs = [b""]
        if op is _sre.BRANCH:
            branches = [_alternatives(list(b)) for b in av[1]]  # type: ignore[index]  # sre_parse tuples are untyped
            consider(None if any(b is None for b in branches) else [x for b in branches if b for x in b])
        elif op is _sre.SUBPATTERN:
            consider(_alternatives(list(av[-1])))  # type: ignore[index]  # sre_parse tuples are untyped
    consider(runs if runs[0] else None)
    return best if best is not None and min(map(len, best)) >= 3 else None


def _small_class(op: object, av: object) -> list[int] | None:
    """The characters of a class of a few plain characters ("[Ee]"), else None."""
    if op is not _sre.IN or not isinstance(av, list) or len(av) > 4:
        return None
    chars = [c for kind, c in av if kind is _sre.LITERAL and isinstance(c, int) and c < 128]
    return chars if len(chars) == len(av) else None


class HyperscanEngine:
    """All patterns in one block-mode database, loaded from the disk cache when it is there.

    The database is read-only and shared; a scratch is a scan's working memory and serves
    one scan at a time (hyperscan releases the GIL while it scans), so every `fork` gets
    its own scratch, cloned from a prototype that never scans."""

    _clone_lock = threading.Lock()

    def __init__(self, patterns: Sequence[Pattern]):
        flags = [_hs_flags(p) for p in patterns]
        key = repr((getattr(hyperscan, "__version__", "?"), [(p.id, p.regex) for p in patterns], flags)).encode()
        cached = entry("hyperscan", key, ".db")
        data = read_entry(cached, key)
        try:
            if data is None:
                raise hyperscan.error("not cached")
            self.db = hyperscan.loadb(data, hyperscan.HS_MODE_BLOCK)
        except hyperscan.error:
            self.db = _compile([p.regex for p in patterns], [p.id for p in patterns], flags)
            write_entry(cached, key, hyperscan.dumpb(self.db))
        self._prototype = hyperscan.Scratch(self.db)
        self.scratch = self._clone_scratch()

    def _clone_scratch(self) -> hyperscan.Scratch:
        with self._clone_lock:
            return self._prototype.clone()

    def fork(self) -> HyperscanEngine:
        """The same database with a scratch of its own, for one more concurrent scanner."""
        twin = copy.copy(self)
        twin.scratch = self._clone_scratch()
        return twin

    def __call__(self, buf: Buffer, end: int) -> list[tuple[int, int]]:
        return self.split_scan(buf, end, 1 << 62, 0)[0]

    def split_scan(
        self, buf: Buffer, end: int, split: int, helpers: int
    ) -> tuple[list[tuple[int, int]], list[list[int]]]:
        """Candidates of the patterns with ids below `split`, and for each of the `helpers`
        patterns after them (frequent, so kept lean) the offsets where they matched."""
        found: list[tuple[int, int]] = []
        helped: list[list[int]] = [[] for _ in range(helpers)]
        add = found.append

        def on_match(sig: int, _start: int, stop: int, _flags: int, _ctx: object) -> None:
            # an offset inside the matched line: the last byte of the match
            if sig < split:
                add((stop - 1, sig))
            else:
                helped[sig - split].append(stop - 1)

        data = memoryview(buf)[:end] if end < len(buf) else buf
        self.db.scan(data, match_event_handler=on_match, scratch=self.scratch)  # type: ignore[type-var]  # any buffer
        return found, helped


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


def fork(engine: Engine) -> Engine:
    """Engines with scan state get their own; the `re` engines hold none and are shared."""
    return engine.fork() if isinstance(engine, HyperscanEngine) else engine
