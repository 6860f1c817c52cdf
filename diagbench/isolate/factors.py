"""Factors from two command lines: what differs between a launch that works and one that fails.

Both lines are read the same generic way, knowing nothing of the server: the leading
`NAME=value` and `env ... -u NAME` words (pasted.py) and `--good-env`/`--bad-env` are
environment changes; the rest is `--name value`, `--name=value`, bare `--flag`,
`-x value`, repeated options and positional words. Each keyed part that differs (an
option's n-th occurrence, the n-th positional word, a variable) is one factor.

Whether `--x y` is an option with the value `y` or a flag followed by the word `y`
cannot be told from one line. The two lines together usually tell: `--x=v` anywhere
means it takes a value, `--x` before another option or at the end means it is a flag,
and otherwise the reading under which the lines differ in fewer places wins (a note
says so). On a tie the usual reading stays, and where a factor's name hangs on it a note
calls it a guess.
"""

from __future__ import annotations

import dataclasses
import re
import shlex
from collections import Counter
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from enum import Enum
from typing import Protocol

from diagbench.isolate.pasted import split_command
from diagbench.jsonvalue import JSON
from diagbench.records.redact import redact, redact_argv

__all__ = [
    "UNSET_LABEL",
    "CommandSpace",
    "Config",
    "Factor",
    "FactorKind",
    "Key",
    "Line",
    "Part",
    "Space",
    "derive",
    "shown_command",
]

_PLAIN = re.compile(r"^[\w@%+=:,./{}-]+$")
_NEGATIVE_NUMBER = re.compile(r"^-\d+(\.\d*)?([eE][-+]?\d+)?$")

UNSET_LABEL = "(unset)"
Key = tuple[str, str, int]  # ("opt", name, occurrence) or ("pos", "", index)


class FactorKind(str, Enum):
    ENV = "env"
    FLAG = "flag"
    OPTION = "option"
    POSITIONAL = "positional"
    AXIS = "axis"  # a spec's axis (diagbench isolate SPEC)
    PACKAGE = "package"  # a package's version between two environments (--good-deps, --bad-deps)

    def __str__(self) -> str:
        return self.value


@dataclass(frozen=True)
class Factor:
    """One difference: its name, and what the good and the bad launch have (None: absent)."""

    name: str
    kind: FactorKind
    good: str | None
    bad: str | None
    good_unset: bool = False  # a variable the side unsets (`env -u`), where None alone means inherited
    bad_unset: bool = False

    def shown(self, value: str | None) -> str | None:
        """A side's value as it may be written down (secret-looking values redacted)."""
        if value is None:
            return None
        if self.kind is FactorKind.ENV:
            return redact({self.name: value})[self.name]
        if self.kind is FactorKind.OPTION:
            return redact_argv([self.name.split("#")[0], value])[1]
        if self.kind is FactorKind.PACKAGE:
            return value  # a version or a commit
        return redact_argv([value])[0]

    def label(self, bad: bool) -> str:
        """The short word for one side in tables and records: the value, `(unset)`, or `-` when absent."""
        if self.bad_unset if bad else self.good_unset:
            return UNSET_LABEL
        shown = self.shown(self.bad if bad else self.good)
        return "-" if shown is None else shown or "''"

    def to_json(self) -> dict[str, JSON]:
        unset = [side for side, yes in (("good", self.good_unset), ("bad", self.bad_unset)) if yes]
        shown = {"good": self.shown(self.good), "bad": self.shown(self.bad)}
        return {"name": self.name, "kind": self.kind.value, **shown, "unset": unset}


@dataclass(frozen=True)
class Config:
    """One launch configuration: the argv (with `{port}`), the env it sets (None: unset), its labels per factor."""

    args: tuple[str, ...]
    env: Mapping[str, str | None]
    params: Mapping[str, str]


class Space(Protocol):
    """The factors between a good and a bad launch, and any mix of them as a configuration."""

    @property
    def factors(self) -> tuple[Factor, ...]: ...

    @property
    def notes(self) -> tuple[str, ...]: ...

    def configuration(self, applied: Collection[str]) -> Config: ...


@dataclass(frozen=True)
class Part:
    """One keyed piece of a command line, as written."""

    key: Key
    tokens: tuple[str, ...]
    value: str | None  # an option's value (None: given bare); a positional word itself


@dataclass(frozen=True)
class Line:
    """A command line read into keyed parts, and the variables it sets."""

    words: tuple[str, ...]
    parts: tuple[Part, ...]
    env: Mapping[str, str | None]  # None: unset (`env -u NAME`)

    def part(self, key: Key) -> Part | None:
        return next((p for p in self.parts if p.key == key), None)


