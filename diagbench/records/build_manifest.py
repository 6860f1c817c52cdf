"""A run's manifest built before the first launch: the spec as loaded, the plan, the settings and
the host, every secret the spec knows blanked."""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from typing import Any

from diagbench.records.manifest import CellEntry, Manifest, PlannedEntry, RunSettings
from diagbench.records.redact import Redactor, spec_redactor
from diagbench.records.redact_spec import redact_yaml
from diagbench.sensitive import REDACTED
from diagbench.spec.hypotheses import hypotheses_sha256
from diagbench.spec.load import Spec
from diagbench.spec.plan import PlannedAttempt

__all__ = ["build_manifest"]


def build_manifest(
    spec: Spec,
    planned: Sequence[PlannedAttempt],
    run_id: str,
    settings: RunSettings,
    provenance: Mapping[str, Any],
    isolation_factors: Sequence[Mapping[str, Any]] | None = None,
    environment: tuple[Mapping[str, Any] | None, Mapping[str, Mapping[str, Any]]] = (None, {}),
) -> Manifest:
    """Everything known before the first launch, hypotheses and their hash included (secrets blanked).

    `environment`: the server's (launch/environment.py), and each attempt's where it differs."""
    redactor = spec_redactor(spec)
    base, differing = environment
    manifest = Manifest(
        run_id=run_id,
        created_at=time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        spec=_spec_json(spec, redactor),
        spec_text=redact_yaml(spec.text, redactor),
        spec_file=str(spec.path.resolve()),
        spec_sha256=spec.sha256,
        hypotheses=tuple(spec.hypotheses),
        hypotheses_sha256=hypotheses_sha256(spec.hypotheses),
        expect=tuple(spec.expectations),
        cells=tuple(
            CellEntry(c.id, dict(c.params), tuple(redactor.argv(c.args)), redactor.env(c.env)) for c in spec.cells
        ),
        attempts=tuple(
            PlannedEntry(
                p.name,
                p.cell.id,
                p.repeat,
                dict(p.cell.params),
                tuple(redactor.argv(p.cell.args)),
                differing.get(p.name),
            )
            for p in planned
        ),
        options=settings,
        provenance=provenance,
        isolation_factors=None if isolation_factors is None else tuple(isolation_factors),
        environment=base,
    )
    return Manifest.from_json(redactor.deep(manifest.to_json()))  # a known secret anywhere else (a URL) too


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
