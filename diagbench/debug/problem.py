"""What a debug run launches: the pasted command, its server, the debug sets known, and
whether wrappers (compute-sanitizer) may be used; recorded under a spec for the manifest."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from diagbench.debug.sets import DebugCatalogue, load_sets
from diagbench.isolate.factors import Config, shown_command
from diagbench.isolate.problem import ServerRules
from diagbench.jsonvalue import JSON
from diagbench.limit.launches import command_spec, read_command
from diagbench.spec.load import Spec
from diagbench.triage.apply import Launch

__all__ = ["DebugProblem", "from_command"]


@dataclass(frozen=True)
class DebugProblem:
    spec: Spec
    launch: Launch
    server: str | None  # given (--server) or read from the command; else detected from the log
    catalogue: DebugCatalogue
    wrappers: bool = False  # --sanitizer: sets that run the command under a tool may be used

    def shown(self, launch: Launch | None = None) -> str:
        return (launch or self.launch).shown()


def from_command(
    command: str, server: str | None, rules: ServerRules, sets: Sequence[Path], wrappers: bool, cwd: Path
) -> DebugProblem:
    pasted = read_command(command, server)
    catalogue = load_sets(sets)
    entry: dict[str, JSON] = {
        "command": shown_command(Config(pasted.launch.argv, pasted.launch.env, {})),
        "server": pasted.server,
    }
    entry |= {"debug_sets": [str(p) for p in sets], "sanitizer": wrappers, "ready": rules.ready, "http": rules.http}
    spec = command_spec("debug", cwd, entry, rules, pasted.server)
    return DebugProblem(spec, pasted.launch, pasted.server, catalogue, wrappers)
