"""The local executor: each attempt is a process tree on this host."""

from __future__ import annotations

import dataclasses
import socket

from diagbench.execute.cancel import Cancel
from diagbench.execute.events import RunEvents
from diagbench.execute.slots import Slot, SlotPlan
from diagbench.launch import gpu
from diagbench.launch.attempt import run_attempt
from diagbench.launch.gpulease import hold_gpus
from diagbench.launch.tags import Tag, current_scope, me, new_nonce
from diagbench.logs.scan import Scanner
from diagbench.records.parts import GpuSettle, Placement
from diagbench.records.record import AttemptRecord, not_launched
from diagbench.records.redact import redact_record, server_redactor
from diagbench.records.store import RunDir
from diagbench.spec.load import ServerSpec
from diagbench.spec.plan import PlannedAttempt
from diagbench.vocab import Outcome

__all__ = ["LocalExecutor", "local_place"]


class LocalExecutor:
    """Launches, watches and tears down each attempt on this host.

    The signatures are compiled once and shared; each attempt scans with its own fork of
    the scanner (concurrent attempts must not share hyperscan's scratch). Every tree is
    tagged with a nonce of this executor's own, so no other invocation's teardown, even
    one with the same run id, can reach it."""

    def __init__(self, server: ServerSpec, run_dir: RunDir, slots: SlotPlan | None = None):
        self.server, self.run_dir, self.slots = server, run_dir, slots
        self.scanner = Scanner(server.signatures)
        self.nonce = new_nonce()
        self.baseline = gpu.memory_used_mib()

    def tag(self, item: PlannedAttempt) -> Tag:
        return Tag(self.nonce, item.name, me(), self.run_dir.path.resolve(), current_scope())

    def run(self, item: PlannedAttempt, slot: Slot, cancel: Cancel, events: RunEvents) -> AttemptRecord:
        """Launch `item` on `slot` once no other diagbench of the host holds its GPUs; they
        stay leased until its tree is gone."""
        known = self.slots.offer.host_index if self.slots else {}
        label = f"attempt {item.name} of {self.tag(item).run_dir}"
        with hold_gpus(slot.gpus, known, label, cancel.event, lambda why: events.on_wait(item, slot, why)) as held:
            if not held:
                return not_launched(item, Outcome.CANCELLED, f"not started: {cancel.reason}")
            return self._run(item, slot, cancel, events)

    def _run(self, item: PlannedAttempt, slot: Slot, cancel: Cancel, events: RunEvents) -> AttemptRecord:
        watched = self._watched(slot)
        gpu_info = self._settle_gpu(watched, cancel)
        events.on_start(item, slot)
        env = self.slots.env(slot) if self.slots else {}
        # the spec's own values win: its CUDA_DEVICE_ORDER (diagbench's PCI_BUS_ID is only a
        # default); CUDA_VISIBLE_DEVICES in server.env was refused before the run began
        server = dataclasses.replace(self.server, env={**env, **self.server.env}) if env else self.server
        record = run_attempt(
            item,
            server,
            self.run_dir.attempt_dir(item.name),
            self.scanner.fork(),
            self.tag(item),
            cancel.read_fd,
            events.on_phase,
            hurry=cancel.urgent,
            gpu_indices=watched if slot.gpus and watched else (),  # its GPUs' activity counts as work
        )
        if gpu_info is not None:
            after = gpu.memory_used_mib()
            after_mib = None if after is None else tuple(gpu.pick(after, watched))
            record = dataclasses.replace(record, gpu=dataclasses.replace(gpu_info, after_mib=after_mib))
        record = dataclasses.replace(record, gpus=list(slot.gpus), executor=local_place())
        secrets = server_redactor(self.server, [item.cell.env], [item.cell.args])
        return redact_record(record, secrets)

    def _watched(self, slot: Slot) -> list[int] | None:
        """The host indices of the GPUs whose memory must settle before `slot` launches:
        its own GPUs; with no GPU slots, every GPU, but only when attempts run one at a time
        (with several at once, the others' memory is rightly in use)."""
        if slot.gpus:
            known = self.slots.offer.host_index if self.slots else {}
            return [known[g] for g in slot.gpus if g in known]
        if self.slots is not None and len(self.slots.slots) > 1:
            return []
        return None

    def _settle_gpu(self, watched: list[int] | None, cancel: Cancel) -> GpuSettle | None:
        """Wait (bounded) until the watched GPUs' memory is back to where the run started."""
        if self.baseline is None or watched == []:
            return None
        before, waited = gpu.wait_for_baseline(self.baseline, cancel.event, indices=watched)
        baseline = tuple(gpu.pick(self.baseline, watched))
        return GpuSettle(baseline, None if before is None else tuple(before), round(waited, 3))


def local_place() -> Placement:
    """result.json's `executor` for an attempt run on this host."""
    return Placement("local", None, socket.gethostname())