@dataclass(frozen=True)
class CommandSpace:
    """The factors between two command lines, and any mix of them as a launch configuration."""

    good: Line
    bad: Line
    factors: tuple[Factor, ...]
    notes: tuple[str, ...] = ()
    order: tuple[Key, ...] = ()
    keys: Mapping[str, Key] = field(default_factory=dict)  # argv factor name -> its key

    def configuration(self, applied: Collection[str]) -> Config:
        """The good launch with the named factors taken from the bad one (all of them: the bad line as written)."""
        params = {f.name: f.label(f.name in applied) for f in self.factors}
        if set(applied) >= {f.name for f in self.factors}:
            return Config(self.bad.words, dict(self.bad.env), params)
        env = dict(self.good.env)
        for f in self.factors:
            if f.kind is FactorKind.ENV and f.name in applied:
                if f.name in self.bad.env:
                    env[f.name] = self.bad.env[f.name]
                else:
                    del env[f.name]  # a variable only good sets (or unsets) is left inherited, as on the bad line
        return Config(self._argv({self.keys[n] for n in applied if n in self.keys}), env, params)

    @property
    def reordered(self) -> bool:
        """Whether the probes put the bad line's parts in another order than it has (good's order wins).
        Parts, not words: `--x=1` and `--x 1` are one part written two ways."""
        return [k for k in self.order if self.bad.part(k) is not None] != [p.key for p in self.bad.parts]

    def _argv(self, taken: Collection[Key]) -> tuple[str, ...]:
        argv: list[str] = []
        for key in self.order:
            part = (self.bad if key in taken else self.good).part(key)
            if part is not None:
                argv.extend(part.tokens)
        return tuple(argv)


def derive(good: str, bad: str, good_env: Sequence[str] = (), bad_env: Sequence[str] = ()) -> CommandSpace:
    """Both command lines read the same way, and every difference between them as a factor."""
    good_words, good_vars = split_command(good, good_env, "good")
    bad_words, bad_vars = split_command(bad, bad_env, "bad")
    flags, notes = _choose_readings(good_words, bad_words)
    g = Line(good_words, tuple(_parts(good_words, flags)), good_vars)
    b = Line(bad_words, tuple(_parts(bad_words, flags)), bad_vars)
    order = _merged_order([p.key for p in g.parts], [p.key for p in b.parts])
    argv_factors = _argv_factors(g, b, order)
    factors = (*_env_factors(good_vars, bad_vars), *(f for f, _ in argv_factors))
    keys = {f.name: key for f, key in argv_factors}
    space = CommandSpace(g, b, tuple(factors), tuple(notes), tuple(order), keys)
    if space.reordered:
        notes.append(_REORDERED)
        space = dataclasses.replace(space, notes=tuple(notes))
    return space


_REORDERED = (
    "the bad line puts shared words in another order; the probes keep the good line's order "
    "(the bad launch itself runs as written)"
)


def _is_option(word: str) -> bool:
    return word.startswith("-") and word not in ("-", "--") and not _NEGATIVE_NUMBER.match(word)


def _parts(words: Sequence[str], flags: Collection[str]) -> list[Part]:
    """Keyed parts of one argv, reading the names in `flags` as never taking a value."""
    parts: list[Part] = []
    seen: Counter[str] = Counter()
    position, i, ended = 0, 0, False
    while i < len(words):
        word = words[i]
        if ended or not _is_option(word):
            ended = ended or word == "--"  # everything after `--` is a positional word
            parts.append(Part(("pos", "", position), (word,), word))
            position, i = position + 1, i + 1
            continue
        name, sep, value = word.partition("=")
        seen[name] += 1
        key: Key = ("opt", name, seen[name])
        following = words[i + 1] if i + 1 < len(words) else None
        if sep:
            parts.append(Part(key, (word,), value))
            i += 1
        elif name not in flags and following is not None and following != "--" and not _is_option(following):
            parts.append(Part(key, (word, following), following))
            i += 2
        else:
            parts.append(Part(key, (word,), None))
            i += 1
    return parts


def _evidence(words: Sequence[str]) -> tuple[set[str], set[str], list[str]]:
    """Option names given with `=`, given bare, and followed by a plain word (in order)."""
    with_eq: set[str] = set()
    bare: set[str] = set()
    before_word: list[str] = []
    for i, word in enumerate(words):
        if word == "--":
            break
        if not _is_option(word):
            continue
        name, sep, _ = word.partition("=")
        following = words[i + 1] if i + 1 < len(words) else None
        if sep:
            with_eq.add(name)
        elif following is None or following == "--" or _is_option(following):
            bare.add(name)
        elif name not in before_word:
            before_word.append(name)
    return with_eq, bare, before_word


