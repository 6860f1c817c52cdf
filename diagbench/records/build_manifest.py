"""A run's manifest built before the first launch: the spec as loaded, the plan, the settings and
the host, every secret the spec knows blanked."""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import replace

from diagbench.jsonvalue import JSON, JSONObject
from diagbench.records.manifest import CellEntry, Manifest, PlannedEntry, RunSettings
from diagbench.records.redact import Redactor, spec_redactor
from diagbench.records.redact_spec import redact_yaml
from diagbench.sensitive import REDACTED
from diagbench.spec.hypotheses import hypotheses_sha256
from diagbench.spec.load import Spec
from diagbench.spec.matrix import Level
from diagbench.spec.plan import PlannedAttempt

__all__ = ["build_manifest"]


def build_manifest(
    spec: Spec,
    planned: Sequence[PlannedAttempt],
    run_id: str,
    settings: RunSettings,
    provenance: JSONObject,
    isolation_factors: Sequence[JSONObject] | None = None,
    environment: tuple[JSONObject | None, Mapping[str, JSONObject]] = (None, {}),
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


def _spec_json(spec: Spec, redactor: Redactor) -> dict[str, JSON]:
    """The spec as loaded, its secrets blanked while it is still typed: the command, the env, a
    ready request's body (`?token=X` in its path: `deep` blanks it) and the axes' values (a
    secret axis's wholly; another's may hold `--api-key X`)."""
    s = spec.server
    env = {k: v for k, v in redactor.env(s.env).items() if v is not None}
    request = s.ready_request and replace(s.ready_request, body=redactor.json(s.ready_request.body))
    server = replace(s, command=tuple(redactor.argv(s.command)), env=env, ready_request=request)
    axes = tuple(replace(a, levels=tuple(_hidden(level, a.secret, redactor) for level in a.levels)) for a in spec.axes)
    return replace(spec, server=server, axes=axes).to_json()


def _hidden(level: Level, secret: bool, redactor: Redactor) -> Level:
    if level.value is None:
        return level
    return replace(level, value=REDACTED if secret else redactor.log(level.value))
