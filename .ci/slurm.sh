#!/usr/bin/env bash
# .ci/slurm.sh — a throwaway single-node Slurm cluster on localhost for diagbench's
# Slurm tests (Debian 12 / bookworm, Slurm 22.05 from Debian, munge 0.5.15).
#
#     .ci/slurm.sh ci        # up, run the tests marked `slurm` (they must not skip), down
#
# Works WITHOUT systemd (containers, gVisor sandboxes, CI runners): every
# daemon is started directly and its pid is written to /run/slurm-ci/*.pid so
# the caller can stop exactly those processes later:
#
#     sudo .ci/slurm.sh up      # install (if needed) + start
#     sudo .ci/slurm.sh smoke   # sbatch --wrap, array, gres checks
#     sudo .ci/slurm.sh down    # kill the started daemons by pid
#
# Must run as root. Run `down` before a second `up`. By default there is no
# accounting DB (no slurmdbd / MariaDB): munged + slurmctld + slurmd only.
# Pass the same FAKE_GPUS / ACCOUNTING values to `up` and `smoke`.
# Optional fake GPUs: FAKE_GPUS=N (default 4) registers N "gpu" GRES backed by
# dummy char devices so `sbatch --gres=gpu:K` is scheduled and slurmd exports
# CUDA_VISIBLE_DEVICES to the job, exactly as on a real GPU node.
# FAKE_GPUS=0 disables GRES entirely.
# Optional accounting: ACCOUNTING=1 also installs MariaDB + slurmdbd so that
# `sacct` works. Needed by submitit to notice jobs that died without a result
# (without sacct, submitit's job.result() waits forever on such a job).
set -euo pipefail

FAKE_GPUS="${FAKE_GPUS:-4}"
# job slots: each job holds one CPU, and diagbench's test jobs mostly wait on a
# log line, so the node offers more CPUs than the host has (config_overrides)
NODE_CPUS="${NODE_CPUS:-$(( $(nproc) > 8 ? $(nproc) : 8 ))}"
ACCOUNTING="${ACCOUNTING:-0}"
RUN_DIR=/run/slurm-ci                 # pid files live here
CONF=/etc/slurm/slurm.conf
GRES_CONF=/etc/slurm/gres.conf
FAKE_DEV_DIR=/var/lib/slurm/fake-gpus # dummy "device" files for the fake GPUs

log() { printf '[slurm-ci] %s\n' "$*" >&2; }

install_pkgs() {
  if command -v slurmctld >/dev/null && command -v slurmd >/dev/null \
     && command -v munged >/dev/null && command -v sbatch >/dev/null \
     && { [ "$ACCOUNTING" != 1 ] || { command -v slurmdbd >/dev/null \
                                      && command -v mariadbd >/dev/null; }; }; then
    log "packages already installed"; return
  fi
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -q
  # --no-install-recommends: 9 packages / ~3.7 MB instead of 43 packages
  # (the recommends drag in hdf5, rrd, influx, ipmi, rocm-smi plugins, ...).
  # The policy-rc.d / invoke-rc.d "could not start" messages are harmless.
  local pkgs=(slurm-wlm)
  # accounting adds 24 packages / ~27.5 MB (MariaDB + perl)
  if [ "$ACCOUNTING" = 1 ]; then pkgs+=(slurmdbd mariadb-server); fi
  apt-get install -y -q --no-install-recommends "${pkgs[@]}"
}

setup_munge() {
  # Debian's munge postinst normally creates the key; make sure anyway.
  if [ ! -s /etc/munge/munge.key ]; then
    if command -v mungekey >/dev/null; then
      mungekey --create --keyfile=/etc/munge/munge.key --force
    else
      dd if=/dev/urandom of=/etc/munge/munge.key bs=1024 count=1 status=none
    fi
  fi
  chown munge:munge /etc/munge /etc/munge/munge.key
  chmod 0700 /etc/munge
  chmod 0400 /etc/munge/munge.key
  install -d -o munge -g munge -m 0755 /run/munge
  install -d -o munge -g munge -m 0700 /var/log/munge /var/lib/munge
}

