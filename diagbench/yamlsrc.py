"""Located YAML: read a spec file into nodes that remember their line and field path.

Labels are taken from the source text of scalars, so `values: [on, off]` gives the labels
`on` and `off` (PyYAML's YAML 1.1 would turn them into booleans).

Mistakes are reported like a compiler's: each node carries a `Problems` sink. A strict sink
(signature packs) raises the first SpecError; a collecting one (specs) records it, and the
parser goes on with the next independent part (`Problems.attempt`): each top-level section,
each server key, each axis, each hypothesis. A check that depends on a broken part is skipped,
so one mistake is not reported again as its consequences.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypeVar

import yaml

from diagbench.errors import SpecError, SpecErrors
from diagbench.safefiles import TooLarge, Unsafe, read_input

__all__ = [
    "MAX_DEPTH",
    "MAX_ERRORS",
    "MAX_NODES",
    "Broken",
    "Problems",
    "Src",
    "check_size",
    "load_document",
    "parse_duration",
    "suggest",
    "write_duration",
]

_TRUE = {"on", "true", "yes", "y"}
_FALSE = {"off", "false", "no", "n"}
_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(ms|s|m|h)?\s*$")
_UNITS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, None: 1.0}
SHOWN_CHARS = 60  # of a value quoted in a message (a file that is not YAML at all is one long value)


def _shown(node: yaml.Node) -> str:
    """How a found value is named in a message."""
    if isinstance(node, yaml.MappingNode):
        return "a mapping"
    if isinstance(node, yaml.SequenceNode):
        return "a list"
    if node.tag == "tag:yaml.org,2002:null":
        return "nothing"
    value = str(node.value)
    if len(value) <= SHOWN_CHARS:
        return f'"{value}"'
    cut = max(0, value.rfind(" ", 0, SHOWN_CHARS + 1))  # whole words: never the half of a token that hides it
    return f'"{value[:cut]}..." ({len(value):,} characters)'


MAX_ERRORS = 20  # shown at once; the rest wait for the next round
T = TypeVar("T")
F = TypeVar("F")


class Broken(Exception):
    """A part of the spec is unusable and its mistakes are already recorded: skip what depends on it."""


class Problems:
    """The spec mistakes found so far: raised at once (strict), or collected in line order."""

    def __init__(self, collect: bool = False):
        self.collect = collect
        self.found: list[SpecError] = []

    def add(self, error: SpecError) -> None:
        if not self.collect:
            raise error
        self.found.append(error)

    def attempt(self, parse: Callable[[], T], fallback: F) -> T | F:
        """Parse one independent part; on a mistake, record it and return `fallback`."""
        try:
            return parse()
        except Broken:
            return fallback
        except SpecError as exc:
            self.add(exc)
            return fallback

    def mark(self) -> int:
        return len(self.found)

    def clean_since(self, mark: int) -> bool:
        return len(self.found) == mark

    def settle(self, mark: int) -> None:
        """End a part: Broken if a mistake was recorded in it since `mark`."""
        if not self.clean_since(mark):
            raise Broken

    def raise_found(self, file: str) -> None:
        """Raise what was found, in line order: the mistake itself, or SpecErrors for several."""
        if not self.found:
            return
        ordered = sorted(self.found, key=lambda e: (e.file != file, e.line or 0))
        if len(ordered) == 1:
            raise ordered[0]
        raise SpecErrors(ordered, MAX_ERRORS)


_STRICT = Problems()


@dataclass(frozen=True)
class Src:
    """One YAML node with its file, line and field path, and where its mistakes go."""

    node: yaml.Node
    file: str
    path: str
    sink: Problems = field(default=_STRICT, compare=False, repr=False)

    @property
    def line(self) -> int:
        return self.node.start_mark.line + 1

    def error(self, message: str, fix: str = "") -> SpecError:
        return SpecError(self.file, self.line, self.path, message, fix)

    def expected(self, what: str, fix: str = "") -> SpecError:
        return self.error(f"expected {what}, got {_shown(self.node)}", fix)

    def child(self, node: yaml.Node, key: str | int) -> Src:
        if isinstance(key, int):
            return Src(node, self.file, f"{self.path}[{key}]", self.sink)
        return Src(node, self.file, f"{self.path}.{key}" if self.path else key, self.sink)

    def attempt(self, parse: Callable[[], T], fallback: F) -> T | F:
        """`parse` as one independent part: a mistake in it is recorded, `fallback` returned."""
        return self.sink.attempt(parse, fallback)

    def collecting(self) -> Src:
        """This node with a fresh sink that collects every mistake instead of raising the first."""
        return Src(self.node, self.file, self.path, Problems(collect=True))

    # -- shapes ----------------------------------------------------------------------

    def is_null(self) -> bool:
        return isinstance(self.node, yaml.ScalarNode) and self.node.tag.endswith(":null")

    def is_mapping(self) -> bool:
        return isinstance(self.node, yaml.MappingNode)

    def is_list(self) -> bool:
        return isinstance(self.node, yaml.SequenceNode)

    def mapping(self, known: Iterable[str] | None = None, what: str = "a mapping") -> dict[str, Src]:
        """The mapping's entries by key; an unknown or repeated key is a mistake (with a
        suggestion) and is left out, so the other entries are still checked."""
        if not isinstance(self.node, yaml.MappingNode):
            raise self.expected(what)
        out: dict[str, Src] = {}
        allowed = list(known) if known is not None else None
        for key_node, value_node in self.node.value:
            key_src = self.child(key_node, str(key_node.value))
            key = str(key_node.value)
            if not isinstance(key_node, yaml.ScalarNode):
                self.sink.add(key_src.error("expected a plain key, got a mapping or list as a key"))
            elif key in out:
                self.sink.add(key_src.error(f"duplicate key '{key}'", "keep one of them"))
            elif allowed is not None and key not in allowed:
                self.sink.add(key_src.error(f"unknown key '{key}'", suggest(key, allowed)))
            else:
                out[key] = self.child(value_node, key)
        return out

    def missing(self, keys: Mapping[str, Src], need: str, fix: str = "") -> bool:
        """Record "missing key" unless a misspelt key already said "did you mean '{need}'?"."""
        if need in keys:
            return False
        written = [str(k.value) for k, _ in self.node.value] if isinstance(self.node, yaml.MappingNode) else []
        if not any(w not in keys and difflib.get_close_matches(w, [need], n=1, cutoff=0.6) for w in written):
            self.sink.add(self.error(f"missing key '{need}'", fix))
        return True

    def items(self) -> list[Src]:
        if not isinstance(self.node, yaml.SequenceNode):
            raise self.expected("a list")
        return [self.child(n, i) for i, n in enumerate(self.node.value)]

    def items_or_one(self) -> list[Src]:
        """A list, or a single scalar taken as a list of one."""
        return self.items() if self.is_list() else [self.scalar_src()]

    def scalar_src(self) -> Src:
        if not isinstance(self.node, yaml.ScalarNode):
            raise self.expected("a single value")
        return self

    # -- scalars ---------------------------------------------------------------------

    def text(self, what: str = "a single value") -> str:
        """The scalar exactly as written (the label of a matrix value)."""
        if not isinstance(self.node, yaml.ScalarNode) or self.is_null():
            raise self.expected(what)
        return str(self.node.value)

    def string(self, what: str = "a string") -> str:
        value = self.text(what)
        if not value.strip():
            raise self.error(f"expected {what}, got an empty string")
        return value

    def boolean(self) -> bool:
        value = self.text("on or off").lower()
        if value in _TRUE:
            return True
        if value in _FALSE:
            return False
        raise self.expected("on or off (or true/false, yes/no)")

    def integer(self, what: str = "an integer") -> int:
        value = self.text(what)
        try:
            return int(value)
        except ValueError:
            raise self.expected(what) from None

    def duration(self) -> float:
        """`90s`, `8m`, `1h`, `500ms`, or a number of seconds."""
        seconds = parse_duration(self.text("a duration like 90s, 8m or 1h"))
        if seconds is None:
            raise self.expected("a positive duration like 90s, 8m or 1h")
        return seconds

    def regex(self) -> str:
        value = self.string("a regular expression")
        try:
            re.compile(value)
        except re.error as exc:
            raise self.error(f"invalid regular expression {value!r}: {exc}") from None
        return value


def parse_duration(value: str) -> float | None:
    """Seconds in `90s`, `8m`, `1h`, `500ms` or a bare number; None if it is not a positive duration."""
    found = _DURATION.match(value)
    if not found or float(found.group(1)) <= 0:
        return None
    return float(found.group(1)) * _UNITS[found.group(2)]


def write_duration(seconds: float) -> str:
    """A duration for people: `45s`, `1m`, `5m10s`, `90m`, `2h`."""
    minutes, secs = divmod(round(seconds), 60)
    if minutes == 0:
        return f"{seconds:g}s"
    if secs:
        return f"{minutes}m{secs}s"
    return f"{minutes // 60}h" if minutes % 60 == 0 else f"{minutes}m"


def suggest(word: str, choices: Iterable[str]) -> str:
    """'did you mean ...?' for a misspelt key, or the list of valid keys."""
    options = sorted(choices)
    close = difflib.get_close_matches(word, options, n=1, cutoff=0.6)
    if close:
        return f"did you mean '{close[0]}'?"
    return "expected one of: " + ", ".join(options)


MAX_NODES = 100_000  # values in the document once every alias is expanded (a spec has hundreds)
MAX_DEPTH = 64  # levels of nesting


def check_size(node: yaml.Node, name: str) -> None:
    """A document whose aliases expand to more than MAX_NODES values ("billion laughs"), that
    nests deeper than MAX_DEPTH or whose alias holds itself: one SpecError, nothing expanded.
    Sizes are counted once per node (aliases share their node), so this costs the document's
    size, not its expansion's."""
    sizes: dict[int, int] = {}
    depths: dict[int, int] = {}
    path: set[int] = set()
    stack: list[tuple[yaml.Node, bool]] = [(node, False)]
    while stack:
        here, after = stack.pop()
        key, kids = id(here), _children(here)
        if after:
            path.discard(key)
            sizes[key] = 1 + sum(sizes[id(k)] for k in kids)
            depths[key] = 1 + max((depths[id(k)] for k in kids), default=0)
            _check_limits(here, name, sizes[key], depths[key])
        elif key in path:
            raise SpecError(name, here.start_mark.line + 1, "", "an alias refers to the value that holds it")
        elif key not in sizes:
            path.add(key)
            stack.append((here, True))
            stack.extend((k, False) for k in kids)


