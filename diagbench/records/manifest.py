"""The manifest: everything known before the first launch, hypotheses and their hash included."""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

from diagbench.records.redact import REDACTED, redact, redact_argv
from diagbench.records.store import MANIFEST_VERSION
from diagbench.spec.hypotheses import hypotheses_sha256
from diagbench.spec.load import Spec
from diagbench.spec.plan import PlannedAttempt


def build_manifest(
    spec: Spec,
    planned: Sequence[PlannedAttempt],
    run_id: str,
    options: dict[str, Any],
    provenance: dict[str, Any],
) -> dict[str, Any]:
    """Everything known before the first launch, hypotheses and their hash included."""
    spec_json = spec.to_json()
    spec_json["server"]["env"] = redact(dict(spec.server.env))
    return {
        "manifest_version": MANIFEST_VERSION,
        "run_id": run_id,
        "created_at": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "spec": spec_json,
        "spec_text": redact_text(spec.text, spec),
        "spec_sha256": spec.sha256,
        "hypotheses": [h.to_json() for h in spec.hypotheses],
        "hypotheses_sha256": hypotheses_sha256(spec.hypotheses),
        "expect": [e.to_json() for e in spec.expectations],
        "cells": [
            {"cell_id": c.id, "params": dict(c.params), "args": list(c.args), "env": redact(dict(c.env))}
            for c in spec.cells
        ],
        "attempts": [
            {
                "attempt": p.name,
                "cell_id": p.cell.id,
                "repeat": p.repeat,
                "params": dict(p.cell.params),
                "args": redact_argv(p.cell.args),
            }
            for p in planned
        ],
        "options": options,
        "provenance": provenance,
    }


def redact_text(text: str, spec: Spec) -> str:
    """The spec's source with every secret-looking env value it sets blanked out."""
    values: dict[str, str | None] = dict(spec.server.env)
    for cell in spec.cells:
        values.update(cell.env)
    for key, value in values.items():
        if value and redact({key: value})[key] == REDACTED:
            text = text.replace(value, REDACTED)
    return text
