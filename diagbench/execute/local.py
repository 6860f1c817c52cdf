"""The local executor: each attempt is a process tree on this host."""

from __future__ import annotations

import dataclasses
from typing import Any

from diagbench.execute.cancel import Cancel
from diagbench.execute.events import RunEvents
from diagbench.execute.slots import Slot
from diagbench.launch import gpu
from diagbench.launch.attempt import run_attempt
from diagbench.launch.tags import Tag, me, new_nonce
from diagbench.logs.scan import Scanner
from diagbench.records.record import AttemptRecord
from diagbench.records.store import RunDir
from diagbench.spec.load import ServerSpec
from diagbench.spec.plan import PlannedAttempt


class LocalExecutor:
    """Launches, watches and tears down each attempt on this host.

    The signatures are compiled once and shared; each attempt scans with its own fork of
    the scanner (concurrent attempts must not share hyperscan's scratch). Every tree is
    tagged with a nonce of this executor's own, so no other invocation's teardown, even
    one with the same run id, can reach it."""

    def __init__(self, server: ServerSpec, run_dir: RunDir):
        self.server, self.run_dir = server, run_dir
        self.scanner = Scanner(server.signatures)
        self.nonce = new_nonce()
        self.baseline = gpu.memory_used_mib()

    def tag(self, item: PlannedAttempt) -> Tag:
        return Tag(self.nonce, item.name, me(), self.run_dir.path.resolve())

    def run(self, item: PlannedAttempt, slot: Slot, cancel: Cancel, events: RunEvents) -> AttemptRecord:
        gpu_info = self._settle_gpu(cancel)
        events.on_start(item, slot)
        record = run_attempt(
            item,
            self.server,
            self.run_dir.attempt_dir(item.name),
            self.scanner.fork(),
            self.tag(item),
            cancel.read_fd,
            events.on_phase,
            hurry=cancel.urgent,
        )
        if gpu_info is not None:
            record = dataclasses.replace(record, gpu={**gpu_info, "after_mib": gpu.memory_used_mib()})
        return record

    def _settle_gpu(self, cancel: Cancel) -> dict[str, Any] | None:
        """Wait (bounded) until the GPUs' memory is back to where the run started."""
        if self.baseline is None:
            return None
        before, waited = gpu.wait_for_baseline(self.baseline, cancel.event)
        return {"baseline_mib": self.baseline, "before_mib": before, "settle_wait_s": round(waited, 3)}