write_conf() {
  local host cpus mem
  host="$(hostname -s)"
  cpus="$NODE_CPUS"
  # RealMemory must not exceed what slurmd detects, or the node is DRAINED
  # ("Low RealMemory"). Take slurmd -C's number minus a little headroom.
  mem="$(slurmd -C | sed -n 's/.*RealMemory=\([0-9]*\).*/\1/p')"
  mem=$(( mem > 1024 ? mem - 512 : mem ))
  local gres_line="" grestypes_line=""
  if [ "$FAKE_GPUS" -gt 0 ]; then
    grestypes_line="GresTypes=gpu"
    gres_line="Gres=gpu:${FAKE_GPUS}"
    install -d -m 0755 "$FAKE_DEV_DIR"
    : > "$GRES_CONF"
    local i
    for ((i = 0; i < FAKE_GPUS; i++)); do
      # slurmd rejects plain files ("is not a valid character or block
      # device"): make char devices with /dev/null's numbers (1,3), so
      # anything that opens them is harmless.
      if [ ! -c "$FAKE_DEV_DIR/gpu$i" ]; then
        rm -f "$FAKE_DEV_DIR/gpu$i"
        mknod -m 0666 "$FAKE_DEV_DIR/gpu$i" c 1 3 \
          || { log "mknod not permitted here (no CAP_MKNOD?): rerun with FAKE_GPUS=0"; exit 1; }
      fi
      echo "NodeName=${host} Name=gpu File=${FAKE_DEV_DIR}/gpu$i" >> "$GRES_CONF"
    done
  else
    rm -f "$GRES_CONF"
  fi
  install -d -o slurm -g slurm -m 0755 \
    /var/lib/slurm/slurmctld /var/lib/slurm/slurmd /var/log/slurm
  local acct_lines="AccountingStorageType=accounting_storage/none"
  if [ "$ACCOUNTING" = 1 ]; then
    acct_lines="AccountingStorageType=accounting_storage/slurmdbd
AccountingStorageHost=localhost
AccountingStoragePort=6819"
    # slurmdbd refuses a config readable by others or not owned by SlurmUser
    install -m 0600 -o slurm -g slurm /dev/null /etc/slurm/slurmdbd.conf
    cat > /etc/slurm/slurmdbd.conf <<EOF
AuthType=auth/munge
DbdHost=localhost
DbdAddr=127.0.0.1
DbdPort=6819
SlurmUser=slurm
LogFile=/var/log/slurm/slurmdbd.log
PidFile=${RUN_DIR}/slurmdbd.pid
StorageType=accounting_storage/mysql
StorageHost=localhost
StoragePort=3306
StorageUser=slurm
StoragePass=ci
StorageLoc=slurm_acct_db
EOF
  fi
  cat > "$CONF" <<EOF
# Minimal single-node Slurm config for CI (generated by slurm-single-node.sh)
ClusterName=ci
SlurmctldHost=${host}(127.0.0.1)
SlurmUser=slurm
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
MpiDefault=none
# Debian's default MailProg (/usr/bin/mail) is not installed -> log error
MailProg=/bin/true
# No cgroups: works in containers / sandboxes where cgroup plugins fail.
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
JobCompType=jobcomp/none
${acct_lines}
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
${grestypes_line}
ReturnToService=2
# the node may offer more CPUs than it has (NODE_CPUS) without being drained
SlurmdParameters=config_overrides
StateSaveLocation=/var/lib/slurm/slurmctld
SlurmdSpoolDir=/var/lib/slurm/slurmd
SlurmctldPidFile=${RUN_DIR}/slurmctld.pid
SlurmdPidFile=${RUN_DIR}/slurmd.pid
SlurmctldLogFile=/var/log/slurm/slurmctld.log
SlurmdLogFile=/var/log/slurm/slurmd.log
SlurmctldPort=6817
SlurmdPort=6818
# Fast turnaround for tests
SchedulerParameters=sched_interval=1
MinJobAge=300
KillWait=5
InactiveLimit=0
Waittime=0
MaxArraySize=1001
NodeName=${host} NodeAddr=127.0.0.1 CPUs=${cpus} RealMemory=${mem} ${gres_line} State=UNKNOWN
PartitionName=debug Nodes=${host} Default=YES MaxTime=INFINITE State=UP OverSubscribe=NO
EOF
  chmod 0644 "$CONF"
}

start_daemons() {
  install -d -m 0755 "$RUN_DIR"
  # munged: run as the munge user; it daemonizes and writes its own pidfile.
  if ! munge -n >/dev/null 2>&1; then
    # as the munge user (it refuses keys/dirs with loose ownership);
    # it forks and writes /run/munge/munged.pid itself.
    runuser -u munge -- /usr/sbin/munged
    for _ in $(seq 1 50); do munge -n >/dev/null 2>&1 && break; sleep 0.1; done
    # record the pid only for a munged we started, so `down` never kills
    # a pre-existing one
    cp /run/munge/munged.pid "$RUN_DIR/munged.pid"
  fi
  munge -n | unmunge >/dev/null || { log "munge self-test failed"; exit 1; }

  if [ "$ACCOUNTING" = 1 ]; then
    # MariaDB in the foreground under setsid (no systemd), loopback only.
    install -d -o mysql -g mysql -m 0755 /run/mysqld
    if ! mariadb-admin ping >/dev/null 2>&1; then
      setsid runuser -u mysql -- /usr/sbin/mariadbd --bind-address=127.0.0.1 \
        --pid-file=/run/mysqld/mysqld.pid >/var/log/slurm/mariadbd.out 2>&1 </dev/null &
      for _ in $(seq 1 150); do mariadb-admin ping >/dev/null 2>&1 && break; sleep 0.2; done
      cp /run/mysqld/mysqld.pid "$RUN_DIR/mariadbd.pid"
    fi
    # root logs in over the unix socket (Debian default: unix_socket auth)
    mariadb -e "CREATE USER IF NOT EXISTS 'slurm'@'localhost' IDENTIFIED BY 'ci';
                GRANT ALL ON slurm_acct_db.* TO 'slurm'@'localhost'; FLUSH PRIVILEGES;"
    /usr/sbin/slurmdbd
    # (sacctmgr only answers once slurm.conf names accounting_storage/slurmdbd)
    for _ in $(seq 1 100); do sacctmgr -n list cluster >/dev/null 2>&1 && break; sleep 0.2; done
  fi
  # -i: ignore saved state from an older run (clean CI start).
  /usr/sbin/slurmctld -i
  /usr/sbin/slurmd
  # Wait until the node is idle (or at least not "down/unk").
  local st=""
  for _ in $(seq 1 120); do
    st="$(sinfo -h -N -o '%T' 2>/dev/null | head -1 || true)"
    case "$st" in idle|mixed|allocated) break ;; esac
    sleep 0.25
  done
  log "node state: ${st:-unknown}"
  case "$st" in idle|mixed|allocated) ;;
    *) log "node not ready"; tail -n 30 /var/log/slurm/slurmctld.log /var/log/slurm/slurmd.log >&2; exit 1 ;;
  esac
}

