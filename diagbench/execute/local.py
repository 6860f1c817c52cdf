"""The local executor: each attempt is a process tree on this host."""

from __future__ import annotations

import dataclasses
import socket
from typing import Any

from diagbench.execute.cancel import Cancel
from diagbench.execute.events import RunEvents
from diagbench.execute.slots import Slot
from diagbench.launch import gpu
from diagbench.launch.attempt import run_attempt
from diagbench.logs.scan import Scanner
from diagbench.records.record import AttemptRecord
from diagbench.records.store import RunDir
from diagbench.spec.load import ServerSpec
from diagbench.spec.plan import PlannedAttempt


class LocalExecutor:
    """Launches, watches and tears down each attempt on this host, with the shared scanner."""

    def __init__(self, server: ServerSpec, run_dir: RunDir, tag_prefix: str):
        self.server, self.run_dir, self.tag_prefix = server, run_dir, tag_prefix
        self.scanner = Scanner(server.signatures)
        self.baseline = gpu.memory_used_mib()

    def run(self, item: PlannedAttempt, slot: Slot, cancel: Cancel, events: RunEvents) -> AttemptRecord:
        gpu_info = self._settle_gpu(cancel)
        events.on_start(item, slot)
        record = run_attempt(
            item,
            self.server,
            self.run_dir.attempt_dir(item.name),
            self.scanner,
            f"{self.tag_prefix}/{item.name}",
            cancel.read_fd,
            events.on_phase,
        )
        if gpu_info is not None:
            record = dataclasses.replace(record, gpu={**gpu_info, "after_mib": gpu.memory_used_mib()})
        return dataclasses.replace(record, executor={"kind": "local", "job_id": None, "node": socket.gethostname()})

    def _settle_gpu(self, cancel: Cancel) -> dict[str, Any] | None:
        """Wait (bounded) until the GPUs' memory is back to where the run started."""
        if self.baseline is None:
            return None
        before, waited = gpu.wait_for_baseline(self.baseline, cancel.event)
        return {"baseline_mib": self.baseline, "before_mib": before, "settle_wait_s": round(waited, 3)}
