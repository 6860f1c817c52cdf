"""JSON Schemas for the spec and for every record diagbench writes, shipped as data.

`diagbench schema NAME` prints one; tests validate the experiments, the committed runs and
the golden files against them.
"""

from __future__ import annotations

import json
from importlib import resources
from typing import Any

from diagbench.errors import UserError

NAMES = ("spec", "result", "verdicts", "manifest", "classify", "isolation", "triage")


def schema_text(name: str) -> str:
    """The schema as shipped (JSON text)."""
    if name not in NAMES:
        raise UserError(f"unknown schema '{name}' (choose one of: {', '.join(NAMES)})")
    return (resources.files("diagbench.schemas") / f"{name}.json").read_text(encoding="utf-8")


def load_schema(name: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(schema_text(name))
    return data
