"""`{bin:NAME}`: a spec names an installed server program, found on the machine that launches
(`$DIAGBENCH_BIN_<NAME>`, else PATH). `plan` works without it (a note); `run` stops with one
line saying how to provide it; the record holds the path that ran."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from conftest import run_cli
from diagbench.errors import SpecError
from diagbench.launch.programs import variable
from diagbench.spec.load import load_spec

READY = "The server is fired up and ready to roll!"
AXIS = "matrix:\n  n: {env: N, values: ['1']}\n"


def fake_server(folder: Path, name: str) -> Path:
    """A program called `name` that prints the ready line and waits (a real process)."""
    folder.mkdir(exist_ok=True)
    program = folder / name
    program.write_text(f"#!{sys.executable}\nprint({READY!r}, flush=True)\nimport time; time.sleep(30)\n")
    program.chmod(0o755)
    return program


def spec(tmp_path: Path, command: str = "{bin:my-server} --port {port}") -> Path:
    path = tmp_path / "spec.yaml"
    path.write_text(f"name: x\nserver:\n  command: {json.dumps(command)}\n  timeout: 10s\n  grace: 1s\n" + AXIS)
    return path


def without(name: str) -> dict[str, str]:
    return {variable(name): "", "PATH": "/nonexistent"}


def test_the_variable_is_named_after_the_program() -> None:
    assert variable("vllm") == "DIAGBENCH_BIN_VLLM"
    assert variable("llama-server") == "DIAGBENCH_BIN_LLAMA_SERVER"


def test_a_missing_program_is_a_note_in_plan_and_the_argv_names_it(tmp_path: Path) -> None:
    spec(tmp_path)
    proc = run_cli("plan", "spec.yaml", cwd=tmp_path, env=without("my-server"))
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr == (
        "diagbench: note: my-server is not installed here: {bin:my-server} in server.command is"
        " $DIAGBENCH_BIN_MY_SERVER, or else my-server on PATH; install my-server, or set"
        " DIAGBENCH_BIN_MY_SERVER to its path; `diagbench run` stops here until then\n"
    )
    assert "argv: my-server --port {port}" in proc.stdout


def test_a_missing_program_stops_the_run_with_one_line(tmp_path: Path) -> None:
    spec(tmp_path)
    proc = run_cli("run", "spec.yaml", cwd=tmp_path, env=without("my-server"))
    assert proc.returncode == 2
    assert proc.stderr == (
        "diagbench: my-server is not installed here: {bin:my-server} in server.command is"
        " $DIAGBENCH_BIN_MY_SERVER, or else my-server on PATH; install my-server, or set"
        " DIAGBENCH_BIN_MY_SERVER to its path; every cell would end launch_error\n"
    )
    assert not (tmp_path / "runs").exists()


def test_the_variable_names_the_program_and_the_record_holds_its_path(tmp_path: Path) -> None:
    program = fake_server(tmp_path / "elsewhere", "my-server")
    spec(tmp_path)
    env = {variable("my-server"): str(program), "PATH": "/nonexistent"}
    planned = run_cli("plan", "spec.yaml", "--json", cwd=tmp_path, env=env)
    assert planned.returncode == 0, planned.stderr
    assert json.loads(planned.stdout)["cells"][0]["argv"] == [str(program), "--port", "{port}"]
    ran = run_cli("run", "spec.yaml", "--run-id", "r", cwd=tmp_path, env=env)
    assert ran.returncode == 0, ran.stderr
    record = json.loads(next((tmp_path / "runs" / "r" / "cells").glob("*/result.json")).read_text())
    assert record["outcome"] == "ready"
    assert record["command"][0] == str(program)


def test_without_the_variable_the_program_is_found_on_path(tmp_path: Path) -> None:
    program = fake_server(tmp_path / "bin", "my-server")
    spec(tmp_path)
    proc = run_cli("plan", "spec.yaml", "--json", cwd=tmp_path, env={"PATH": str(program.parent)})
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["cells"][0]["argv"][0] == str(program)


def test_a_variable_pointing_at_nothing_is_named(tmp_path: Path) -> None:
    spec(tmp_path)
    proc = run_cli("run", "spec.yaml", cwd=tmp_path, env={variable("my-server"): str(tmp_path / "gone")})
    assert proc.returncode == 2
    assert proc.stderr.startswith(
        f"diagbench: DIAGBENCH_BIN_MY_SERVER={tmp_path / 'gone'} is not an executable file"
        " ({bin:my-server} in server.command): fix or unset it"
    )


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("command: '{bin:/opt/vllm} serve'", "'{bin:/opt/vllm}': expected a program name"),
        ("command: '{bin:} serve'", "'{bin:}': expected a program name"),
        ("command: x\n  env: {A: '{bin:vllm}'}", "'{bin:vllm}' cannot be filled here"),
    ],
)
def test_a_bad_program_placeholder_is_a_spec_error(tmp_path: Path, text: str, message: str) -> None:
    path = tmp_path / "spec.yaml"
    path.write_text(f"name: x\nserver:\n  {text}\n" + AXIS)
    with pytest.raises(SpecError) as caught:
        load_spec(path)
    assert message in str(caught.value)
