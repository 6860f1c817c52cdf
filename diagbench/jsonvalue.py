"""JSON as a type: what a record holds where its shape is open (a spec as loaded, a host's facts).

A value of these types is JSON and nothing else, and reading into it narrows (`isinstance`)
before it uses a part: unlike `Any`, mypy checks every use. Covariant (`Sequence`, `Mapping`), so
a `list[str]` or a `dict[str, int]` is JSON as it is.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TypeAlias

__all__ = ["JSON", "JSONObject", "as_object"]

JSON: TypeAlias = str | int | float | bool | Sequence["JSON"] | Mapping[str, "JSON"] | None
JSONObject: TypeAlias = Mapping[str, JSON]


def as_object(value: object) -> dict[str, JSON] | None:
    """`value` if it is a JSON object (as `json.loads` gives one), else None."""
    if isinstance(value, dict) and all(isinstance(k, str) for k in value):
        return value
    return None