def _children(node: yaml.Node) -> list[yaml.Node]:
    if isinstance(node, yaml.MappingNode):
        return [part for pair in node.value for part in pair]
    if isinstance(node, yaml.SequenceNode):
        return list(node.value)
    return []


def _check_limits(node: yaml.Node, name: str, size: int, depth: int) -> None:
    line = node.start_mark.line + 1
    if size > MAX_NODES:
        fix = "aliases (*name) that repeat aliases multiply: write the values out, or fewer of them"
        raise SpecError(name, line, "", f"this value expands to more than {MAX_NODES:,} values", fix)
    if depth > MAX_DEPTH:
        raise SpecError(name, line, "", f"nested more than {MAX_DEPTH} levels deep", "flatten the YAML")


MAX_YAML_BYTES = 256 << 10  # a spec, a pack or a remedies file is kilobytes (the largest pack: 13 KB)


def _other_suffix(path: Path) -> str | None:
    """`did you mean x.yaml?` where x.yml is missing and x.yaml is there (or the other way)."""
    other = {".yml": ".yaml", ".yaml": ".yml"}.get(path.suffix)
    if other and path.with_suffix(other).is_file():
        return f"did you mean {path.with_suffix(other)}?"
    return None


def load_document(
    path: Path, text: str | None = None, limit: int = MAX_YAML_BYTES, what: str = "spec"
) -> tuple[Src, str]:
    """Parse a YAML file (or `text` kept from it) into its root node; returns the node and the
    text. The file is an input door: a regular file (a FIFO, a device or a folder is one
    message, never a wait or an endless read) of at most `limit` bytes. `what` the file is
    (a spec, a signature pack ...), for the messages."""
    name = str(path)
    try:
        text = read_input(path, limit).decode("utf-8") if text is None else text
    except FileNotFoundError:
        raise SpecError(name, None, "", "no such file", _other_suffix(path) or "check the path") from None
    except TooLarge as exc:
        shown = f"{exc.size:,} bytes" if exc.size is not None else "it grew while read"
        raise SpecError(
            name,
            None,
            "",
            f"{shown}: larger than the {limit >> 10} KiB a YAML file may be here",
            "is this the file you meant?",
        ) from None
    except Unsafe as exc:
        raise SpecError(name, None, "", f"is {exc.strerror}", "give the path of a YAML file") from None
    except UnicodeDecodeError as exc:
        raise SpecError(name, None, "", f"not UTF-8 text ({exc.reason})") from None
    except OSError as exc:
        raise SpecError(name, None, "", f"cannot be read: {exc.strerror}") from None
    if len(text) > limit:
        raise SpecError(name, None, "", f"larger than the {limit >> 10} KiB a YAML file may be here")
    try:
        node = yaml.compose(text, Loader=yaml.SafeLoader)
    except RecursionError:
        raise SpecError(name, None, "", "nested too deeply for a spec", "flatten the YAML") from None
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line = mark.line + 1 if mark else None
        problem = exc.problem or exc.context or "invalid YAML"
        raise SpecError(name, line, "", f"invalid YAML: {problem}", "check the indentation and quoting") from None
    except yaml.YAMLError as exc:
        raise SpecError(name, None, "", f"invalid YAML: {exc}") from None
    if node is None:
        fix = "a spec needs at least 'name' and 'server'" if what == "spec" else f"is this the {what} you meant?"
        raise SpecError(name, 1, "", "the file is empty", fix)
    check_size(node, name)
    root = Src(node, name, "")
    if not root.is_mapping():
        raise SpecError(name, root.line, "", f"expected a mapping of {what} keys at the top, got {_shown(node)}")
    return root, text
