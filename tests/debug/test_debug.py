"""`diagbench debug` and `triage --debug` with real processes: tests/ruleserver.py prints a vague
error normally and a sharp one under the debug variables (the frame of the kernel's launch under
CUDA_LAUNCH_BLOCKING=1, NCCL's WARN line under NCCL_DEBUG=INFO), or ignores them. Every test
checks that no process of the run is left and that the records match their schemas."""

from __future__ import annotations

import json
import shlex
import signal
import subprocess
import sys
from pathlib import Path

import jsonschema
import pytest

from conftest import diagbench_argv, run_cli, wait_gone, wait_until
from diagbench.debug.problem import from_command
from diagbench.debug.record import Debug, Status, read_debug
from diagbench.debug.run import debug
from diagbench.execute.events import QuietEvents
from diagbench.isolate.problem import ServerRules
from diagbench.limit.launches import LaunchOptions
from diagbench.schemas import load_schema

SERVER = f"{shlex.quote(sys.executable)} {Path(__file__).parents[1] / 'ruleserver.py'} --port {{port}}"
RULES = ServerRules(ready="fired up and ready", timeout=20.0, grace=2.0)
SHARP = "'--rule=CUDA_LAUNCH_BLOCKING=1=>illegal-sharp' '--rule==>illegal'"


def assert_schemas_hold(run_dir: Path) -> None:
    for name, path in (("debug", "debug.json"), ("manifest", "manifest.json"), ("verdicts", "verdicts.json")):
        jsonschema.validate(json.loads((run_dir / path).read_text()), load_schema(name))
    for result in run_dir.glob("cells/*/result.json"):
        jsonschema.validate(json.loads(result.read_text()), load_schema("result"))


@pytest.fixture
def debugs(tmp_path: Path):
    run_dirs: list[Path] = []

    def run(rules: str, sets: tuple[Path, ...] = (), sanitizer: bool = False, env: str = "") -> Debug:
        problem = from_command(f"{env} {SERVER} {rules}".strip(), None, RULES, sets, sanitizer, tmp_path)
        result = debug(problem, LaunchOptions(tmp_path / "runs"), QuietEvents())
        run_dirs.append(result.run_dir.path)
        assert read_debug(result.run_dir.path) == result.debug
        return result.debug

    yield run
    for run_dir in run_dirs:
        wait_gone(run_dir)
        assert_schemas_hold(run_dir)


def test_launch_blocking_names_the_kernels_launch_beside_the_vague_error(debugs):
    found = debugs(SHARP)
    assert (found.status, found.failure_class) == (Status.SHARPER, "illegal_memory_access")
    assert [(s.change, s.set) for s in found.settings] == [
        ("+ CUDA_LAUNCH_BLOCKING=1", "cuda.launch-blocking"),
        ("+ TRITON_DEBUG=1", "triton.debug"),
    ]
    assert "CUDA_LAUNCH_BLOCKING=1" in found.settings[0].source and "get_cuda_check_suffix" in found.settings[0].source
    assert found.before is not None and found.after is not None
    assert found.before.line == found.after.line == "RuntimeError: CUDA error: an illegal memory access was encountered"
    assert found.sharper is not None
    assert (found.sharper.kind, found.sharper.text) == (
        "frame",
        'File "kernels/paged_attention.py", line 42, in forward',
    )
    assert (
        found.sharper.why == "the failure is raised at another place: kernels/paged_attention.py:42 (was engine.py:120)"
    )
    assert found.debug_command is not None and found.debug_command.startswith("CUDA_LAUNCH_BLOCKING=1 TRITON_DEBUG=1 ")
    assert Status.SHARPER.exit_code == 0


def test_ncclS_warn_line_is_the_sharper_line(debugs):
    found = debugs("'--rule=NCCL_DEBUG=INFO=>nccl-info' '--rule==>nccl'")
    assert found.status is Status.SHARPER and found.failure_class == "nccl"
    assert "+ NCCL_DEBUG=INFO" in [s.change for s in found.settings]
    assert found.sharper is not None and (found.sharper.kind, found.sharper.set) == ("found", "nccl.debug-info")
    assert found.sharper.text.endswith(
        "misc/socket.cc:484 NCCL WARN socketStartConnect: Connect to 10.0.0.2<43127> failed : Software caused connection abort"
    )


def test_a_command_that_ignores_the_variables_fails_the_same_and_is_said_so(debugs):
    found = debugs("'--rule==>illegal'")
    assert found.status is Status.SAME and found.sharper is None and found.status.exit_code == 0
    assert found.reason == "the debug launch failed, but its log names no place the first one did not"
    assert "the same deciding line with and without the settings: does the server read them?" in found.notes


def test_a_failure_that_goes_away_with_the_settings_decides_no_line(debugs):
    found = debugs("'--rule=CUDA_LAUNCH_BLOCKING=1=>none' '--rule==>illegal'")  # no such class: it comes up
    assert found.status is Status.UNDECIDED and found.status.exit_code == 1
    assert found.after is not None and found.after.outcome == "ready"
    assert "with the debug settings it came up: the failure depends on timing or on what they change" in found.notes


def test_a_command_that_comes_up_or_a_failure_no_setting_is_known_for_exits_1(debugs):
    up = debugs("")
    assert (up.status, up.after, up.debug_command) == (Status.COMES_UP, None, None)
    oom = debugs("'--rule==>oom'")
    assert oom.status is Status.NO_SETTINGS and oom.status.exit_code == 1 and oom.after is None
    assert oom.reason.startswith("no debug setting is known for failed:oom of an unknown server")


