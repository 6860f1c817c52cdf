"""`diagbench init CMD`: a starting spec that `plan` accepts as printed (issue 37)."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import yaml

from conftest import run_cli


def _init_then_plan(tmp_path: Path, command: str, *more: str, env: dict[str, str] | None = None) -> tuple[str, str]:
    made = run_cli("init", command, *more, cwd=tmp_path, env=env)
    assert made.returncode == 0, made.stderr
    spec = tmp_path / "spec.yaml"
    spec.write_text(made.stdout)
    planned = run_cli("plan", str(spec), cwd=tmp_path, env=env)
    assert planned.returncode == 0, planned.stderr + planned.stdout
    assert "warning" not in planned.stdout.replace("no port found", ""), planned.stdout
    return made.stdout, made.stderr


def test_a_plain_program_gets_its_port_as_placeholder_a_ready_rule_and_a_factor(tmp_path: Path) -> None:
    text, notes = _init_then_plan(tmp_path, "python3 -m http.server 8123")
    server = yaml.safe_load(text)["server"]
    assert server["command"] == ["python3", "-m", "http.server", "{port}"]
    assert server["ready"] == {"http": "/health"} and server["timeout"] == "5m"
    assert "check ready.http" in notes
    assert "MY_SETTING" in text


def test_a_known_server_gets_its_kind_its_port_option_and_no_secret(tmp_path: Path) -> None:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    vllm = bin_dir / "vllm"
    vllm.write_text("#!/bin/sh\nexit 0\n")
    vllm.chmod(vllm.stat().st_mode | stat.S_IXUSR)
    env = {"PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}"}
    token, key = "hf_0123456789abcdefghij", "sk-live-0123456789abcdef"
    text, notes = _init_then_plan(tmp_path, f"HF_TOKEN={token} vllm serve m --api-key {key}", env=env)
    assert token not in text and key not in text
    data = yaml.safe_load(text)
    assert data["server"]["kind"] == "vllm" and data["server"]["command"][-2:] == ["--port", "{port}"]
    assert data["matrix"]["eager"] == {"flag": "--enforce-eager", "values": [True, False]}  # YAML 1.1: on, off
    assert "HF_TOKEN looks like a secret" in notes and "<your secret>" in text


def test_a_given_port_option_becomes_the_placeholder_and_a_bad_server_is_one_message(tmp_path: Path) -> None:
    text, _ = _init_then_plan(tmp_path, "python3 -m http.server --port=9000", "--server", "sglang")
    assert '"--port={port}"' in text and "kind: sglang" in text and "--enable-torch-compile" in text
    bad = run_cli("init", "x", "--server", "nope", cwd=tmp_path)
    assert bad.returncode == 2 and "init --server nope: unknown server" in bad.stderr and "Traceback" not in bad.stderr
