#!/usr/bin/env bash
# CI: launches of many ranks (torchrun, torch.multiprocessing.spawn) over gloo on the CPU, read
# as ranks. Uses the torch CPU build .ci/vllm.sh installed (/tmp/vllmcpu-venv: torch with
# gloo and torchrun); the tests marked `torch` must run here, not skip.
set -euo pipefail
cd "$(dirname "$0")/.."

python=${DIAGBENCH_TORCH_PYTHON:-/tmp/vllmcpu-venv/bin/python}
if ! "$python" -c 'import torch.distributed as d; assert d.is_gloo_available()'; then
  echo "no torch with gloo at $python: run .ci/vllm.sh first (or set DIAGBENCH_TORCH_PYTHON)" >&2
  exit 1
fi
t0=$(date +%s)
DIAGBENCH_TORCH_PYTHON=$python DIAGBENCH_TORCH_TESTS=1 .venv/bin/python -m pytest -q -n 2 -m torch tests
echo "torch ranks part of CI: $(( $(date +%s) - t0 )) s"
