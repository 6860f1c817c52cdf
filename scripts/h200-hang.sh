#!/usr/bin/env bash
# The refserver's hang-in-capture experiment on one GPU, end to end:
#   bash scripts/h200-hang.sh "$OUT"        (from the repository root, as root)
# Leaves the run directory at "$OUT/refserver-hang-h200" (commit it under runs/) and the same
# as "$OUT/refserver-hang-h200.tgz" (a transfer that keeps two folder levels still carries it).
#
# The GPU machine has torch and Triton but no internet. diagbench goes in with --no-deps; what
# it needs and is missing, and py-spy (the stacks of the hung Python processes), come from
# wheels/ (gitignored) which is filled beforehand on a machine with internet:
#   pip download -d wheels py-spy            # py-spy's wheel is pure (py2.py3-none-manylinux)
# and carried along (e.g. the device tool's carry: ["wheels"]).
set -euo pipefail
OUT=${1:?usage: bash scripts/h200-hang.sh OUT}
NAME=refserver-hang-h200
PY=${PYTHON:-python3}
mkdir -p "$OUT"
# the servers run in the spec's cwd (experiments/): an uninstalled checkout must still import
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"

have() { "$PY" -c "import $1" 2>/dev/null; }
from_wheels() {  # install what is missing from wheels/ only; say so when it is not there
    if [ -d wheels ]; then
        "$PY" -m pip install -q --no-index --find-links wheels "$@" || echo "h200-hang: could not install $* from wheels/"
    else
        echo "h200-hang: $* missing and no wheels/ folder (pip download -d wheels $*)"
    fi
}

have diagbench || "$PY" -m pip install -q --no-deps -e .
for mod in typer:typer yaml:pyyaml psutil:psutil httpx:httpx rich:rich; do
    have "${mod%%:*}" || from_wheels "${mod##*:}"
done
command -v py-spy >/dev/null || [ -x "$(dirname "$(command -v "$PY")")/py-spy" ] || from_wheels py-spy
echo "h200-hang: $("$PY" --version), torch $("$PY" -c 'import torch; print(torch.__version__)'), py-spy: $(command -v py-spy || echo missing)"
nvidia-smi --query-gpu=name,driver_version,memory.used --format=csv,noheader || true

start=$(date +%s)
set +e
"$PY" -m diagbench run experiments/refserver-hang.yaml --gpus all --runs-dir "$OUT" --run-id "$NAME" 2>&1 | tee "$OUT/console.txt"
code=${PIPESTATUS[0]}
set -e
echo "h200-hang: diagbench run exited $code after $(( $(date +%s) - start )) s"
cp "$OUT/console.txt" "$OUT/$NAME/console.txt"
"$PY" -m diagbench report "$OUT/$NAME" --format md > "$OUT/$NAME/report.md" || true
echo "h200-hang: left behind: $(pgrep -f 'diagbench.refserver' || echo none)"
rm -f "$OUT/latest"
tar -C "$OUT" -czf "$OUT/$NAME.tgz" "$NAME"
exit "$code"
