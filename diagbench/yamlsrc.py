"""Located YAML: read a spec file into nodes that remember their line and field path.

Labels are taken from the source text of scalars, so `values: [on, off]` gives the labels
`on` and `off` (PyYAML's YAML 1.1 would turn them into booleans).
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

import yaml

from diagbench.errors import SpecError

_TRUE = {"on", "true", "yes", "y"}
_FALSE = {"off", "false", "no", "n"}
_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(ms|s|m|h)?\s*$")
_UNITS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, None: 1.0}


def _shown(node: yaml.Node) -> str:
    """How a found value is named in a message."""
    if isinstance(node, yaml.MappingNode):
        return "a mapping"
    if isinstance(node, yaml.SequenceNode):
        return "a list"
    if node.tag == "tag:yaml.org,2002:null":
        return "nothing"
    return f'"{node.value}"'


@dataclass(frozen=True)
class Src:
    """One YAML node with its file, line and field path."""

    node: yaml.Node
    file: str
    path: str

    @property
    def line(self) -> int:
        return self.node.start_mark.line + 1

    def error(self, message: str, fix: str = "") -> SpecError:
        return SpecError(self.file, self.line, self.path, message, fix)

    def expected(self, what: str, fix: str = "") -> SpecError:
        return self.error(f"expected {what}, got {_shown(self.node)}", fix)

    def child(self, node: yaml.Node, key: str | int) -> Src:
        if isinstance(key, int):
            return Src(node, self.file, f"{self.path}[{key}]")
        return Src(node, self.file, f"{self.path}.{key}" if self.path else key)

    # -- shapes ----------------------------------------------------------------------

    def is_null(self) -> bool:
        return isinstance(self.node, yaml.ScalarNode) and self.node.tag.endswith(":null")

    def is_mapping(self) -> bool:
        return isinstance(self.node, yaml.MappingNode)

    def is_list(self) -> bool:
        return isinstance(self.node, yaml.SequenceNode)

    def mapping(self, known: Iterable[str] | None = None, what: str = "a mapping") -> dict[str, Src]:
        """The mapping's entries by key; unknown keys are an error with a suggestion."""
        if not isinstance(self.node, yaml.MappingNode):
            raise self.expected(what)
        out: dict[str, Src] = {}
        allowed = list(known) if known is not None else None
        for key_node, value_node in self.node.value:
            key_src = self.child(key_node, str(key_node.value))
            if not isinstance(key_node, yaml.ScalarNode):
                raise key_src.error("expected a plain key, got a mapping or list as a key")
            key = str(key_node.value)
            if key in out:
                raise key_src.error(f"duplicate key '{key}'", "keep one of them")
            if allowed is not None and key not in allowed:
                raise key_src.error(f"unknown key '{key}'", suggest(key, allowed))
            out[key] = self.child(value_node, key)
        return out

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


def parse_duration(text: str) -> float | None:
    """Seconds in `90s`, `8m`, `1h`, `500ms` or a plain number; None if it is none of those."""
    found = _DURATION.match(text)
    if not found or float(found.group(1)) <= 0:
        return None
    return float(found.group(1)) * _UNITS[found.group(2)]


def suggest(word: str, choices: Iterable[str]) -> str:
    """'did you mean ...?' for a misspelt key, or the list of valid keys."""
    options = sorted(choices)
    close = difflib.get_close_matches(word, options, n=1, cutoff=0.6)
    if close:
        return f"did you mean '{close[0]}'?"
    return "expected one of: " + ", ".join(options)


def load_document(path: Path) -> tuple[Src, str]:
    """Parse a YAML file into its root node; returns the node and the source text."""
    name = str(path)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise SpecError(name, None, "", "no such file", "check the path") from None
    except IsADirectoryError:
        raise SpecError(name, None, "", "is a directory, not a spec file") from None
    except UnicodeDecodeError as exc:
        raise SpecError(name, None, "", f"not UTF-8 text ({exc.reason})") from None
    except OSError as exc:
        raise SpecError(name, None, "", f"cannot be read: {exc.strerror}") from None
    try:
        node = yaml.compose(text, Loader=yaml.SafeLoader)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line = mark.line + 1 if mark else None
        problem = exc.problem or exc.context or "invalid YAML"
        raise SpecError(name, line, "", f"invalid YAML: {problem}", "check the indentation and quoting") from None
    except yaml.YAMLError as exc:
        raise SpecError(name, None, "", f"invalid YAML: {exc}") from None
    if node is None:
        raise SpecError(name, 1, "", "the file is empty", "a spec needs at least 'name' and 'server'")
    root = Src(node, name, "")
    if not root.is_mapping():
        raise SpecError(name, root.line, "", f"expected a mapping of spec keys at the top, got {_shown(node)}")
    return root, text
