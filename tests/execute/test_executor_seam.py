"""The executor seam is open: a kind is one plugin, and nothing outside the plugins and the
registry names one. A plugin's own spec keys and options reach it, and come back on resume."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from conftest import Runs, fake_command, write_spec
from diagbench.errors import UserError
from diagbench.execute.choice import requested
from diagbench.execute.executors import kinds, register, unregister
from diagbench.execute.fake import FakePlugin
from diagbench.execute.plugin import ExecutorOption
from diagbench.spec.executor import LOCAL, ExecutorKey, ExecutorSpec, KeyType, command_line_settings
from diagbench.spec.load import load_spec

PACKAGE = Path(__file__).resolve().parents[2] / "diagbench"
ZONE = ExecutorKey("zone", KeyType.STRING, "a zone name")
WAIT = ExecutorKey("wait", KeyType.DURATION, "a wait")


@dataclass
class ToyPlugin(FakePlugin):
    """A third kind, as a user would add one: its own keys and options, nothing else touched."""

    kind: str = "toy"
    keys: tuple[ExecutorKey, ...] = (ZONE, WAIT)
    options: tuple[ExecutorOption, ...] = (ExecutorOption("--toy-zone", "zone", "Z", "where the toy runs"),)


@pytest.fixture
def toy() -> Iterator[None]:
    register(ToyPlugin(lambda item: "READY\n"))
    yield
    unregister("toy")


def naming_modules() -> set[str]:
    """The modules outside the plugins' own folders that name a kind other than local. The log
    readers (logs/) are left out: there `Ray` names who wrote a line (`(RayWorkerWrapper pid=7)`),
    a log format the servers write however they were started, not an executor."""
    names = [k for k in kinds() if k != LOCAL]
    word = re.compile(r"\b(" + "|".join(map(re.escape, names)) + r")\b", re.IGNORECASE)
    found = set()
    for path in PACKAGE.rglob("*.py"):
        room = path.relative_to(PACKAGE).parts
        if room[0] == "logs" or (room[0] == "execute" and len(room) > 2 and room[1] in names):
            continue
        if word.search(path.read_text(encoding="utf-8")):
            found.add("/".join(room))
    return found


def test_the_core_names_no_executor_only_the_registry_does() -> None:
    assert {"slurm"} <= set(kinds())
    found = naming_modules()
    assert "execute/executors.py" in found
    assert len(found) <= 3, sorted(found)
    assert found == {"execute/executors.py"}, "a module outside the plugins names a kind: move it into its plugin"


def test_a_new_plugins_spec_keys_and_options_reach_it_typed_and_located(tmp_path: Path, toy: None) -> None:
    spec = load_spec(write_spec(tmp_path, {"command": fake_command()}, executor={"kind": "toy", "wait": "90s"}))
    layers = requested(spec, command_line_settings(None, {"zone": ("--toy-zone", "eu-1")}), None)
    assert (layers.kind, layers.read(ZONE), layers.read(WAIT)) == ("toy", "eu-1", 90.0)
    bad = load_spec(write_spec(tmp_path, {"command": fake_command()}, executor={"kind": "toy", "wait": "later"}))
    with pytest.raises(UserError, match=r'spec.yaml:\d+: executor.wait: expected a positive duration .* got "later"$'):
        requested(bad, ExecutorSpec(), None)
    with pytest.raises(UserError, match=r"^--toy-zone applies to --executor toy"):
        requested(
            load_spec(write_spec(tmp_path, {"command": fake_command()})),
            command_line_settings(None, {"zone": ("--toy-zone", "eu-1")}),
            None,
        )


def test_a_new_plugins_settings_are_recorded_and_come_back_on_resume(tmp_path: Path, toy: None) -> None:
    runs = Runs(tmp_path)
    spec_path = write_spec(tmp_path, {"command": fake_command()}, executor={"kind": "toy", "wait": "90s"})
    given = command_line_settings(None, {"zone": ("--toy-zone", "eu-1")})
    result = runs.run(spec_path, executor=given)
    manifest = json.loads((result.run_dir.path / "manifest.json").read_text())
    assert manifest["options"]["executor"] == {"kind": "toy", "wait": "90s", "zone": "eu-1", "in_process": True}
    again = requested(load_spec(spec_path), ExecutorSpec(), result.run_dir.path)
    assert (again.kind, again.read(ZONE), again.read(WAIT)) == ("toy", "eu-1", 90.0)


def test_the_worker_command_dispatches_through_the_registry(tmp_path: Path, run_cli) -> None:
    out = run_cli("worker", "--kind", "local", str(tmp_path), "001-a-r1")
    assert out.returncode == 2
    assert out.stderr.strip() == "diagbench: executor 'local' runs no worker: its attempts run where diagbench runs"
    unknown = run_cli("worker", "--kind", "nope", str(tmp_path), "001-a-r1")
    assert unknown.returncode == 2 and "unknown executor 'nope'" in unknown.stderr


def test_an_attempt_spanning_nodes_needs_a_kind_that_places_nodes(tmp_path: Path) -> None:
    spec = load_spec(write_spec(tmp_path, {"command": fake_command(), "nodes": 2}))
    with pytest.raises(UserError) as caught:
        requested(spec, ExecutorSpec(), None)
    assert str(caught.value) == (
        "server.nodes: 2: --executor local runs each attempt on one host; an attempt that spans nodes needs "
        "--executor slurm or --executor ray"
    )
    bad = write_spec(tmp_path, {"command": fake_command(), "nodes": 0})
    with pytest.raises(
        UserError, match=r'spec.yaml:\d+: server.nodes: expected a number of nodes \(1 or more\), got "0"$'
    ):
        load_spec(bad)
