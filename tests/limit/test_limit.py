"""`diagbench limit` with real processes: tests/ruleserver.py fails as a known function of the
value (a capture failure above 48, an OOM below a variable's 4, a band that comes up again past
the limit, a value that fails on every other launch) and the simulator runs out of simulated
memory at --cuda-graph-max-bs 256. Every test checks that no process of the run is left and
that the records match their schemas."""

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
from diagbench.execute.events import QuietEvents
from diagbench.isolate.problem import ServerRules
from diagbench.limit.launches import LaunchOptions
from diagbench.limit.problem import LimitRequest, from_command
from diagbench.limit.record import Status, Step, read_limit
from diagbench.limit.run import LimitResult, find_limit
from diagbench.limit.search import budget
from diagbench.schemas import load_schema
from diagbench.spec.gpus import gpu_request_option

SERVER = f"{shlex.quote(sys.executable)} {Path(__file__).parents[1] / 'ruleserver.py'} --port {{port}}"
RULES = ServerRules(ready="fired up and ready", timeout=20.0, grace=2.0)


def assert_schemas_hold(run_dir: Path) -> None:
    for name, path in (("limit", "limit.json"), ("manifest", "manifest.json"), ("verdicts", "verdicts.json")):
        jsonschema.validate(json.loads((run_dir / path).read_text()), load_schema(name))
    for result in run_dir.glob("cells/*/result.json"):
        jsonschema.validate(json.loads(result.read_text()), load_schema("result"))


class Steps(QuietEvents):
    def __init__(self) -> None:
        self.steps: list[Step] = []

    def on_step(self, step: Step) -> None:
        self.steps.append(step)


@pytest.fixture
def limits(tmp_path: Path):
    run_dirs: list[Path] = []

    def run(rules: str, vary: str = "", vary_env: str = "", smallest: bool = False, repeat: int = 1) -> LimitResult:
        command = f"{SERVER} {rules}"
        given = LimitRequest(command, [vary] if vary else [], [vary_env] if vary_env else [], smallest)
        problem = from_command(given, RULES, tmp_path)
        result = find_limit(problem, LaunchOptions(tmp_path / "runs", repeat=repeat), Steps())
        run_dirs.append(result.run_dir.path)
        return result

    yield run
    for run_dir in run_dirs:
        wait_gone(run_dir)
        assert_schemas_hold(run_dir)


def test_the_largest_batch_that_captures_is_found_by_bisection_within_the_budget(limits):
    result = limits("'--rule=--max-bs>48=>capture'", vary="--max-bs=1..64")
    found = result.limit
    assert found.status is Status.FOUND and (found.largest_ok, found.smallest_bad) == (48, 49)
    assert (found.smallest_ok, found.largest_bad, found.monotone) == (None, None, True)
    assert found.launches <= budget(1, 64) == found.budget == 8
    past = found.step(49)
    assert past is not None and (past.outcome, past.failure_class) == ("failed", "cuda_graph_capture")
    assert past.line == "RuntimeError: CUDA error: operation not permitted when stream is capturing"
    # each value is a cell of the run, launched with that value on the command line
    record = json.loads(next(result.run_dir.path.glob("cells/*-value-49-r1/result.json")).read_text())
    assert record["command"][-2:] == ["--max-bs", "49"] and record["params"] == {"value": "49"}
    assert found.command.endswith("'--rule=--max-bs>48=>capture' --max-bs {value}")
    assert read_limit(result.run_dir.path) == found


def test_the_smallest_value_of_a_variable_that_comes_up(limits):
    result = limits("'--rule=KV<4=>oom'", vary_env="KV=1..16", smallest=True)
    found = result.limit
    assert (found.status, found.smallest_ok, found.largest_bad) == (Status.FOUND, 4, 3)
    assert (found.largest_ok, found.smallest_bad) == (None, None)
    assert found.step(3) is not None and found.step(3).failure_class == "oom"
    assert found.launches <= budget(1, 16)


def test_a_value_past_the_limit_that_comes_up_is_reported_with_both_values(limits):
    # comes up to 48, fails 49..56, comes up 57..63, fails at 64: the check past the limit lands on 60
    result = limits("'--rule=--max-bs>48,--max-bs<57=>capture' '--rule=--max-bs>63=>capture'", vary="--max-bs=1..64")
    found = result.limit
    assert (found.status, found.largest_ok, found.smallest_bad) == (Status.FOUND, 48, 49)
    assert (found.monotone, found.against) == (False, 60)
    assert "not monotone: 60 came up, past the limit 48 (and 49 did not)" in found.notes
    check = [s for s in found.steps if s.role.value == "check"]
    assert [(s.value, s.outcome) for s in check] == [(60, "ready")]
    assert found.launches <= found.budget


def test_nothing_that_comes_up_exits_1_naming_the_failure(limits):
    found = limits("'--rule==>oom'", vary="--max-bs=1..8").limit
    assert found.status is Status.NONE_UP and found.largest_ok is None and found.status.exit_code == 1
    assert found.reason == "nothing in 1..8 came up (1: failed:oom)"


def test_a_command_that_crashes_alike_at_two_values_has_its_near_end_launched_third(limits):
    found = limits("'--rule==>crash'", vary="--max-bs=1..64").limit  # exits 3 at every value, no line
    assert found.status is Status.NONE_UP
    assert [s.value for s in found.steps] == [64, 32, 1, 48]  # the far end, the middle, the near end, a check
    assert found.reason == "nothing in 1..64 came up (1: crashed)"