smoke() {
  local out=/tmp/slurm-ci-smoke; rm -rf "$out"; mkdir -p "$out"; chmod 0777 "$out"
  local j1 j2
  j1=$(sbatch --parsable -o "$out/wrap-%j.out" --wrap 'echo hello from $(hostname) job=$SLURM_JOB_ID')
  j2=$(sbatch --parsable -a 0-3 -o "$out/arr-%A_%a.out" \
         --wrap 'echo task=$SLURM_ARRAY_TASK_ID of $SLURM_ARRAY_JOB_ID')
  local gpujob=""
  if [ "$FAKE_GPUS" -gt 0 ]; then
    gpujob=$(sbatch --parsable --gres=gpu:2 -o "$out/gpu-%j.out" \
      --wrap 'echo CUDA_VISIBLE_DEVICES=$CUDA_VISIBLE_DEVICES')
  fi
  for _ in $(seq 1 120); do
    [ -z "$(squeue -h -j "$j1,$j2${gpujob:+,$gpujob}" 2>/dev/null)" ] && break
    sleep 0.5
  done
  ls -1 "$out"; cat "$out"/*.out
  [ -s "$out/wrap-$j1.out" ] || { log "wrap job produced no output"; exit 1; }
  [ "$(ls "$out"/arr-"$j2"_*.out | wc -l)" -eq 4 ] || { log "array job incomplete"; exit 1; }
  if [ -n "$gpujob" ]; then
    grep -q 'CUDA_VISIBLE_DEVICES=0,1' "$out/gpu-$gpujob.out" || { log "gres job wrong"; exit 1; }
  fi
  if [ "$ACCOUNTING" = 1 ]; then
    # slurmctld registers cluster "ci" in slurmdbd by itself on first start
    local acct=""
    for _ in $(seq 1 20); do
      acct="$(sacct -X -n -P -j "$j1" -o JobID,State,ExitCode 2>/dev/null || true)"
      case "$acct" in *COMPLETED*) break ;; esac
      sleep 0.5
    done
    echo "sacct: $acct"
    case "$acct" in *COMPLETED*) ;; *) log "sacct does not know job $j1"; exit 1 ;; esac
  fi
  log "smoke OK"
}

down() {
  local p
  for p in slurmd slurmctld slurmdbd mariadbd munged; do
    if [ -s "$RUN_DIR/$p.pid" ]; then
      local pid; pid="$(cat "$RUN_DIR/$p.pid")"
      kill "$pid" 2>/dev/null || true
      for _ in $(seq 1 40); do kill -0 "$pid" 2>/dev/null || break; sleep 0.25; done
      kill -9 "$pid" 2>/dev/null || true
      rm -f "$RUN_DIR/$p.pid"
    fi
  done
  log "stopped"
}

ci() {
  # the tests marked `slurm`, against this cluster; they fail (never skip) if it is not up
  cd "$(dirname "$0")/.."
  if squeue -h >/dev/null 2>&1; then
    log "a Slurm already answers here: testing against it, leaving it up"
  else
    up_all
    trap down EXIT
  fi
  local started=$SECONDS
  DIAGBENCH_SLURM_TESTS=1 .venv/bin/python -m pytest -q -m slurm
  log "slurm tests took $(( SECONDS - started )) s"
}

up_all() { install_pkgs; setup_munge; write_conf; start_daemons; }

case "${1:-up}" in
  up)    up_all ;;
  ci)    ci ;;
  smoke) smoke ;;
  down)  down ;;
  *) echo "usage: $0 up|smoke|down|ci" >&2; exit 2 ;;
esac