def _choose_readings(good: Sequence[str], bad: Sequence[str]) -> tuple[set[str], list[str]]:
    """Which names are flags: from the evidence of both lines, then by fewest differences."""
    eq_g, bare_g, word_g = _evidence(good)
    eq_b, bare_b, word_b = _evidence(bad)
    with_eq, bare = eq_g | eq_b, bare_g | bare_b
    flags = bare - with_eq
    notes: list[str] = []
    for name in dict.fromkeys([*word_g, *word_b]):
        if name in with_eq:
            continue
        now = _factor_names(good, bad, flags)
        other = flags ^ {name}
        then = _factor_names(good, bad, other)
        if len(then) < len(now):
            flags, now, then = other, then, now
        if len(now) < len(then):  # the lines decided it
            notes.append(_note(name, name in flags, len(then) - len(now)))
        elif name not in bare and name in {*now, *then}:  # nothing tells, and it names a factor: a guess
            notes.append(_tie_note(name, name in flags))
    return flags, notes


def _readings(flag: bool) -> tuple[str, str]:
    return ("a flag", "an option with a value") if flag else ("an option with a value", "a flag")


def _note(name: str, flag: bool, more: int) -> str:
    reading, other = _readings(flag)
    return f"{name}: read as {reading} (as {other}, the two lines would differ in {more} more place(s))"


def _tie_note(name: str, flag: bool) -> str:
    reading, other = _readings(flag)
    fix = (
        f"if it takes a value, write {name}=VALUE"
        if flag
        else f"if it is a flag, put {name} at the end or before another option"
    )
    return f"{name}: read as {reading}, a guess: as {other} the two lines differ in as many places ({fix})"


def _factor_names(good: Sequence[str], bad: Sequence[str], flags: Collection[str]) -> list[str]:
    g = Line(tuple(good), tuple(_parts(good, flags)), {})
    b = Line(tuple(bad), tuple(_parts(bad, flags)), {})
    order = _merged_order([p.key for p in g.parts], [p.key for p in b.parts])
    return [f.name for f, _ in _argv_factors(g, b, order)]


def _merged_order(good: Sequence[Key], bad: Sequence[Key]) -> list[Key]:
    """Good's keys in good's order; each key only the bad line has goes after the key before it there."""
    order = list(good)
    at = -1
    for key in bad:
        if key in order:
            at = order.index(key)
        else:
            at += 1
            order.insert(at, key)
    return order


def _argv_factors(good: Line, bad: Line, order: Sequence[Key]) -> list[tuple[Factor, Key]]:
    counts = Counter(p.key[1] for line in (good, bad) for p in line.parts if p.key[0] == "opt" and p.key[2] > 1)
    out = []
    for key in order:
        g, b = good.part(key), bad.part(key)
        if g is not None and b is not None and g.value == b.value:
            continue
        out.append((_argv_factor(key, g, b, repeated=key[1] in counts), key))
    return out


def _argv_factor(key: Key, g: Part | None, b: Part | None, repeated: bool) -> Factor:
    kind_word, name, index = key
    if kind_word == "pos":
        label = "program" if index == 0 else f"positional#{index}"
        return Factor(label, FactorKind.POSITIONAL, g.value if g else None, b.value if b else None)
    label = f"{name}#{index}" if repeated else name
    if all(p is None or p.value is None for p in (g, b)):
        return Factor(label, FactorKind.FLAG, "on" if g else None, "on" if b else None)
    return Factor(label, FactorKind.OPTION, _option_value(g), _option_value(b))


def _option_value(part: Part | None) -> str | None:
    if part is None:
        return None
    return "" if part.value is None else part.value  # given bare where the other line gives a value


def _env_factors(good: Mapping[str, str | None], bad: Mapping[str, str | None]) -> list[Factor]:
    """A variable set, changed, unset or left inherited on one side only."""
    names = [n for n in dict.fromkeys([*good, *bad]) if (n in good, good.get(n)) != (n in bad, bad.get(n))]
    return [
        Factor(n, FactorKind.ENV, good.get(n), bad.get(n), n in good and good[n] is None, n in bad and bad[n] is None)
        for n in names
    ]


def shown_command(config: Config) -> str:
    """A configuration as one pasteable line (secret-looking values redacted)."""
    env = redact(dict(config.env))
    prefix = [f"{k}={shlex.quote(v)}" for k, v in env.items() if v is not None]
    unset = [f"-u {k}" for k, v in env.items() if v is None]
    words = [*(["env", *unset] if unset else []), *prefix, *(_quote(w) for w in redact_argv(config.args))]
    return " ".join(words)


def _quote(word: str) -> str:
    return word if _PLAIN.match(word) else shlex.quote(word)  # `{port}` reads better unquoted
