#!/usr/bin/env bash
# Hangs and deaths across ranks on a GPU host, in one command (issue 38):
#   1. experiments/ranks-h200.yaml: torchrun, 2 ranks over gloo holding CUDA tensors on one GPU;
#      rank 1 never joins the warm-up all_reduce (stalled early: hang.ranks, hang.odd_ranks [1],
#      the flight recorder's hang.behind), or dies first (the launch fails on it);
#   2. experiments/ranks-h200-spawn.yaml: the same under torch.multiprocessing.spawn (ranks by
#      spawn order), on a quiet host and on one where rank 0 burns a core;
#   3. with two GPUs or more visible: experiments/ranks-nccl-2gpu.yaml, NCCL over two GPUs
#      (stall + spin rules, flight recorder).
#
# Usage, from the repository root, on a host with torch (CUDA build) installed:
#     bash scripts/gpu/ranks.sh [OUT]        (OUT defaults to runs/)
# Leaves OUT/ranks-h200/, OUT/ranks-h200-spawn/ (and OUT/ranks-nccl-2gpu/), each with its
# console.txt, report.md and report.html, and OUT/ranks-gpu.tgz holding them. A few minutes:
# each launch is capped at 3-4 minutes and a hang is decided after 20-30 s of quiet.
set -uo pipefail
OUT=${1:-runs}
PY=${PYTHON:-python3}
mkdir -p "$OUT"
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"  # an uninstalled checkout must still import

have() { "$PY" -c "import $1" 2>/dev/null; }
have diagbench || "$PY" -m pip install -q --no-deps --no-build-isolation -e . || exit 3
for mod in typer yaml psutil httpx rich; do
    have "$mod" || { echo "ranks: python module $mod missing (pip install -e .)"; exit 3; }
done
"$PY" -c 'import torch, sys; sys.exit(0 if torch.cuda.is_available() else "no GPU visible to torch")' || exit 3
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
gpus=$("$PY" -c 'import torch; print(torch.cuda.device_count())')
echo "ranks: $("$PY" --version), torch $("$PY" -c 'import torch; print(torch.__version__)'), $gpus GPU(s)"
"$PY" -c 'import shutil, sys; sys.exit(0 if shutil.which("py-spy") else "ranks: py-spy not on PATH: stacks will have no Python frames (pip install py-spy)")' || true

names=(ranks-h200 ranks-h200-spawn)
[ "$gpus" -ge 2 ] && names+=(ranks-nccl-2gpu)
for name in "${names[@]}"; do
    [ -e "$OUT/$name" ] && { echo "ranks: $OUT/$name exists: move it away first"; exit 2; }
done
codes=()
start=$(date +%s)
for name in "${names[@]}"; do
    began=$(date +%s)
    COLUMNS=200 timeout -s INT 900 "$PY" -m diagbench run "experiments/$name.yaml" --runs-dir "$OUT" \
        --run-id "$name" --gpus "${GPUS:-all}" 2>&1 | tee "$OUT/$name.console.txt"
    code=${PIPESTATUS[0]}
    codes+=("$code")
    echo "ranks: $name exited $code after $(( $(date +%s) - began )) s" | tee -a "$OUT/$name.console.txt"
    [ -d "$OUT/$name" ] || continue
    mv "$OUT/$name.console.txt" "$OUT/$name/console.txt"
    "$PY" -m diagbench report "$OUT/$name" --format md > "$OUT/$name/report.md" || true
    "$PY" -c "
import json, pathlib, sys
for result in sorted(pathlib.Path(sys.argv[1]).glob('cells/*/result.json')):
    r = json.loads(result.read_text())
    hang = r.get('hang') or {}
    print(result.parent.name, r['outcome'], r.get('failure_class'), 'first_failed_rank', r.get('first_failed_rank'),
          'odd_ranks', hang.get('odd_ranks'), '|', hang.get('words'))
" "$OUT/$name" | tee "$OUT/$name/ranks.txt"
done
left=$(pgrep -f 'tests/rankworker.py' | wc -l)
echo "ranks: all in $(( $(date +%s) - start )) s; rank processes left: $left"
rm -f "$OUT/latest"
tar -C "$OUT" -czf "$OUT/ranks-gpu.tgz" $(cd "$OUT" && ls -d "${names[@]}" 2>/dev/null)
# run exits 0 when its expectations hold; anything left running is a failure of teardown
[ "$left" = 0 ] && ! printf '%s\n' "${codes[@]}" | grep -qv '^0$'