def test_a_users_set_with_its_own_line_and_a_wrapper(debugs, tmp_path: Path):
    tool = tmp_path / "bin" / "fake-sanitizer"
    tool.parent.mkdir()
    # a wrapper as compute-sanitizer is one: it runs the command and reports on it
    tool.write_text(
        f"#!{sys.executable}\nimport subprocess, sys\nprint('========= Invalid __global__ read of size 4 bytes', flush=True)\nsys.exit(subprocess.call(sys.argv[1:]))\n"
    )
    tool.chmod(0o755)
    sets = tmp_path / "sets.yaml"
    sets.write_text(
        "server: any\nsets:\n"
        f"  - {{id: team.sanitizer, for: [illegal_memory_access], wrap: [{tool}], finds: ['^=+ +Invalid '], source: our runbook, why: the first bad access}}\n"
    )
    without = debugs("'--rule==>illegal'", sets=(sets,))
    assert "team.sanitizer: a wrapper, launched only with --sanitizer" in without.notes
    found = debugs("'--rule==>illegal'", sets=(sets,), sanitizer=True)
    assert found.status is Status.SHARPER and found.sharper is not None
    assert (found.sharper.set, found.sharper.text) == (
        "team.sanitizer",
        "========= Invalid __global__ read of size 4 bytes",
    )
    assert f"+ wrap: {tool}" in [s.change for s in found.settings]


def test_secrets_in_the_command_never_reach_debug_json(debugs):
    found = debugs(SHARP, env="MY_SVC_KEY=hunter2-very-secret-value HF_TOKEN=hf_abcdefghijklmnopqrstuvwxyz0123")
    text = json.dumps(found.to_json())
    assert "hunter2-very-secret-value" not in text and "hf_abcdefghijklmnopqrstuvwxyz0123" not in text


def test_ctrl_c_in_the_debug_launch_keeps_the_first_and_the_settings_and_exits_130(tmp_path: Path):
    command = f"{SERVER} '--rule=CUDA_LAUNCH_BLOCKING=1=>hang' '--rule==>illegal'"  # the debug launch hangs
    argv = diagbench_argv("debug", command, "--ready", "fired up", "--run-id", "c", "--grace", "2s")
    proc = subprocess.Popen(argv, cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    run = tmp_path / "runs" / "c"
    wait_until(lambda: list(run.glob("cells/001-*/server.log")), what="the debug launch")
    wait_until(lambda: "Load weight begin" in next(run.glob("cells/001-*/server.log")).read_text())
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    found = read_debug(run)
    assert found is not None and found.status is Status.INTERRUPTED and found.after is None
    assert found.before is not None and found.before.failure_class == "illegal_memory_access"
    assert [s.change for s in found.settings] == ["+ CUDA_LAUNCH_BLOCKING=1", "+ TRITON_DEBUG=1"]
    wait_gone(run)
    assert_schemas_hold(run)


def test_the_cli_prints_debug_json_and_report_renders_it(tmp_path: Path):
    done = run_cli("debug", f"{SERVER} {SHARP}", "--ready", "fired up", "--json", "--run-id", "d", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    found = json.loads(done.stdout)
    assert found["status"] == "sharper" and found["class"] == "illegal_memory_access"
    run = tmp_path / "runs" / "d"
    wait_gone(run)
    for fmt, wanted in (
        ("table", "sharper: L7:"),
        ("md", "### Debug: the debug launch says more"),
        ("json", '"debug": {'),
    ):
        shown = run_cli("report", str(run), "--format", fmt, cwd=tmp_path)
        assert shown.returncode == 0 and wanted in shown.stdout, shown.stdout
    issue = run_cli("report", str(run), "--format", "issue", cwd=tmp_path)
    assert issue.returncode == 0 and "### With debugging on" in issue.stdout
    assert "kernels/paged_attention.py" in issue.stdout
    assert "Debug: the debug launch says more" in (run / "report.html").read_text()


def test_triage_debug_launches_it_with_debugging_on_first_and_the_issue_carries_it(tmp_path: Path):
    command = f"{shlex.quote(sys.executable)} -m diagbench.simulator --port {{port}} --enable-torch-compile --speed 4"
    done = run_cli("triage", command, "--debug", "--first", "--run-id", "t", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[1].startswith("the command: failed:cuda_graph_capture") and lines[2].startswith("debug: failed:")
    run = tmp_path / "runs" / "t"
    wait_gone(run)
    found = read_debug(run)
    assert found is not None and found.failure_class == "cuda_graph_capture"
    assert [s.change for s in found.settings] == ["+ CUDA_LAUNCH_BLOCKING=1", "+ TRITON_PRINT_AUTOTUNING=1"]
    triage = json.loads((run / "triage.json").read_text())
    assert "debug" not in [r["id"] for r in triage["remedies"]]  # the debug launch is no remedy
    issue = run_cli("report", str(run), "--format", "issue", "--for", "sglang", cwd=tmp_path).stdout
    assert issue.index("### With debugging on") < issue.index("### What was tried")
    assert "| `+ CUDA_LAUNCH_BLOCKING=1` |" in issue
    usage = run_cli("triage", command, "--sanitizer", cwd=tmp_path)
    assert (
        usage.returncode == 2
        and usage.stderr.strip() == "diagbench: --debug-sets and --sanitizer go with --debug (add --debug)"
    )
