#!/usr/bin/env bash
# `diagbench limit` and `diagbench debug` on one H200, in one command, with the reference server
# (diagbench.refserver) running the custom Triton kernel (REFSERVER_TRITON_KERNEL=1, autotuned per
# batch size) with only the smallest batch warmed before capture (--warmup first):
#   1. limit: the largest --cuda-graph-max-bs (1..64) that still captures, by bisection (at most
#      8 launches), every launch that comes up priced with 100 /generate requests;
#   2. debug: its capture failure (--cuda-graph-max-bs 8) launched again with the debug settings a
#      capture failure calls for (CUDA_LAUNCH_BLOCKING=1, TRITON_PRINT_AUTOTUNING=1), the sharper
#      line recorded beside the first one.
# Each launch compiles from empty Inductor and Triton caches (--fresh-caches): a cache warmed by
# an earlier launch would hide the autotuning inside the capture (docs/how-to/refserver-gpu.md).
#
# Usage, from the repository root, on a host with one H200, torch and triton installed (no
# internet needed: diagbench's own deps, typer, pyyaml, psutil, httpx and rich, are in the image;
# any missing one is installed from wheels/ if that folder is there):
#     bash scripts/gpu/limit-debug.sh [OUT]        (OUT defaults to runs/)
# Leaves OUT/refserver-limit-h200/ and OUT/refserver-debug-h200/ (run directories, each with its
# console.txt and report.md; the debug run's issue.md too) and OUT/refserver-limit-debug-h200.tgz
# holding both. About 4 minutes on an H200 (PyTorch 2.11); each step is capped well within 8.
#
# Without a GPU (ALLOW_CPU=1, PYTHON an interpreter with torch) it runs the same commands on the
# CPU, where the refserver captures nothing and comes up at every value: a check of the script.
set -uo pipefail
OUT=${1:-runs}
PY=${PYTHON:-python3}
LIMIT=refserver-limit-h200
DEBUG=refserver-debug-h200
mkdir -p "$OUT"
# the servers run in this folder: an uninstalled checkout must still import
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"

have() { "$PY" -c "import $1" 2>/dev/null; }
from_wheels() {  # what is missing, from wheels/ only (no internet)
    if [ -d wheels ]; then
        "$PY" -m pip install -q --no-index --find-links wheels "$@" || echo "limit-debug: could not install $* from wheels/"
    else
        echo "limit-debug: $* missing and no wheels/ folder (pip download -d wheels $*)"
    fi
}
have diagbench || "$PY" -m pip install -q --no-deps --no-build-isolation -e . || exit 3
for mod in typer:typer yaml:pyyaml psutil:psutil httpx:httpx rich:rich; do
    have "${mod%%:*}" || from_wheels "${mod##*:}"
done
if [ "${ALLOW_CPU:-0}" != 1 ]; then
    "$PY" -c 'import torch, sys; sys.exit(0 if torch.cuda.is_available() else "no GPU visible to torch")' || exit 3
    nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
fi
echo "limit-debug: $("$PY" --version), torch $("$PY" -c 'import torch; print(torch.__version__)')"
for name in "$LIMIT" "$DEBUG"; do
    [ -e "$OUT/$name" ] && { echo "limit-debug: $OUT/$name exists: move it away first"; exit 2; }
done

server="REFSERVER_TRITON_KERNEL=1 $PY -m diagbench.refserver --port {port} --warmup first"
common=(--fresh-caches --timeout 3m --grace 10s --gpus "${GPUS:-all}" --runs-dir "$OUT")
start=$(date +%s)

# 1. the largest batch that captures (timeout: a step's bound is 8 launches of at most 3 minutes each)
COLUMNS=200 timeout -s INT 900 "$PY" -m diagbench limit "$server" --vary --cuda-graph-max-bs=1..64 \
    --server refserver --price "${PRICE:-100}" "${common[@]}" --run-id "$LIMIT" 2>&1 | tee "$OUT/$LIMIT.console.txt"
limit_code=${PIPESTATUS[0]}
echo "limit-debug: diagbench limit exited $limit_code after $(( $(date +%s) - start )) s" | tee -a "$OUT/$LIMIT.console.txt"

# 2. its capture failure, launched again with debugging on
mid=$(date +%s)
COLUMNS=200 timeout -s INT 600 "$PY" -m diagbench debug "$server --cuda-graph-max-bs 8" \
    "${common[@]}" --run-id "$DEBUG" 2>&1 | tee "$OUT/$DEBUG.console.txt"
debug_code=${PIPESTATUS[0]}
echo "limit-debug: diagbench debug exited $debug_code after $(( $(date +%s) - mid )) s" | tee -a "$OUT/$DEBUG.console.txt"

for name in "$LIMIT" "$DEBUG"; do
    [ -d "$OUT/$name" ] || continue
    mv "$OUT/$name.console.txt" "$OUT/$name/console.txt"
    "$PY" -m diagbench report "$OUT/$name" --format md > "$OUT/$name/report.md" || true
done
[ -d "$OUT/$DEBUG" ] && { "$PY" -m diagbench report "$OUT/$DEBUG" --format issue --for sglang > "$OUT/$DEBUG/issue.md" || true; }
echo "limit-debug: both in $(( $(date +%s) - start )) s; refserver processes left: $(pgrep -f 'diagbench.refserver' | wc -l)"
rm -f "$OUT/latest"
tar -C "$OUT" -czf "$OUT/refserver-limit-debug-h200.tgz" $(cd "$OUT" && ls -d "$LIMIT" "$DEBUG" 2>/dev/null)
# limit: 0 found, 1 nothing came up; debug: 0 a failure line decided, 1 not: both 0 is the expected run
[ "$limit_code" = 0 ] && [ "$debug_code" = 0 ]
