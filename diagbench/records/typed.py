"""JSON objects read into frozen dataclasses by their annotations, and written back from them.

One reader for every typed part of a record (an evidence, a cause, a hang, where it ran): a
field of the wrong type is named with what it should be (`field 'hang.pid': expected an
integer, got "x"`), a nested part is built the same way, and the fields a newer minor version
added are left out. A part gains a field by declaring it: nothing else reads or writes it.
"""

from __future__ import annotations

import dataclasses
import json
import types
from collections.abc import Mapping
from enum import Enum
from pathlib import Path
from typing import Any, TypeVar, Union, get_args, get_origin, get_type_hints

from diagbench.errors import RecordError
from diagbench.jsonvalue import JSON, JSONObject
from diagbench.safefiles import read_regular

__all__ = [
    "OMIT_NONE",
    "Plain",
    "build",
    "build_versioned",
    "check",
    "check_version",
    "conforms",
    "plain",
    "read_document",
    "shown",
    "words",
]

T = TypeVar("T")
OMIT_NONE = {"omit_none": True}  # field(metadata=OMIT_NONE): left out of the JSON while None (an addition)


def build(kind: type[T], data: Mapping[str, object], where: str = "") -> T:
    """An instance of the dataclass `kind` from its JSON object: each known field checked
    against its annotation (a RecordError names it), nested parts built, unknown keys left out."""
    hints = _hints(kind)
    values: dict[str, object] = {}
    for f in dataclasses.fields(kind):  # type: ignore[arg-type]  # kind is a dataclass: asserted by _hints
        if f.name not in data:
            if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
                raise RecordError(f"field '{where}{f.name}': missing")
            continue
        values[f.name] = _value(data[f.name], hints[f.name], f"{where}{f.name}")
    return kind(**values)


def check_version(data: Mapping[str, object], name: str, key: str, current: int) -> None:
    """A document's `key` version is one this diagbench reads (never a newer one's, guessed at)."""
    version = data.get(key)
    if not isinstance(version, int) or version > current:
        raise RecordError(f"{name}: {key} {version!r}: written by a newer diagbench (this one reads {current})")


def build_versioned(kind: type[T], data: Mapping[str, object], name: str, key: str, current: int) -> T:
    """A document (isolation.json, limit.json, ...) built after its version is checked."""
    check_version(data, name, key, current)
    try:
        return build(kind, data)
    except (RecordError, TypeError, ValueError) as exc:
        raise RecordError(f"{name}: malformed: {exc}") from None


def read_document(path: Path, max_bytes: int = 16 << 20) -> JSONObject | None:
    """A run's JSON document as an object, or None where there is none: a regular file of bounded
    size, never read through a link nor a FIFO (the files door)."""
    if not path.exists() and not path.is_symlink():
        return None
    try:
        data = json.loads(read_regular(path, max_bytes).decode("utf-8"))
    except (OSError, ValueError) as exc:
        raise RecordError(f"{path}: unreadable: {exc}") from None
    if not isinstance(data, dict):
        raise RecordError(f"{path}: expected a JSON object")
    return data


def check(value: object, hint: object, where: str) -> None:
    """RecordError naming `where` unless `value` is of the type `hint` names."""
    if not conforms(value, hint):
        _name_the_wrong_part(value, hint, where)
        raise RecordError(f"field '{where}': expected {words(hint)}, got {shown(value)}")


def conforms(value: object, hint: object) -> bool:
    """Whether a JSON value is of the annotated type (a dataclass: an object with its required fields)."""
    origin, args = get_origin(hint), get_args(hint)
    if hint is Any or hint is object:
        return True
    if origin in (Union, types.UnionType):
        return any(conforms(value, arg) for arg in args)
    if hint is type(None):
        return value is None
    if hint is float:
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if hint in (int, str, bool):
        return isinstance(value, hint) and (hint is bool or not isinstance(value, bool))
    if origin in (list, tuple):
        return isinstance(value, list) and all(conforms(v, args[0]) for v in value)
    if origin in (dict, Mapping):
        return isinstance(value, dict) and all(conforms(v, args[1]) for v in value.values())
    if isinstance(hint, type) and issubclass(hint, Enum):
        return value in {m.value for m in hint}
    if dataclasses.is_dataclass(hint):
        hints = _hints(hint)  # type: ignore[arg-type]
        required = [f.name for f in dataclasses.fields(hint) if _required(f)]
        return (
            isinstance(value, dict)
            and all(k in value for k in required)
            and all(conforms(value[k], hints[k]) for k in hints if k in value)
        )
    return isinstance(hint, type) and isinstance(value, hint)


