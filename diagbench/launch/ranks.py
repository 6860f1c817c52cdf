"""Which rank each process of a launch is, from what the process says about itself.

A process's environment first (its initial one, /proc/<pid>/environ, read through
proctable.environ_bytes), in this order:

- `RANK`: set for each worker by torchrun's elastic agent (torch/distributed/elastic/agent/
  server/local_elastic_agent.py, `_start_workers`: RANK, GROUP_RANK, LOCAL_RANK,
  LOCAL_WORLD_SIZE, WORLD_SIZE) and by most launchers that follow `env://` rendezvous;
- `SLURM_PROCID` (srun), `OMPI_COMM_WORLD_RANK` (Open MPI's mpirun), `PMI_RANK` (MPICH, Intel MPI);
- `LOCAL_RANK` with `GROUP_RANK` (or `NODE_RANK`) and `LOCAL_WORLD_SIZE`: node * per-node + local;
  `LOCAL_RANK` alone only where nothing else is known (one node);
- `WORLD_SIZE` (else `SLURM_NTASKS`, `OMPI_COMM_WORLD_SIZE`, `PMI_SIZE`) when given.

A tree where RANK is set reads RANK alone (the SLURM_PROCID a launcher inherited says less);
a tree where every process says the same rank (srun's SLURM_PROCID over a whole mp.spawn
tree) says nothing about its ranks. Spawn order only where no process of the tree says
anything else: `torch.multiprocessing.spawn`
sets no variable; it starts `nprocs` processes, process `i` calling `fn(i, *args)`, in the
order of i (torch/multiprocessing/spawn.py, `start_processes`: `for i in range(nprocs):
start_process(i)`; only with the forkserver start method and TORCH_MP_PARALLEL_START=1 are
they started in parallel, and then this order can be wrong). So the children of one parent
that run the same program (their command lines equal but for numbers: spawn's pipe handles)
are ranks 0..n-1 in start order, when there are at least two of them.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import psutil

from diagbench.launch.proctable import environ_bytes

__all__ = ["RANK_VARS", "ProcessInfo", "Rank", "assign_ranks", "rank_from_env", "read_env_rank"]

RANK_VARS = ("RANK", "SLURM_PROCID", "OMPI_COMM_WORLD_RANK", "PMI_RANK")
_SIZE_VARS = ("WORLD_SIZE", "SLURM_NTASKS", "OMPI_COMM_WORLD_SIZE", "PMI_SIZE")
_LOCAL_VARS = ("LOCAL_RANK", "GROUP_RANK", "NODE_RANK", "LOCAL_WORLD_SIZE")
_WANTED = frozenset((*RANK_VARS, *_SIZE_VARS, *_LOCAL_VARS))
_NUMBER = re.compile(r"\d+")
SPAWN_ORDER = "spawn order"


@dataclass(frozen=True)
class Rank:
    """A process's rank, the world size where known, and what said so (`RANK`, `spawn order`)."""

    rank: int
    world: int | None
    source: str


@dataclass(frozen=True)
class ProcessInfo:
    """What assign_ranks needs of one process: its parent, start, command line and env rank."""

    pid: int
    ppid: int
    started: float
    argv: tuple[str, ...]
    env_rank: Rank | None


def rank_from_env(env: Mapping[str, str]) -> Rank | None:
    """The rank a process's environment gives it, or None."""
    world = next((n for n in (_int(env.get(v)) for v in _SIZE_VARS) if n is not None), None)
    for name in RANK_VARS:
        rank = _int(env.get(name))
        if rank is not None:
            return Rank(rank, world, name)
    local = _int(env.get("LOCAL_RANK"))
    if local is None:
        return None
    node = _int(env.get("GROUP_RANK"))
    node_var = "GROUP_RANK"
    if node is None:
        node, node_var = _int(env.get("NODE_RANK")), "NODE_RANK"
    per_node = _int(env.get("LOCAL_WORLD_SIZE"))
    if node is not None and per_node:
        return Rank(node * per_node + local, world, f"LOCAL_RANK + {node_var} * LOCAL_WORLD_SIZE")
    return Rank(local, world or per_node, "LOCAL_RANK")


def read_env_rank(proc: psutil.Process) -> Rank | None:
    """The rank in a live process's initial environment (None when unreadable or absent)."""
    try:
        raw = environ_bytes(proc)
    except (OSError, psutil.Error):
        return None
    env: dict[str, str] = {}
    for item in raw.split(b"\0"):
        name, sep, value = item.partition(b"=")
        if sep and name.decode("ascii", errors="replace") in _WANTED:
            env[name.decode("ascii")] = value.decode("utf-8", errors="replace")
    return rank_from_env(env)


def assign_ranks(procs: Sequence[ProcessInfo]) -> dict[int, Rank]:
    """pid -> Rank for the processes that have one: their environment's, or, where no process
    of the tree has one, spawn order among siblings that run the same program."""
    known = {p.pid: p.env_rank for p in procs if p.env_rank is not None}
    if any(r.source == "RANK" for r in known.values()):  # a launcher's own SLURM_PROCID, inherited, says less
        known = {pid: r for pid, r in known.items() if r.source == "RANK"}
    if len({r.rank for r in known.values()}) > 1 or len(known) == 1:
        return known
    # one value for every process that has one (srun's SLURM_PROCID inherited by a whole
    # tree under mp.spawn): it numbers the launch, not its ranks
    families: dict[tuple[int, str], list[ProcessInfo]] = {}
    for p in procs:
        families.setdefault((p.ppid, _program(p.argv)), []).append(p)
    out: dict[int, Rank] = {}
    for (_, program), members in families.items():
        if len(members) < 2 or not program:
            continue
        ordered = sorted(members, key=lambda p: (p.started, p.pid))
        out.update({p.pid: Rank(i, len(ordered), SPAWN_ORDER) for i, p in enumerate(ordered)})
    # a tree with two families of siblings (workers and their helpers) is read as ranks only
    # where one family stands alone: two different rank 0s would mislead
    return out if len({r.rank for r in out.values()}) == len(out) else {}


def _program(argv: Sequence[str]) -> str:
    """A command line with its numbers blanked: spawn's children differ only by pipe handles."""
    return _NUMBER.sub("N", "\0".join(argv))


_RANK_NUMBER = re.compile(r"[0-9]{1,9}")  # ASCII digits ('²'.isdigit(), int() refuses it), a sane size


def _int(text: str | None) -> int | None:
    """A variable's number; None for anything else: a process may set RANK to what it likes."""
    if text is None or not _RANK_NUMBER.fullmatch(text.strip()):
        return None
    return int(text.strip())