def test_a_flaky_boundary_is_seen_with_repeats_and_recorded_as_it_fell_without(limits, tmp_path: Path):
    counter = tmp_path / "draws"
    # 48 fails with probability 0.5, drawn in a fixed sequence (seed 6: fails, fails, comes up)
    flaky = f"'--rule=--max-bs>48=>capture' '--rule=--max-bs=48=>capture@0.5' --seed {counter}:6"
    # one launch a value: 48 failed the one time it was launched, so the limit reads 47
    found = limits(flaky, vary="--max-bs=1..64").limit
    assert (found.largest_ok, found.smallest_bad, found.flaky) == (47, 48, ())
    assert found.step(48) is not None and found.step(48).outcomes == ("failed:cuda_graph_capture",)
    # three a value: 48 fails, comes up, fails: flaky, so past the limit, and said so
    counter.unlink()
    found = limits(flaky, vary="--max-bs=1..64", repeat=3).limit
    assert (found.largest_ok, found.smallest_bad, found.flaky) == (47, 48, (48,))
    assert found.step(48).verdict == "flaky"
    assert "48 came up in 1 of 3 launches: taken as past the limit" in found.notes
    assert found.launches <= found.budget == 3 * budget(1, 64)


def test_repeats_of_a_value_run_at_once_one_gpu_slot_each(tmp_path: Path):
    given = LimitRequest(f"{SERVER} '--rule=--max-bs>2=>oom'", ["--max-bs=1..4"])
    problem = from_command(given, RULES, tmp_path)
    options = LaunchOptions(tmp_path / "runs", repeat=2, gpus=gpu_request_option("0,1"))
    result = find_limit(problem, options, Steps())
    wait_gone(result.run_dir.path)
    assert (result.limit.largest_ok, result.limit.smallest_bad) == (2, 3)
    records = [json.loads(p.read_text()) for p in sorted(result.run_dir.path.glob("cells/*/result.json"))]
    assert records and all(len(r["gpus"]) == 1 for r in records)
    for value in {r["params"]["value"] for r in records}:  # each value's two launches: both GPUs
        assert sorted(r["gpus"][0] for r in records if r["params"]["value"] == value) == ["0", "1"]
    manifest = json.loads((result.run_dir.path / "manifest.json").read_text())
    assert manifest["options"]["gpus"] == ["0", "1"] and manifest["options"]["executor"]["kind"] == "local"


def test_the_simulators_memory_limit_is_found_and_priced(tmp_path: Path):
    command = f"{shlex.quote(sys.executable)} -m diagbench.simulator --port {{port}} --speed 4"
    done = run_cli("limit", command, "--vary", "--cuda-graph-max-bs=1..512", "--price", "5", "--json", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    found = json.loads(done.stdout)
    assert (found["largest_ok"], found["smallest_bad"], found["launches"]) == (255, 256, 11)
    step = next(s for s in found["steps"] if s["value"] == 255)
    assert step["price"]["ok"] == 5 and step["price"]["tokens_per_s"] > 0
    past = next(s for s in found["steps"] if s["value"] == 256)
    assert past["failure_class"] == "cuda_graph_capture" and "CUDA out of memory" in past["line"]
    run = next((tmp_path / "runs").iterdir())
    wait_gone(run)
    assert (run / "report.html").is_file()
    shown = run_cli("report", str(run), cwd=tmp_path)
    assert shown.returncode == 0 and "largest --cuda-graph-max-bs that comes up: 255" in shown.stdout


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--vary", "--max-bs=64..1"], "--vary --max-bs=64..1: LO 64 is above HI 1"),
        (["--vary", "--max-bs=0..9223372036854775808"], "is beyond a 64-bit integer"),
        (["--vary", "--max-bs=1..8.5"], "expected a range of whole numbers LO..HI"),
        (["--vary-env", "N=1..2", "--vary", "--x=1..2"], "one knob at a time"),
    ],
)
def test_a_range_that_cannot_be_searched_is_one_line_and_exit_2_with_nothing_launched(tmp_path, args, message):
    done = run_cli("limit", f"{SERVER} --max-bs 8", *args, cwd=tmp_path)
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr.startswith("diagbench: ") and message in done.stderr and len(done.stderr.splitlines()) == 1
    assert not (tmp_path / "runs").exists()


def test_an_option_given_twice_in_the_command_is_refused(tmp_path):
    done = run_cli("limit", f"{SERVER} --max-bs 8 --max-bs=16", "--vary", "--max-bs=1..64", cwd=tmp_path)
    assert done.returncode == 2
    assert done.stderr.strip() == (
        "diagbench: --vary --max-bs: the command gives --max-bs 2 times ('--max-bs' (word 5), '--max-bs=16' "
        "(word 7)): give it once, or leave it out (limit sets it at each launch)"
    )


def test_ctrl_c_mid_search_records_what_was_known_and_exits_130(tmp_path):
    # 64 fails at once; 32 hangs (no ready line) until Ctrl-C
    command = f"{SERVER} '--rule=--max-bs>48=>capture' '--rule=--max-bs=32=>hang'"
    argv = diagbench_argv("limit", command, "--vary", "--max-bs=1..64", "--run-id", "cc", "--grace", "2s")
    proc = subprocess.Popen(argv, cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    run = tmp_path / "runs" / "cc"
    wait_until(lambda: list(run.glob("cells/*-value-32-r1/server.log")), what="the launch at 32")
    wait_until(lambda: "Load weight begin" in next(run.glob("cells/*-value-32-r1/server.log")).read_text())
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    found = read_limit(run)
    assert found is not None and found.status is Status.INTERRUPTED
    assert [(s.value, s.verdict) for s in found.steps] == [(64, "bad")]
    assert (found.largest_ok, found.smallest_bad) == (None, 64)  # what the launches that ended showed
    record = json.loads(next(run.glob("cells/*-value-32-r1/result.json")).read_text())
    assert record["outcome"] == "cancelled"
    wait_gone(run)
    assert_schemas_hold(run)