class Plain:
    """A record part (a frozen dataclass) written as its fields: its `to_json` is `plain(self)`."""

    __slots__ = ()

    def to_json(self) -> JSONObject:
        return plain(self)


def plain(part: object) -> JSONObject:
    """A dataclass as its JSON object: enums as their words, tuples as lists, nested parts as
    objects, and fields marked OMIT_NONE left out while None."""
    out: dict[str, JSON] = {}
    for f in dataclasses.fields(part):  # type: ignore[arg-type]
        value = getattr(part, f.name)
        if value is None and f.metadata.get("omit_none"):
            continue
        out[f.name] = _plain(value)
    return out


def words(hint: object, many: bool = False) -> str:
    """How a type is named in a message: "a string or null", "a list of integers"."""
    origin, args = get_origin(hint), get_args(hint)
    if origin in (Union, types.UnionType):
        return " or ".join(words(arg, many) for arg in args)
    if origin in (list, tuple, dict, Mapping):
        kind = ("lists" if many else "a list") if origin in (list, tuple) else ("mappings" if many else "a mapping")
        inner = args[0] if origin in (list, tuple) else args[-1]
        return kind if inner is Any or inner is object else f"{kind} of {words(inner, True)}"
    if isinstance(hint, type) and issubclass(hint, Enum):
        return "one of " + ", ".join(str(m.value) for m in hint)
    if dataclasses.is_dataclass(hint):
        return "{" + ", ".join(f.name for f in dataclasses.fields(hint) if _required(f)) + ", ...}" + " objects" * many
    return _TYPE_WORDS.get(hint, ("", str(hint)))[many]


def shown(value: object) -> str:
    """A value as a message quotes it: its JSON, cut at 60 characters."""
    text = json.dumps(value, default=str)
    return text if len(text) <= 60 else text[:59] + "…"


def _name_the_wrong_part(value: object, hint: object, where: str) -> None:
    """A RecordError at the innermost wrong part when the value has the shape the type names (an
    object of a part, a list): `field 'evidence.line_no': expected an integer`, not the whole part."""
    arms = (
        [a for a in get_args(hint) if a is not type(None)] if get_origin(hint) in (Union, types.UnionType) else [hint]
    )
    if len(arms) != 1:
        return
    arm = arms[0]
    if dataclasses.is_dataclass(arm) and isinstance(value, dict):
        hints = _hints(arm)  # type: ignore[arg-type]
        for f in dataclasses.fields(arm):
            if f.name in value:
                check(value[f.name], hints[f.name], f"{where}.{f.name}")
            elif _required(f):
                raise RecordError(f"field '{where}.{f.name}': missing")
    elif get_origin(arm) in (list, tuple) and isinstance(value, list):
        for i, item in enumerate(value):
            check(item, get_args(arm)[0], f"{where}[{i}]")


def _value(value: object, hint: object, where: str) -> object:
    check(value, hint, where)
    return _built(value, hint, where)


def _built(value: object, hint: object, where: str) -> object:
    """A checked JSON value as the annotation's type: parts built, lists as tuples where declared."""
    origin, args = get_origin(hint), get_args(hint)
    if value is None:
        return None
    if origin in (Union, types.UnionType):
        chosen = next(arg for arg in args if arg is not type(None) and conforms(value, arg))
        return _built(value, chosen, where)
    if isinstance(hint, type) and issubclass(hint, Enum):
        return hint(value)
    if dataclasses.is_dataclass(hint) and isinstance(value, dict):
        return build(hint, value, f"{where}.")  # type: ignore[arg-type]
    if origin in (list, tuple) and isinstance(value, list):
        items = [_built(v, args[0], f"{where}[{i}]") for i, v in enumerate(value)]
        return tuple(items) if origin is tuple else items
    return value


def _plain(value: object) -> JSON:
    if isinstance(value, Enum):
        return _plain(value.value)
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return plain(value)
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items()}
    if value is None or isinstance(value, (str, int, float, bool)):
        return value
    raise TypeError(f"not JSON: {value!r}")


def _required(f: dataclasses.Field[object]) -> bool:
    return f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING


_HINTS: dict[type, dict[str, object]] = {}


def _hints(kind: type) -> dict[str, object]:
    if kind not in _HINTS:
        if not dataclasses.is_dataclass(kind):
            raise TypeError(f"{kind!r} is not a dataclass")
        _HINTS[kind] = get_type_hints(kind)
    return _HINTS[kind]


_TYPE_WORDS: dict[object, tuple[str, str]] = {
    str: ("a string", "strings"),
    int: ("an integer", "integers"),
    float: ("a number", "numbers"),
    bool: ("true or false", "true or false"),
    type(None): ("null", "nulls"),
    Any: ("anything", "anything"),
    object: ("anything", "anything"),
}
