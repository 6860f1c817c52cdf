"""Factors from two command lines: what differs between a launch that works and one that fails.

Both lines are read the same generic way, knowing nothing of the server: leading
`NAME=value` words (and `--good-env`/`--bad-env`) are environment changes; the rest is
`--name value`, `--name=value`, bare `--flag`, `-x value`, repeated options and positional
words. Each keyed part that differs (an option's n-th occurrence, the n-th positional
word, a variable) is one factor.

Whether `--x y` is an option with the value `y` or a flag followed by the word `y`
cannot be told from one line. The two lines together usually tell: `--x=v` anywhere
means it takes a value, `--x` before another option or at the end means it is a flag,
and otherwise the reading under which the lines differ in fewer places wins (a note
says so).
"""

from __future__ import annotations

import dataclasses
import re
import shlex
from collections import Counter
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from enum import Enum
from typing import Any, Protocol

from diagbench.errors import UserError
from diagbench.records.redact import redact, redact_argv

_ENV_WORD = re.compile(r"^([A-Za-z_][A-Za-z0-9_]*)=(.*)$", re.DOTALL)
_PLAIN = re.compile(r"^[\w@%+=:,./{}-]+$")
_NEGATIVE_NUMBER = re.compile(r"^-\d+(\.\d*)?([eE][-+]?\d+)?$")

Key = tuple[str, str, int]  # ("opt", name, occurrence) or ("pos", "", index)


class FactorKind(str, Enum):
    ENV = "env"
    FLAG = "flag"
    OPTION = "option"
    POSITIONAL = "positional"
    AXIS = "axis"  # a spec's axis (diagbench isolate SPEC)

    def __str__(self) -> str:
        return self.value


@dataclass(frozen=True)
class Factor:
    """One difference: its name, and what the good and the bad launch have (None: absent)."""

    name: str
    kind: FactorKind
    good: str | None
    bad: str | None

    def shown(self, value: str | None) -> str | None:
        """A side's value as it may be written down (secret-looking values redacted)."""
        if value is None:
            return None
        if self.kind is FactorKind.ENV:
            return redact({self.name: value})[self.name]
        if self.kind is FactorKind.OPTION:
            return redact_argv([self.name.split("#")[0], value])[1]
        return redact_argv([value])[0]

    def label(self, bad: bool) -> str:
        """The short word for one side in tables and records: the value, or `-` when absent."""
        shown = self.shown(self.bad if bad else self.good)
        return "-" if shown is None else shown or "''"

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "kind": self.kind.value, "good": self.shown(self.good), "bad": self.shown(self.bad)}


@dataclass(frozen=True)
class Config:
    """One launch configuration: the argv (with `{port}`), the env it sets, its labels per factor."""

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
    env: Mapping[str, str]

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
        env: dict[str, str | None] = dict(self.good.env)
        for f in self.factors:
            if f.kind is FactorKind.ENV and f.name in applied:
                env[f.name] = f.bad
        set_env = {k: v for k, v in env.items() if v is not None}  # a variable only good sets is left inherited
        return Config(self._argv({self.keys[n] for n in applied if n in self.keys}), set_env, params)

    @property
    def reordered(self) -> bool:
        """Whether the probes put the bad line's words in another order than it has (good's order wins)."""
        return self._argv(set(self.keys.values())) != self.bad.words

    def _argv(self, taken: Collection[Key]) -> tuple[str, ...]:
        argv: list[str] = []
        for key in self.order:
            part = (self.bad if key in taken else self.good).part(key)
            if part is not None:
                argv.extend(part.tokens)
        return tuple(argv)


def split_command(text: str, env_terms: Sequence[str], side: str) -> tuple[tuple[str, ...], dict[str, str]]:
    """One pasted command line: its argv, and the variables set by leading `NAME=value` words and --SIDE-env."""
    try:
        words = shlex.split(text)
    except ValueError as exc:
        raise UserError(f"--{side}: cannot split the command like a shell would: {exc} (close the quote)") from None
    env: dict[str, str] = {}
    while words and (found := _ENV_WORD.match(words[0])):
        env[found[1]] = found[2]
        words.pop(0)
    if not words:
        raise UserError(f"--{side}: no command to run (write it after any NAME=value words)")
    for term in env_terms:
        found = _ENV_WORD.match(term)
        if not found:
            raise UserError(f"--{side}-env {term}: expected NAME=VALUE (e.g. --{side}-env TORCHINDUCTOR_CUDAGRAPHS=1)")
        env[found[1]] = found[2]
    return tuple(words), env


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
        now = len(_factor_names(good, bad, flags))
        other = flags ^ {name}
        then = len(_factor_names(good, bad, other))
        if then < now:
            flags, now, then = other, then, now
        if now < then:  # the lines decided it; on a tie the usual reading stays, unremarked
            notes.append(_note(name, name in flags, then - now))
    return flags, notes


def _note(name: str, flag: bool, more: int) -> str:
    reading, other = ("a flag", "an option with a value") if flag else ("an option with a value", "a flag")
    return f"{name}: read as {reading} (as {other}, the two lines would differ in {more} more place(s))"


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


def _env_factors(good: Mapping[str, str], bad: Mapping[str, str]) -> list[Factor]:
    names = list(dict.fromkeys([*good, *bad]))
    return [Factor(n, FactorKind.ENV, good.get(n), bad.get(n)) for n in names if good.get(n) != bad.get(n)]


def shown_command(config: Config) -> str:
    """A configuration as one pasteable line (secret-looking values redacted)."""
    env = redact(dict(config.env))
    prefix = [f"{k}={shlex.quote(v)}" for k, v in env.items() if v is not None]
    unset = [f"-u {k}" for k, v in env.items() if v is None]
    words = [*(["env", *unset] if unset else []), *prefix, *(_quote(w) for w in redact_argv(config.args))]
    return " ".join(words)


def _quote(word: str) -> str:
    return word if _PLAIN.match(word) else shlex.quote(word)  # `{port}` reads better unquoted
