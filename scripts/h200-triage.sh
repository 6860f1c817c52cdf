#!/usr/bin/env bash
# `diagbench triage` on one H200: the reference server's capture failure (the custom Triton
# kernel under torch.compile, only the smallest batch warmed up: see experiments/refserver-capture.yaml,
# cell kernel=custom,compile=on,inductor_graphs=unset,warmup=first), triaged to the remedies its
# advice names, each that comes up priced with 200 real /generate requests (graphs vs eager:
# real throughput from the GPU).
#
# Usage, from the repository root, on a host with one H200, torch and triton installed (no
# internet needed: diagbench's own deps, typer, pyyaml, psutil, httpx and rich, are in the image;
# hyperscan is optional and the scan falls back to `re`):
#     bash scripts/h200-triage.sh "$OUT"
# Leaves "$OUT/refserver-triage-h200/" (the run directory, to commit under runs/),
# "$OUT/refserver-triage-h200.tar.gz" (the same, in one file) and "$OUT/console.txt".
set -uo pipefail
out=${1:?usage: bash scripts/h200-triage.sh OUT_DIR}
mkdir -p "$out"
# the servers run in the spec's cwd (experiments/): an uninstalled checkout must still import
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
python3 -m pip install -q --no-deps --no-build-isolation -e . || exit 3
python3 -c 'import torch, sys; sys.exit(0 if torch.cuda.is_available() else "no GPU visible to torch")' || exit 3
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader

runs=$(mktemp -d /tmp/triage-runs-XXXXXX)
command="REFSERVER_TRITON_KERNEL=1 python3 -m diagbench.refserver --port {port} --cuda-graph-max-bs 8 --torch-compile-max-bs 8 --enable-torch-compile --warmup first"
start=$(date +%s)
COLUMNS=200 python3 -m diagbench triage "$command" --price 200 --fresh-caches --timeout 4m --grace 10s \
    --gpus all --runs-dir "$runs" --run-id refserver-triage-h200 2>&1 | tee "$out/console.txt"
status=${PIPESTATUS[0]}
echo "diagbench triage exit $status after $(( $(date +%s) - start )) s" | tee -a "$out/console.txt"

python3 -m diagbench report "$runs/refserver-triage-h200" --format issue --for sglang > "$out/issue.md" || true
left=$(ps -eo pid,args | grep -c '[d]iagbench.refserver' || true)
echo "refserver processes left: $left" | tee -a "$out/console.txt"
cp "$out/console.txt" "$runs/refserver-triage-h200/console.txt"
cp -r "$runs/refserver-triage-h200" "$out/"
tar -C "$runs" -czf "$out/refserver-triage-h200.tar.gz" refserver-triage-h200
exit "$status"
