"""Slots: how many attempts may run at once, and the GPUs each holds while it runs.

GPUs are split once, at the start, into disjoint slots of `server.gpus` each (the closest
GPUs together where `nvidia-smi topo -m` tells); an attempt takes a free slot and gives it
back when its process tree is gone. One slot, one attempt: no two running attempts ever
share a GPU.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from diagbench.errors import UserError
from diagbench.launch import gpu
from diagbench.launch.gpu import VISIBLE_VAR, GpuOffer
from diagbench.spec.gpus import GpuRequest
from diagbench.spec.load import ServerSpec, Spec
from diagbench.spec.matrix import Cell

__all__ = [
    "NO_LEASES_FIX",
    "Distance",
    "Slot",
    "SlotPlan",
    "group_gpus",
    "lease_notes",
    "plain_slots",
    "plan_slots",
    "queue_notes",
    "queue_slots",
    "resolve_slots",
    "topology_distance",
]


@dataclass(frozen=True)
class Slot:
    """One place an attempt can run: its index and the GPUs it owns while it runs."""

    index: int
    gpus: tuple[str, ...] = ()


def plain_slots(count: int) -> list[Slot]:
    """`count` slots that hold no GPU (a host without GPUs, or servers that need none)."""
    return [Slot(i) for i in range(max(1, count))]


@dataclass(frozen=True)
class SlotPlan:
    """The slots of a run, and what to tell the user about them."""

    slots: tuple[Slot, ...]
    per_attempt: int  # GPUs per attempt (0: no GPU handed out)
    offer: GpuOffer
    notes: tuple[str, ...] = ()

    @property
    def gpus_in_use(self) -> bool:
        return any(slot.gpus for slot in self.slots)

    def env(self, slot: Slot) -> dict[str, str]:
        """What an attempt on `slot` gets set: its GPUs as CUDA_VISIBLE_DEVICES."""
        return {VISIBLE_VAR: ",".join(slot.gpus), **self.offer.env} if slot.gpus else {}

    def describe(self) -> str:
        """One line: `4 slots of 1 GPU: [0] [1] [2] [3]` or `1 slot, no GPU handed out`."""
        count = f"{len(self.slots)} slot{'s' if len(self.slots) != 1 else ''}"
        if not self.gpus_in_use:
            return f"{count}, no GPU handed out ({self.offer.source})"
        shown = " ".join("[" + ",".join(slot.gpus) + "]" for slot in self.slots)
        per = f"{self.per_attempt} GPU{'s' if self.per_attempt != 1 else ''}"
        return f"{count} of {per} each: {shown} ({self.offer.source})"


Distance = Callable[[str, str], float]


def resolve_slots(spec: Spec, request: GpuRequest | None, parallel: int | None) -> SlotPlan:
    """This host's slots for a run: `--gpus` (else the spec's `gpus:`, else every visible
    GPU) split into groups of `server.gpus`, at most `parallel` of them in use."""
    offer = gpu.offer_gpus(request or spec.gpus, os.environ, gpu.inventory())
    wide = (spec.server.gpus or 0) > 1 and bool(offer.host_index)
    distance = topology_distance(offer.host_index, gpu.topology()) if wide else None
    return plan_slots(spec.server, spec.cells, offer, parallel, distance)


def plan_slots(
    server: ServerSpec,
    cells: Sequence[Cell],
    offer: GpuOffer,
    parallel: int | None,
    distance: Distance | None = None,
) -> SlotPlan:
    """Split the offered GPUs into slots of `server.gpus`; `parallel` caps how many are used."""
    per = server.gpus if server.gpus is not None else (1 if offer.ids else 0)
    notes = list(offer.notes)
    if per == 0 or not offer.ids:
        if per and server.gpus:
            notes.append(f"server.gpus: {per}, but no GPU is offered ({offer.source}): attempts get no {VISIBLE_VAR}")
        return SlotPlan(tuple(plain_slots(_concurrency(server, parallel, parallel or 1))), 0, offer, tuple(notes))
    if per > len(offer.ids):
        raise UserError(
            f"server.gpus: each attempt needs {per} GPUs, but only {len(offer.ids)} are offered "
            f"({offer.source}: {','.join(offer.ids)}); lower server.gpus or offer more with --gpus"
        )
    _refuse_own_visible_devices(server, cells)
    groups, unused = group_gpus(offer.ids, per, distance)
    if unused:
        notes.append(f"GPU {','.join(unused)} left unused: {len(offer.ids)} offered, {per} per attempt")
    count = _concurrency(server, parallel, len(groups))
    if server.port is not None and parallel is None and len(groups) > 1:
        notes.append(f"server.port is fixed ({server.port}): one attempt at a time (port: auto runs {len(groups)})")
    slots = tuple(Slot(i, gpus) for i, gpus in enumerate(groups[:count]))
    return SlotPlan(slots, per, offer, tuple(notes))


def queue_slots(server: ServerSpec, parallel: int | None, attempts: int, offer: str, cluster: str) -> SlotPlan:
    """A cluster's slots: plain ones (the cluster hands out GPUs), one per attempt unless
    `parallel` caps the jobs in the queue; one where server.port is fixed (jobs may share a
    node). `offer`: how the cluster is asked for GPUs; `cluster`: its name, in the notes."""
    per = server.gpus or 0
    count = _concurrency(server, parallel, attempts)
    notes = tuple(queue_notes(server, parallel, cluster))
    return SlotPlan(tuple(plain_slots(count)), per, GpuOffer((), offer), notes)


def queue_notes(server: ServerSpec, parallel: int | None, cluster: str) -> list[str]:
    """What a cluster run's user hears before the first job: a fixed port holds the jobs to one
    at a time, as it does here (exit 2 for --parallel above 1)."""
    _concurrency(server, parallel, 1)
    if server.port is None or parallel is not None:
        return []
    why = f"{cluster} may put jobs on one node; port: auto submits them all at once"
    return [f"server.port is fixed ({server.port}): one attempt at a time ({why})"]


def _concurrency(server: ServerSpec, parallel: int | None, available: int) -> int:
    """Slots in use: all of them by default, at most `--parallel`; one where the port is fixed."""
    if parallel is not None and parallel > 1 and server.port is not None:
        raise UserError(f"--parallel {parallel} needs server.port: auto (cells cannot share port {server.port})")
    if server.port is not None:
        return 1
    return max(1, min(available, parallel) if parallel is not None else available)


def _refuse_own_visible_devices(server: ServerSpec, cells: Sequence[Cell]) -> None:
    """diagbench sets CUDA_VISIBLE_DEVICES per attempt; a spec that sets it too would undo that."""
    where = next((f"the matrix (cell {c.id})" for c in cells if VISIBLE_VAR in c.env), None)
    if VISIBLE_VAR in server.env:
        where = "server.env"
    if where is not None:
        raise UserError(
            f"{where} sets {VISIBLE_VAR}, which diagbench sets for each attempt from its GPU slot; "
            "remove it, or run with --gpus none to choose GPUs yourself"
        )


def group_gpus(
    ids: Sequence[str], per: int, distance: Distance | None = None
) -> tuple[list[tuple[str, ...]], list[str]]:
    """Disjoint groups of `per` GPUs (the closest together, greedily, in the order given on
    ties), and the GPUs left over."""
    left = list(ids)
    groups: list[tuple[str, ...]] = []
    while len(left) >= per:
        group = [left.pop(0)]
        while len(group) < per:
            nearest = min(left, key=lambda c: (sum(distance(g, c) for g in group) if distance else 0.0, left.index(c)))
            left.remove(nearest)
            group.append(nearest)
        groups.append(tuple(group))
    return groups, left


def topology_distance(host_index: Mapping[str, int], links: Mapping[tuple[int, int], float]) -> Distance | None:
    """Distance between two offered GPU ids from the host's topology, or None where unknown."""
    if not links:
        return None

    def distance(a: str, b: str) -> float:
        pair = (host_index.get(a, -1), host_index.get(b, -1))
        return links.get(pair, max(links.values()))

    return distance


NO_LEASES_FIX = (
    "remove it, set DIAGBENCH_GPU_LOCKS to a folder of your own, or pass --no-gpu-leases "
    "to run without leases (another diagbench may then share these GPUs)"
)


def lease_notes(plan: SlotPlan | None, without_leases: bool) -> list[str]:
    """Nothing when the GPUs handed out can be leased; where they cannot (a planted link, a
    folder of another user), a UserError (exit 2), or with `without_leases` a warning note."""
    from diagbench.launch.gpulease import check_leases

    if plan is None or not plan.gpus_in_use:
        return []
    problem = check_leases([g for slot in plan.slots for g in slot.gpus], plan.offer.host_index)
    if problem is None:
        return []
    if not without_leases:
        raise UserError(f"{problem}; {NO_LEASES_FIX}")
    return [f"warning: {problem}; running without GPU leases (--no-gpu-leases)"]
