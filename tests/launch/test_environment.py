"""The server's environment: its interpreter found from its command, asked once, in the manifest."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from pathlib import Path

import jsonschema
import pytest

from conftest import FAKE, write_spec
from diagbench.launch.environment import (
    EnvironmentCache,
    ask_interpreter,
    find_interpreter,
    steering_variables,
)
from diagbench.schemas import load_schema
from diagbench.sensitive import REDACTED

PATH = {"PATH": os.environ["PATH"]}


def executable(path: Path, text: str) -> Path:
    path.write_text(text)
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return path


def test_the_interpreter_is_argv0_its_shebang_or_its_venv(tmp_path: Path) -> None:
    python = Path(sys.executable)
    assert find_interpreter([sys.executable, "x.py"], PATH, tmp_path) == python
    script = executable(tmp_path / "serve", f"#!{sys.executable}\nprint('hi')\n")
    assert find_interpreter([str(script)], PATH, tmp_path) == python
    via_env = executable(tmp_path / "serve2", "#!/usr/bin/env -S python3 -u\n")
    found = find_interpreter(["./serve2"], PATH, tmp_path)
    assert via_env.exists() and found is not None and found.name == "python3"
    venv = tmp_path / "venv"
    (venv / "bin").mkdir(parents=True)
    (venv / "pyvenv.cfg").write_text("home = /usr/bin\n")
    (venv / "bin" / "python").symlink_to(sys.executable)
    binary = executable(venv / "bin" / "launcher", "\x7fELF not a script")
    assert find_interpreter([str(binary)], PATH, tmp_path) == venv / "bin" / "python"
    assert find_interpreter(["sh", "-c", "true"], PATH, tmp_path) is None
    assert find_interpreter(["no-such-program"], PATH, tmp_path) is None


def test_the_interpreter_says_what_it_has_installed_and_where_from() -> None:
    facts = ask_interpreter(Path(sys.executable))
    by_name = {d["name"].lower(): d for d in facts["distributions"]}
    assert facts["python"] == sys.version.split()[0]
    assert by_name["diagbench"]["origin"]["kind"] == "local"  # installed with pip -e .
    assert by_name["diagbench"]["origin"]["editable"] is True
    assert by_name["pytest"]["origin"] == {"kind": "index"}
    assert by_name["pytest"]["version"] == pytest.__version__


def test_an_interpreter_that_does_not_answer_is_an_error_not_a_wait(tmp_path: Path) -> None:
    slow = executable(tmp_path / "python", "#!/bin/sh\nexec sleep 30\n")
    facts = ask_interpreter(slow, timeout=0.5)
    assert facts["interpreter"] == str(slow)
    assert facts["error"] == "no answer within 0 s"  # 0.5 s, shown to the second
    broken = executable(tmp_path / "python3", "#!/bin/sh\necho 'boom: no such module' >&2\nexit 1\n")
    assert ask_interpreter(broken)["error"] == "boom: no such module"


def test_steering_variables_are_kept_and_their_secrets_blanked() -> None:
    env = {"CUDA_VISIBLE_DEVICES": "0,1", "HF_TOKEN": "hf_abcdefghijklmnop", "HOME": "/root", "NCCL_DEBUG": "INFO"}
    assert steering_variables(env) == {"CUDA_VISIBLE_DEVICES": "0,1", "HF_TOKEN": REDACTED, "NCCL_DEBUG": "INFO"}


def test_each_interpreter_is_asked_once(tmp_path: Path) -> None:
    cache = EnvironmentCache()
    first = cache.of([sys.executable, "a.py"], PATH, tmp_path)
    second = cache.of([sys.executable, "b.py"], {**PATH, "NCCL_DEBUG": "WARN"}, tmp_path)
    assert len(cache.asked) == 1
    assert first["python"] is second["python"]
    assert second["variables"] == {"NCCL_DEBUG": "WARN"}


def test_the_manifest_records_the_environment_and_each_attempt_that_differs(runs, tmp_path: Path) -> None:
    server = {"command": [sys.executable, str(FAKE), "ready"], "env": {"TORCH_LOGS": "+dynamo"}}
    matrix = {"debug": {"env": "NCCL_DEBUG", "values": ["unset", "INFO"]}}
    result = runs.run(write_spec(tmp_path, server, matrix))
    manifest = json.loads((result.run_dir.path / "manifest.json").read_text())
    jsonschema.validate(manifest, load_schema("manifest"))
    environment = manifest["environment"]
    assert environment["python"]["interpreter"] == sys.executable
    assert any(d["name"] == "diagbench" for d in environment["python"]["distributions"])
    assert environment["variables"]["TORCH_LOGS"] == "+dynamo"
    assert "NCCL_DEBUG" not in environment["variables"]
    plain, debug = manifest["attempts"]
    assert "environment" not in plain
    assert debug["environment"]["variables"]["NCCL_DEBUG"] == "INFO"


def test_plan_shows_the_environment_when_asked(tmp_path: Path) -> None:
    spec = write_spec(
        tmp_path, {"command": [sys.executable, str(FAKE), "ready"], "env": {"VLLM_LOGGING_LEVEL": "DEBUG"}}
    )
    argv = [sys.executable, "-m", "diagbench", "plan", str(spec), "--environment"]
    text = subprocess.run(argv, capture_output=True, text=True, timeout=60)
    assert text.returncode == 0, text.stderr
    assert f"server interpreter: {sys.executable} (Python {sys.version.split()[0]}" in text.stdout
    assert "VLLM_LOGGING_LEVEL=DEBUG" in text.stdout
    assert f"  pytest=={pytest.__version__}\n" in text.stdout
    data = json.loads(subprocess.run([*argv, "--json"], capture_output=True, text=True, timeout=60).stdout)
    assert data["environment"]["variables"]["VLLM_LOGGING_LEVEL"] == "DEBUG"
    plain = subprocess.run(argv[:-1], capture_output=True, text=True, timeout=60).stdout
    assert "server interpreter" not in plain


FAKE_TORCH = """
import os, time
time.sleep(float(os.environ.get("FAKE_TORCH_IMPORT_S", "0")))
__version__ = "2.11.0+cu128"
class version:
    cuda = "12.8"
