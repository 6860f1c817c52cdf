"""A manifest's `environment` read with suspicion: what was written by hand (or by a newer or
broken diagbench) is checked against the shape diagbench writes (schemas/manifest.json's
`environment`) before anything renders or compares it. A part that is not that shape is left
out and named, never a traceback in `diff` or `report --format issue`."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = ["environment_problem"]

_ORIGIN_KINDS = ("index", "local", "vcs", "url")


def environment_problem(environment: Any) -> str | None:
    """What is wrong with an `environment` as read, in words (None: it has the shape written)."""
    if environment is None:
        return None
    if not isinstance(environment, Mapping):
        return "expected a mapping"
    python = environment.get("python")
    if python is not None and (why := _python_problem(python)):
        return f"python: {why}"
    if not _list_of(environment.get("gpus"), Mapping, none=True):
        return "gpus: expected a list of mappings"
    if not _strings(environment.get("variables"), none=True):
        return "variables: expected names and string values"
    return None


def _python_problem(python: Any) -> str | None:
    if not isinstance(python, Mapping):
        return "expected a mapping"
    if not isinstance(python.get("interpreter"), str):
        return "interpreter: expected a string"
    if "error" in python:
        return None if isinstance(python["error"], str) else "error: expected a string"
    if not isinstance(python.get("python", ""), str):
        return "python: expected a string"
    dists = python.get("distributions")
    if not isinstance(dists, list) or not _list_of(dists, Mapping):
        return "distributions: expected a list of mappings"
    for index, dist in enumerate(dists):
        if not (isinstance(dist.get("name"), str) and isinstance(dist.get("version"), str)):
            return f"distributions[{index}]: expected a name and a version"
        origin = dist.get("origin", {"kind": "index"})
        if not isinstance(origin, Mapping) or origin.get("kind") not in _ORIGIN_KINDS:
            return f"distributions[{index}].origin: expected a kind of {', '.join(_ORIGIN_KINDS)}"
    torch = python.get("torch")
    if torch is not None and not (isinstance(torch, Mapping) and _list_of(torch.get("gpus"), str, none=True)):
        return "torch: expected a mapping (its gpus a list of names)"
    return None


def _list_of(value: Any, kind: type, none: bool = False) -> bool:
    if value is None:
        return none
    return isinstance(value, list) and all(isinstance(item, kind) for item in value)


def _strings(value: Any, none: bool = False) -> bool:
    if value is None:
        return none
    return isinstance(value, Mapping) and all(isinstance(k, str) and isinstance(v, str) for k, v in value.items())
