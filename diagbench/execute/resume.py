"""`run --resume RUN` without the spec: the spec as the run recorded it in its manifest."""

from __future__ import annotations

import shlex
from pathlib import Path

from diagbench.errors import RunDirError
from diagbench.records.store import load_run
from diagbench.spec.load import Spec, load_spec


def recorded_spec(run: Path) -> Spec:
    """The spec a run was started with, from the text its manifest keeps (and where that file was,
    so relative paths in it resolve as they did)."""
    manifest = load_run(run).manifest
    text = manifest.get("spec_text")
    where = manifest.get("spec_file") or manifest.get("spec", {}).get("path")
    again = f"diagbench run SPEC --resume {shlex.quote(str(run))}"
    if not isinstance(text, str) or not isinstance(where, str):
        raise RunDirError(f"{run}: its manifest keeps no spec text; give the spec again: {again}")
    spec = load_spec(Path(where), text)
    if spec.sha256 != manifest.get("spec_sha256"):
        raise RunDirError(
            f"{run}: the manifest's copy of the spec has secret-looking values redacted, so it is not the "
            f"spec that ran; give the spec again: {again}"
        )
    return spec
