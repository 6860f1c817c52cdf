"""A secret set in a spec's executor settings (a Slurm setup line `export HF_TOKEN=X`, an sbatch
`--export=NAME=X`) is a secret of the spec: the manifest's copy of the spec, its spec text and its
options blank it (it was written in clear in manifest.json's spec.executor.setup and spec_text)."""

from __future__ import annotations

import json
from pathlib import Path

from diagbench.records.build_manifest import build_manifest
from diagbench.records.manifest import RunSettings
from diagbench.records.redact import spec_redactor
from diagbench.records.redact_spec import redact_yaml
from diagbench.spec.load import load_spec

TOKEN = "hf_" + "s3cr3tTokenValue0123456789"  # not of the hf_ shape's length: known only from the spec
KEY = "k3y-" + "0123456789abcdef"

SPEC = f"""name: s
server: {{command: [python3, -V], ready: {{log: x}}}}
matrix: {{a: {{env: A, values: [x]}}}}
executor:
  kind: slurm
  setup: ["export HF_TOKEN={TOKEN}", "module load cuda"]
  args: ["--export=ALL,MY_API_KEY='{KEY}'"]
"""


def test_an_executor_settings_secret_is_blanked_in_the_manifest(tmp_path: Path) -> None:
    path = tmp_path / "s.yaml"
    path.write_text(SPEC)
    spec = load_spec(path)
    redactor = spec_redactor(spec)
    assert TOKEN not in redactor.text(f"token is {TOKEN}") and KEY not in redactor.text(KEY)
    assert "module load cuda" in redact_yaml(spec.text, redactor)
    manifest = build_manifest(spec, [], "r1", RunSettings(), {})
    text = json.dumps(manifest.to_json())
    assert TOKEN not in text and KEY not in text
    assert "module load cuda" in text  # the rest of the settings as written
