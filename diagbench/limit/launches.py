"""A pasted command line's launches through the scheduler: each a cell of one run directory,
launched `repeat` times by the executor the user chose (`--executor`, `--gpus`), its records
on disk before the next launch. What `limit` and `debug` share, as isolate's prober does for
its configurations. Core only: it never prints."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from diagbench.errors import UserError
from diagbench.execute.cancel import Cancel
from diagbench.execute.choice import place
from diagbench.execute.events import RunEvents
from diagbench.execute.plugin import Build
from diagbench.execute.scheduler import run_attempts
from diagbench.execute.slots import SlotPlan
from diagbench.isolate.pasted import split_command
from diagbench.isolate.prober import Interrupted, WriteFailed
from diagbench.isolate.problem import ServerRules, server_spec
from diagbench.jsonvalue import JSONObject
from diagbench.launch import host
from diagbench.launch.environment import attempt_environments
from diagbench.launch.preflight import preflight
from diagbench.logs.server_names import SERVERS, guess_server
from diagbench.records.build_manifest import build_manifest
from diagbench.records.manifest import RunSettings
from diagbench.records.record import AttemptRecord
from diagbench.records.redact import Redactor, spec_redactor
from diagbench.records.store import RunDir, open_new_run, open_run
from diagbench.spec.executor import LOCAL, ExecutorSpec
from diagbench.spec.gpus import GpuRequest
from diagbench.spec.load import Spec
from diagbench.spec.matrix import Cell
from diagbench.spec.plan import PlannedAttempt
from diagbench.triage.apply import Launch
from diagbench.triage.problem import server_word

__all__ = [
    "CommandLine",
    "Interrupted",
    "LaunchOptions",
    "Launcher",
    "WriteFailed",
    "check_launchable",
    "command_spec",
    "read_command",
]

PORT_FIX = "write {port} where it takes its port (each launch gets a free one), e.g. ... --port {port}"


@dataclass(frozen=True)
class LaunchOptions:
    runs_dir: Path = Path("runs")
    run_id: str | None = None
    repeat: int = 1  # launches of each cell
    parallel: int | None = None  # launches at once; None: one per GPU slot (one without GPUs)
    gpus: GpuRequest | None = None
    slots: SlotPlan | None = None  # resolved already (the CLI does, to show its notes first)
    executor: ExecutorSpec = field(default_factory=lambda: ExecutorSpec(LOCAL))


@dataclass(frozen=True)
class CommandLine:
    """A pasted command: its launch (argv with `{port}`, the variables it sets) and its server."""

    launch: Launch
    server: str | None  # given with --server, or read from the command


def read_command(command: str, server: str | None) -> CommandLine:
    """`NAME=value ... program args` as a launch; a usage error without `{port}`."""
    argv, env = split_command(command, (), "command")
    if not any("{port}" in word for word in (*argv, *(v for v in env.values() if v))):
        raise UserError(f"the command has no {{port}}: {PORT_FIX}")
    name = server_word("--server", server) if server else guess_server(argv)
    return CommandLine(Launch(argv, env), name)


def command_spec(word: str, cwd: Path, request: JSONObject, rules: ServerRules, server: str | None) -> Spec:
    """The spec a command records its request under; a server the log reader knows decides by
    its own ready lines."""
    serving = dataclasses.replace(server_spec(rules, cwd), kind=server if server in SERVERS else None)
    return Spec.of_request(word, f"diagbench {word} CMD", cwd, request, serving)


def check_launchable(spec: Spec, launch: Launch) -> None:
    """The program is there and the working directory too, or one usage error saying which:
    said before the run, rather than as a launch that decides nothing."""
    problems = preflight(spec.server, [Cell(0, "command", {}, tuple(launch.argv), dict(launch.env))])
    if problems:
        raise UserError(f"the command cannot start: {problems[0].message}")


class Launcher:
    """Cells of one run directory, each launched `repeat` times through the chosen executor."""

    def __init__(self, spec: Spec, options: LaunchOptions, events: RunEvents, cancel: Cancel, name: str):
        self.spec, self.options, self.events, self.cancel = spec, options, events, cancel
        placement = place(spec, options.executor, options.runs_dir, None)
        self.slots = options.slots or placement.slots(spec, None, options.gpus, options.parallel, options.repeat)
        self.cells: list[Cell] = []
        self.records: list[AttemptRecord] = []
        self.harness_errors: list[str] = []
        given = options.run_id
        self.run_dir: RunDir = open_run(options.runs_dir, given) if given else open_new_run(options.runs_dir, name)
        self.settings = RunSettings(
            repeat=options.repeat,
            parallel=options.parallel,
            gpus=tuple(self.slots.offer.ids),
            gpus_per_attempt=self.slots.per_attempt,
            slots=tuple(tuple(slot.gpus) for slot in self.slots.slots),
            executor=placement.to_json(),
        )
        self.facts = host.collect(spec.path.resolve().parent)
        self.environment: tuple[JSONObject | None, Mapping[str, JSONObject]] = (None, {})
        self.executor = placement.executor(Build(spec, self.run_dir, self.slots))
        self._write_manifest()
        events.on_open(self.run_dir, [])

    @property
    def secrets(self) -> Redactor:
        """What is secret in the command and every cell launched so far."""
        return spec_redactor(self._spec())

    def _spec(self) -> Spec:
        return dataclasses.replace(self.spec, cells=tuple(self.cells))

    def _write_manifest(self) -> None:
        """The manifest as it stands: rewritten with each new cell before it launches."""
        manifest = build_manifest(
            self._spec(), [], self.run_dir.path.name, self.settings, self.facts, None, self.environment
        )
        self.run_dir.write_manifest(manifest)

    def cell(self, cell_id: str, params: Mapping[str, str], launch: Launch) -> Cell:
        """A new cell of the run (its index is its place in the run: 0 first)."""
        return Cell(len(self.cells), cell_id, dict(params), tuple(launch.argv), dict(launch.env))

    def launch(self, cells: Sequence[Cell]) -> list[list[AttemptRecord]]:
        """Launch each cell `repeat` times (at once where the slots allow); their records, per
        cell. Interrupted (a signal) or WriteFailed (a full disk) once every record is written."""
        if self.cancel.is_set():
            raise Interrupted
        first = not self.cells
        self.cells.extend(c for c in cells if c not in self.cells)
        if first and cells:  # the server's interpreter and packages, as the first launch sees them
            self.environment = attempt_environments(self.spec.server, [PlannedAttempt(cells[0], 1)])
        self._write_manifest()
        todo = [PlannedAttempt(c, r) for c in cells for r in range(1, self.options.repeat + 1)]
        scheduled = run_attempts(
            todo, self.executor, self.slots.slots, self.run_dir, self.events, self.cancel, secrets=self.secrets
        )
        self.harness_errors.extend(scheduled.harness_errors)
        self.records.extend(scheduled.records)
        by_name = {r.attempt: r for r in scheduled.records}
        out = [[by_name[item.name] for item in todo if item.cell == cell and item.name in by_name] for cell in cells]
        if scheduled.write_error is not None:  # a full disk stopped it, not a signal
            raise WriteFailed(str(scheduled.write_error))
        if scheduled.interrupted:
            raise Interrupted
        return out

    def log(self, record: AttemptRecord) -> Path:
        return self.run_dir.cells / record.attempt / "server.log"