class _nccl:
    @staticmethod
    def version():
        return (2, 27, 3)
class cuda:
    nccl = _nccl
    @staticmethod
    def is_available():
        return True
    @staticmethod
    def device_count():
        return 2
    @staticmethod
    def get_device_name(i):
        return "NVIDIA H200"
"""


def torch_venv(folder: Path) -> Path:
    """A real venv with a stand-in `torch` (a module and its dist-info): torch's answers without a GPU."""
    import venv

    venv.EnvBuilder(with_pip=False, symlinks=True).create(folder)
    site = next((folder / "lib").glob("python*/site-packages"))
    (site / "torch").mkdir()
    (site / "torch" / "__init__.py").write_text(FAKE_TORCH)
    info = site / "torch-2.11.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: torch\nVersion: 2.11.0\n")
    return folder / "bin" / "python"


def test_torch_reports_cuda_nccl_and_the_gpus_and_a_slow_import_costs_only_those(tmp_path: Path, monkeypatch) -> None:
    python = torch_venv(tmp_path / "v")
    facts = ask_interpreter(python)
    assert facts["torch"] == {
        "torch": "2.11.0+cu128",
        "cuda_runtime": "12.8",
        "gpus": ["NVIDIA H200", "NVIDIA H200"],
        "nccl": "2.27.3",
    }
    assert [d["name"] for d in facts["distributions"]] == ["torch"]
    monkeypatch.setenv("FAKE_TORCH_IMPORT_S", "30")  # -I ignores PYTHON* variables, not this one
    slow = ask_interpreter(python, timeout=1.0)
    assert slow["torch"] == {"error": "importing torch took over 1 s"}
    assert [d["name"] for d in slow["distributions"]] == ["torch"]


def test_a_vcs_origin_is_recorded_with_its_commit_and_without_its_token(runs, tmp_path: Path) -> None:
    python = torch_venv(tmp_path / "v")
    site = next((tmp_path / "v" / "lib").glob("python*/site-packages"))
    info = site / "myserver-0.3.dev1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: myserver\nVersion: 0.3.dev1\n")
    url = "https://deploy:ghp_0123456789abcdefghijklmnopqrstuvwxyz@github.com/acme/myserver"
    direct = {"url": url, "vcs_info": {"vcs": "git", "commit_id": "0f1e2d3c4b5a69788796a5b4c3d2e1f0a1b2c3d4"}}
    (info / "direct_url.json").write_text(json.dumps(direct))
    result = runs.run(write_spec(tmp_path, {"command": [str(python), str(FAKE), "ready"]}))
    text = (result.run_dir.path / "manifest.json").read_text()
    assert "ghp_0123456789" not in text
    dists = {d["name"]: d for d in json.loads(text)["environment"]["python"]["distributions"]}
    origin = dists["myserver"]["origin"]
    assert (origin["kind"], origin["vcs"], origin["commit"]) == (
        "vcs",
        "git",
        "0f1e2d3c4b5a69788796a5b4c3d2e1f0a1b2c3d4",
    )
    assert origin["url"].endswith("@github.com/acme/myserver")
