"""The server's environment: its interpreter found from its command, asked once, in the manifest."""

from __future__ import annotations

import contextlib
import json
import os
import re
import stat
import subprocess
import sys
import time
from pathlib import Path

import jsonschema
import psutil
import pytest

from conftest import FAKE, write_spec
from diagbench.launch.environment import ask_all, ask_interpreter, identity, steering_variables
from diagbench.launch.helpers import HELPER_VAR
from diagbench.launch.interpreter import find_interpreter
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


def test_each_interpreter_is_asked_once_by_its_real_file_and_its_venv(tmp_path: Path) -> None:
    counted = tmp_path / "asked"
    python = executable(tmp_path / "python3", f'#!/bin/sh\necho >> {counted}\nexec {sys.executable} "$@"\n')
    (tmp_path / "again").symlink_to(python)
    first = ask_all([python, tmp_path / "again"])
    second = ask_all([python])
    assert counted.read_text() == "\n"  # one probe for the two paths of one file, and none the second time
    assert first[tmp_path / "again"]["interpreter"] == str(tmp_path / "again")
    assert second[python]["distributions"] == first[python]["distributions"]
    venv = tmp_path / "venv"
    (venv / "bin").mkdir(parents=True)
    (venv / "pyvenv.cfg").write_text("home = /usr/bin\n")
    (venv / "bin" / "python").symlink_to(python)
    assert identity(venv / "bin" / "python") != identity(python)  # a venv's link is its own interpreter


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


# -- the program door: a wrapper with a daemon, interpreters that hang, env -S ------------------


def daemon_wrapper(folder: Path, sleep_s: int = 120) -> Path:
    """A `python3` that starts a daemon holding its output open, then execs Python (finding 1)."""
    folder.mkdir(parents=True, exist_ok=True)
    return executable(folder / "python3", f'#!/bin/sh\nsetsid sleep {sleep_s} &\nexec {sys.executable} "$@"\n')


def test_a_wrapper_that_leaves_a_daemon_answers_at_once_and_leaves_nothing(tmp_path: Path) -> None:
    python = daemon_wrapper(tmp_path / "w")
    started = time.monotonic()
    facts = ask_interpreter(python, timeout=20)
    assert time.monotonic() - started < 10  # it answered in a second: its daemon's pipe is not waited on
    assert "error" not in facts and "torch" not in facts  # no torch here: no 'importing torch took over'
    assert any(d["name"] == "pytest" for d in facts["distributions"])
    assert not sleepers(120)


def sleepers(seconds: int) -> list[int]:
    found = []
    for proc in psutil.process_iter(["cmdline", "environ", "status"]):
        with contextlib.suppress(psutil.Error):
            if proc.info["status"] == psutil.STATUS_ZOMBIE:  # killed, waiting for a reaper that may never come
                continue
            if proc.info["cmdline"] == ["sleep", str(seconds)] and HELPER_VAR in (proc.info["environ"] or {}):
                found.append(proc.pid)
    return found


def test_a_run_under_the_wrapper_starts_at_once_and_its_manifest_is_right(runs, tmp_path: Path) -> None:
    python = daemon_wrapper(tmp_path / "w", 121)
    started = time.monotonic()
    command = [str(python), str(FAKE), "out=The server is fired up and ready to roll!", "hang"]
    result = runs.run(write_spec(tmp_path, {"command": command, "timeout": "20s"}))
    assert time.monotonic() - started < 30
    assert result.records[0].outcome == "ready"
    python_facts = json.loads((result.run_dir.path / "manifest.json").read_text())["environment"]["python"]
    assert "torch" not in python_facts and "error" not in python_facts
    assert not sleepers(121)


def test_interpreters_that_hang_are_asked_in_parallel_once_each_with_a_live_line(runs, tmp_path: Path) -> None:
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    hang = executable(tmp_path / "a" / "python3", "#!/bin/sh\nexec sleep 300\n")
    other = executable(tmp_path / "b" / "python3", "#!/bin/sh\nexec sleep 301\n")
    told: list[tuple[str, ...]] = []
    started = time.monotonic()
    facts = ask_all([hang, other, hang], timeout=3, waiting=lambda what, pending, s, limit: told.append(tuple(pending)))
    took = time.monotonic() - started
    assert 3 <= took < 5.5  # both at once: one deadline, not two
    assert facts[hang]["error"] == facts[other]["error"] == "no answer within 3 s"
    assert (str(hang), str(other)) in told or (str(other), str(hang)) in told  # said while it waited
    assert told[-1] == ()  # and said when it ended
    again = time.monotonic()
    assert ask_all([hang], timeout=3)[hang]["error"] == "no answer within 3 s"
    assert time.monotonic() - again < 1  # asked once per process
    spec = write_spec(tmp_path, {"command": [str(tmp_path / "b" / "python3"), "x.py"], "timeout": "5s"})
    runs.run(spec)  # the same interpreter, asked already: no wait, nothing said
    assert runs.helpers == []


def test_plan_says_what_it_waits_on(tmp_path: Path) -> None:
    (tmp_path / "h").mkdir()
    slow = executable(tmp_path / "h" / "python3", f'#!/bin/sh\nsleep 2.5\nexec {sys.executable} "$@"\n')
    spec = write_spec(tmp_path, {"command": [str(slow), "x.py"]})
    argv = [sys.executable, "-m", "diagbench", "plan", str(spec), "--environment"]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert re.search(rf"what it has installed: {re.escape(str(slow))} \(\d+s of at most 60s\)\n", done.stderr)
    assert re.search(r"asking the server's interpreter what it has installed: answered after \d+\.\ds\n", done.stderr)


def test_env_s_shebangs_name_the_interpreter_that_runs(tmp_path: Path) -> None:
    """`env -S PATH=...` puts another python3 first: that one runs, so that one is recorded;
    `env -S -u HOME python3` unsets a variable and still runs python3."""
    mine = tmp_path / "mine"
    mine.mkdir()
    other = executable(mine / "python3", f'#!/bin/sh\nexec {sys.executable} "$@"\n')
    script = executable(tmp_path / "serve", f"#!/usr/bin/env -S PATH={mine}:${{PATH}} python3 -u\nprint(1)\n")
    assert find_interpreter([str(script)], PATH, tmp_path) == other
    unset = executable(tmp_path / "serve2", "#!/usr/bin/env -S -u HOME python3\nprint(1)\n")
    found = find_interpreter([str(unset)], PATH, tmp_path)
    assert found is not None and found.name == "python3"
    assert find_interpreter(["env", "-i", f"PATH={mine}", "python3", "x.py"], PATH, tmp_path) == other
    assert find_interpreter(["env", "--unset=HOME", "-C", str(tmp_path), "./serve"], PATH, Path("/")) == other
    assert find_interpreter(["env"], PATH, tmp_path) is None
    assert find_interpreter(["env", "--no-such-option", "python3"], PATH, tmp_path) is None


def test_env_s_runs_record_the_interpreter_that_ran(runs, tmp_path: Path) -> None:
    mine = tmp_path / "mine"
    mine.mkdir()
    other = executable(mine / "python3", f'#!/bin/sh\nexec {sys.executable} "$@"\n')
    script = executable(tmp_path / "serve", f"#!/usr/bin/env -S PATH={mine}:${{PATH}} python3\n" + FAKE.read_text())
    result = runs.run(write_spec(tmp_path, {"command": [str(script), "out=ready", "exit=0"], "timeout": "20s"}))
    environment = json.loads((result.run_dir.path / "manifest.json").read_text())["environment"]
    assert environment["python"]["interpreter"] == str(other)
