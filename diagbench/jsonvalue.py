"""JSON as a type: what a record holds where its shape is open (a spec as loaded, a host's facts).

A value of these types is JSON and nothing else, and reading into it narrows before it uses a
part (the `as_*` readers here): unlike `Any`, mypy checks every use. Covariant (`Sequence`,
`Mapping`), so a `list[str]` or a `dict[str, int]` is JSON as it is.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TypeAlias

__all__ = ["JSON", "JSONObject", "as_list", "as_number", "as_object", "as_text", "text_of"]

JSON: TypeAlias = str | int | float | bool | Sequence["JSON"] | Mapping[str, "JSON"] | None
JSONObject: TypeAlias = Mapping[str, JSON]


def as_object(value: object) -> dict[str, JSON] | None:
    """`value` if it is a JSON object (as `json.loads` gives one), else None."""
    if isinstance(value, dict) and all(isinstance(k, str) for k in value):
        return value
    return None


def as_list(value: object) -> list[JSON]:
    """`value` if it is a JSON array, else an empty one."""
    return value if isinstance(value, list) else []


def as_text(value: object) -> str | None:
    """`value` if it is a string, else None."""
    return value if isinstance(value, str) else None


def text_of(value: object) -> str:
    """`value` if it is a string; else TypeError (a record read back names the field)."""
    if not isinstance(value, str):
        raise TypeError(f"expected a string, got {value!r}")
    return value


def as_number(value: object) -> float | None:
    """`value` if it is a number (not a boolean), else None."""
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None
