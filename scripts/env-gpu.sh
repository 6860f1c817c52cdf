#!/usr/bin/env bash
# The server's environment on a GPU host, end to end: torch's CUDA runtime, NCCL and GPUs and
# the driver in `plan --environment` and in a run's manifest (each attempt whose steering
# variables differ carrying its own), a secret blanked, and nothing of the run left behind.
#
#   bash scripts/env-gpu.sh "$OUT"        # from the repository root; PYTHON=... picks the server's
#
# Needs: a GPU, torch in $PYTHON (default python3), diagbench importable there
# (pip install --no-deps -e . plus typer, pyyaml, psutil, httpx, rich, packaging).
set -euo pipefail
OUT=${1:?usage: bash scripts/env-gpu.sh OUT}
PY=${PYTHON:-python3}
mkdir -p "$OUT"
spec=$OUT/env-gpu.yaml
cat > "$spec" <<EOF
name: env-gpu
server:
  command: [$PY, -c, "import time; print('The server is fired up and ready to roll!', flush=True); time.sleep(60)"]
  env: {NCCL_DEBUG: WARN, HF_TOKEN: hf_not_a_real_token_0123456789}
  timeout: 60s
matrix:
  logs: {env: TORCH_LOGS, values: [unset, "+dynamo"]}
EOF
"$PY" -m diagbench plan "$spec" --environment > "$OUT/plan.txt"
grep -E "^(server interpreter|torch|GPU driver|steering variables):" "$OUT/plan.txt"
"$PY" -m diagbench run "$spec" --runs-dir "$OUT/runs" --run-id env-gpu > "$OUT/run.txt"
"$PY" - "$OUT/runs/env-gpu/manifest.json" <<'EOF'
import json, sys
manifest = json.load(open(sys.argv[1]))
env = manifest["environment"]
torch = env["python"]["torch"]
print("torch:", json.dumps(torch))
print("driver:", sorted({g["driver"] for g in env["gpus"] or []}))
assert torch.get("torch") and torch.get("cuda_runtime") and torch.get("nccl") and torch.get("gpus"), torch
assert env["gpus"] and all(g.get("driver") for g in env["gpus"]), env["gpus"]
assert env["variables"]["HF_TOKEN"] == "<redacted>", env["variables"]
assert "hf_not_a_real_token" not in open(sys.argv[1]).read()
plain, dynamo = manifest["attempts"]
assert "environment" not in plain and dynamo["environment"]["variables"]["TORCH_LOGS"] == "+dynamo"
print("env-gpu: ok")
EOF
