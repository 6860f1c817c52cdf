"""JSON Schemas for the spec and for every record diagbench writes, shipped as data.

`diagbench schema NAME` prints one; tests validate the experiments, the committed runs and
the golden files against them. The vocabulary (outcomes, failure classes, a spec's outcome
conditions) is spelled once, in vocab.json, generated from vocab.py (`vocabulary()`;
`python scripts/schema_vocab.py` rewrites it, and a test fails while it is stale); the other
schemas refer to it (`"$ref": "vocab.json#/$defs/failure_class"`), and a schema is printed and
loaded with it bundled in, so each stands alone.
"""

from __future__ import annotations

import json
from importlib import resources

from diagbench.errors import UserError
from diagbench.jsonvalue import JSON, as_object
from diagbench.vocab import CONDITION_OUTCOMES, FAILURE_CLASSES, NOT_READY, OUTCOMES, LogOutcome

__all__ = ["NAMES", "VOCAB", "load_schema", "schema_text", "vocabulary"]

NAMES = ("spec", "result", "verdicts", "manifest", "classify", "isolation", "triage", "limit", "debug")
VOCAB = "vocab.json"
_ID = "https://diagbench.invalid/schemas/"


def vocabulary() -> dict[str, JSON]:
    """vocab.json as vocab.py defines it: the words every schema refers to."""
    launched = "|".join(o for o in CONDITION_OUTCOMES if o != NOT_READY)
    condition = f"^({NOT_READY}|({launched})(:({'|'.join(FAILURE_CLASSES)}))?)(@.+)?$"
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": _ID + VOCAB,
        "title": "diagbench's vocabulary (generated from diagbench/vocab.py: python scripts/schema_vocab.py)",
        "$defs": {
            "outcome": {"description": "how one launch ended", "enum": list(OUTCOMES)},
            "outcome_or_null": {"enum": [*OUTCOMES, None]},
            "failure_class": {"description": "why a failed launch failed", "enum": list(FAILURE_CLASSES)},
            "failure_class_or_null": {"enum": [*FAILURE_CLASSES, None]},
            "log_outcome": {"description": "what a finished log says (classify)", "enum": [str(o) for o in LogOutcome]},
            "condition": {
                "description": "an outcome a spec expects: outcome, outcome:class or not_ready, then @site",
                "type": "string",
                "pattern": condition,
            },
        },
    }


def vocabulary_text() -> str:
    """vocab.json's text, as scripts/schema_vocab.py writes it."""
    return json.dumps(vocabulary(), indent=2) + "\n"


def schema_text(name: str) -> str:
    """The schema as printed: the shipped file with the vocabulary bundled in (JSON text)."""
    return json.dumps(load_schema(name), indent=2) + "\n"


def load_schema(name: str) -> dict[str, JSON]:
    """The schema with the vocabulary it refers to bundled into its own `$defs`."""
    if name not in NAMES:
        raise UserError(f"unknown schema '{name}' (choose one of: {', '.join(NAMES)})")
    bundled = as_object(_local_refs(json.loads(_shipped(f"{name}.json")))) or {}
    words = as_object(json.loads(_shipped(VOCAB))["$defs"]) or {}
    return {**bundled, "$defs": {**(as_object(bundled.get("$defs")) or {}), **words}}


def _shipped(filename: str) -> str:
    return (resources.files("diagbench.schemas") / filename).read_text(encoding="utf-8")


def _local_refs(node: JSON) -> JSON:
    """`vocab.json#/$defs/X` -> `#/$defs/X`, everywhere in `node`."""
    if isinstance(node, dict):
        return {
            k: v.replace(VOCAB + "#", "#", 1) if k == "$ref" and isinstance(v, str) else _local_refs(v)
            for k, v in node.items()
        }
    if isinstance(node, list):
        return [_local_refs(v) for v in node]
    return node
