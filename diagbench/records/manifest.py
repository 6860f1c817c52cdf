"""The manifest: everything known before the first launch, hypotheses and their hash included."""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from typing import Any

from diagbench.records.redact import Redactor, redact_yaml, spec_redactor
from diagbench.records.store import MANIFEST_VERSION
from diagbench.sensitive import REDACTED
from diagbench.spec.hypotheses import hypotheses_sha256
from diagbench.spec.load import Spec
from diagbench.spec.plan import PlannedAttempt


def build_manifest(
    spec: Spec,
    planned: Sequence[PlannedAttempt],
    run_id: str,
    options: dict[str, Any],
    provenance: dict[str, Any],
    environment: tuple[dict[str, Any] | None, Mapping[str, dict[str, Any]]] = (None, {}),
) -> dict[str, Any]:
    """Everything known before the first launch, hypotheses and their hash included (secrets blanked).

    `environment`: the server's (launch/environment.py), and each attempt's where it differs."""
    base, differing = environment
    redactor = spec_redactor(spec)
    manifest = {
        "manifest_version": MANIFEST_VERSION,
        "run_id": run_id,
        "created_at": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "spec": _spec_json(spec, redactor),
        "spec_text": redact_yaml(spec.text, redactor),
        "spec_file": str(spec.path.resolve()),  # where relative paths in it resolve (`run --resume RUN`)
        "spec_sha256": spec.sha256,
        "hypotheses": [h.to_json() for h in spec.hypotheses],
        "hypotheses_sha256": hypotheses_sha256(spec.hypotheses),
        "expect": [e.to_json() for e in spec.expectations],
        "cells": [
            {"cell_id": c.id, "params": dict(c.params), "args": redactor.argv(c.args), "env": redactor.env(c.env)}
            for c in spec.cells
        ],
        "attempts": [
            {
                "attempt": p.name,
                "cell_id": p.cell.id,
                "repeat": p.repeat,
                "params": dict(p.cell.params),
                "args": redactor.argv(p.cell.args),
                **({"environment": differing[p.name]} if p.name in differing else {}),
            }
            for p in planned
        ],
        "options": options,
        "provenance": provenance,
        "environment": base,
    }
    return redactor.deep(manifest)  # a known secret anywhere else (a description, a URL) too


def _spec_json(spec: Spec, redactor: Redactor) -> dict[str, Any]:
    data = spec.to_json()
    server = data["server"]
    server["command"] = redactor.argv(server["command"])
    server["env"] = redactor.env(server["env"])
    if request := server["ready"]["request"]:
        request["json"] = redactor.json(request["json"])  # `?token=X` in its path: `deep` blanks it
    for axis in spec.axes:
        values = data["matrix"][axis.name]["values"]
        hide = (lambda _: REDACTED) if axis.secret else redactor.log  # a value may hold `--api-key X`
        data["matrix"][axis.name]["values"] = {k: None if v is None else hide(v) for k, v in values.items()}
    return data
