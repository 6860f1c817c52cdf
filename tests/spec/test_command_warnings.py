"""A command that names its own port while diagbench hands out `{port}`, or a `$NAME` no shell
fills in, is warned about by `plan` and `run` before any launch, with a fix that is valid YAML."""

from __future__ import annotations

import re
from pathlib import Path

import yaml

from conftest import fake_command, run_cli, write_spec
from diagbench.execute.lint import fixed_port

HTTP_SERVER = "python3 -m http.server 8123"


def _fix(text: str) -> dict[str, object]:
    """The YAML a warning says to write, read as YAML."""
    snippets = re.findall(r"`([^`]*)`", text)
    assert snippets, text
    parsed = yaml.safe_load(snippets[0])
    assert isinstance(parsed, dict), snippets[0]
    return parsed


def test_plan_warns_of_a_fixed_port_and_its_fix_is_yaml_that_quiets_it(tmp_path: Path) -> None:
    spec = write_spec(tmp_path, {"command": HTTP_SERVER, "ready": {"http": "/"}})
    out = run_cli("plan", str(spec), columns=80)
    assert out.returncode == 0, out.stderr
    warning = out.stdout.split("warning: ", 1)[1].split("\n[", 1)[0]
    assert "server.command has no {port}" in warning and "listens on 8123" in warning
    fix = _fix(" ".join(warning.split()))
    assert fix == {"command": "python3 -m http.server {port}"}
    fixed = write_spec(tmp_path, {"command": fix["command"], "ready": {"http": "/"}})
    assert "warning" not in run_cli("plan", str(fixed)).stdout
    assert (
        "warning"
        not in run_cli(
            "plan", str(write_spec(tmp_path, {"command": HTTP_SERVER, "port": 8123, "ready": {"http": "/"}}))
        ).stdout
    )


def test_a_literal_dollar_name_without_a_shell_is_warned_and_not_with_one(tmp_path: Path) -> None:
    spec = write_spec(tmp_path, {"command": "python3 -m http.server --port $PORT", "ready": {"http": "/"}})
    out = run_cli("plan", str(spec))
    assert out.returncode == 0, out.stderr
    assert "server.command passes $PORT to the server as written" in out.stdout
    assert "Write `{port}` for the port diagbench hands out" in out.stdout
    assert _fix(out.stdout.split("server.command has no {port}")[1]) == {
        "command": "python3 -m http.server --port {port}"
    }
    shell = write_spec(
        tmp_path, {"command": "exec python3 -m http.server {port} # $HOME", "shell": True, "ready": {"http": "/"}}
    )
    assert "warning" not in run_cli("plan", str(shell)).stdout


def test_the_ready_warning_fix_is_valid_yaml(tmp_path: Path) -> None:
    out = run_cli("plan", str(write_spec(tmp_path, {"command": fake_command("hang")})))
    warning = " ".join(out.stdout.split("warning: ", 1)[1].split())
    for snippet in re.findall(r"`([^`]*)`", warning):
        assert isinstance(yaml.safe_load(snippet), dict), snippet


def test_run_warns_before_the_first_launch(tmp_path: Path) -> None:
    command = [*fake_command("out=up", "hang"), "--port", "8123"]
    spec = write_spec(tmp_path, {"command": command, "ready": {"log": "up"}})
    out = run_cli("run", str(spec), "--runs-dir", str(tmp_path / "runs"))
    assert out.returncode == 0, out.stderr
    assert out.stderr.startswith("diagbench: warning: server.command has no {port}"), out.stderr


def test_a_program_that_listens_nowhere_needs_no_port(tmp_path: Path) -> None:
    assert (
        "warning"
        not in run_cli(
            "plan", str(write_spec(tmp_path, {"command": fake_command("hang"), "ready": {"log": "x"}}))
        ).stdout
    )
    assert fixed_port(("vllm", "serve", "m", "--port=9000")) == "9000"
    assert fixed_port(("python3", "-m", "http.server", "8123")) == "8123"
    assert fixed_port(("python3", "x.py", "--steps", "80")) is None
