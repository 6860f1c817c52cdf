"""`diagbench isolate` with real processes: tests/ruleserver.py fails as a known function of its
flags and environment, and every test checks that none of its processes is left."""

from __future__ import annotations

import json
import os
import re
import shlex
import signal
import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from conftest import run_cli, wait_gone, wait_until
from diagbench.isolate.problem import ServerRules, from_commands, from_spec
from diagbench.isolate.record import Status, read_isolation
from diagbench.isolate.run import IsolateOptions, IsolateResult, isolate
from diagbench.isolate.search import Result
from diagbench.schemas import load_schema
from diagbench.spec.load import load_spec

ROOT = Path(__file__).resolve().parents[2]
SERVER = Path(__file__).parents[1] / "ruleserver.py"
RULES = ServerRules(signatures=("pytorch", "sglang"), timeout=30.0, grace=2.0)


def assert_only_the_culprit_is_launched_again(iso: Any, run_dir: Path) -> None:
    """At --repeat 1 only a culprit of several factors and the launches without one of its
    factors are launched more than once (a lone factor never is)."""
    configuration = {}
    for path in run_dir.glob("cells/*/result.json"):
        record = json.loads(path.read_text())
        argv = re.sub(r"--port \d+", "--port P", " ".join(record["command"]))
        configuration[record["attempt"]] = (argv, *sorted(f"{k}={v}" for k, v in record["env_changes"].items()))
    launches = Counter(configuration.values())
    applied = {configuration[a]: frozenset(s.applied) for s in iso.steps for a in s.attempts}
    again = {applied[c] for c, n in launches.items() if n > 1}
    culprit = frozenset(iso.culprit)
    assert again <= ({culprit, *(culprit - {f} for f in culprit)} if len(culprit) > 1 else set()), again


def line(*words: str, env: str = "") -> str:
    """A command line for the rule server, as a user would paste it."""
    return " ".join([env, shlex.quote(sys.executable), shlex.quote(str(SERVER)), "--port", "{port}", *words]).strip()


class Recorder:
    """IsolateEvents, recorded."""

    def __init__(self) -> None:
        self.steps: list[Any] = []
        self.started: list[str] = []

    def on_open(self, run_dir: Any, planned: Any, done: Any = ()) -> None:
        return None

    def on_wait(self, item: Any, slot: Any, why: str) -> None:
        return None

    def on_helpers(self, what: str, pending: Any, elapsed_s: float, limit_s: float) -> None:
        return None

    def on_start(self, item: Any, slot: Any) -> None:
        self.started.append(item.name)

    def on_phase(self, item: Any, phase: str) -> None:
        return None

    def on_done(self, item: Any, record: Any) -> None:
        return None

    def on_step(self, step: Any) -> None:
        self.steps.append(step)


class Isolations:
    def __init__(self, folder: Path):
        self.folder = folder
        self.results: list[IsolateResult] = []

    def run(self, good: str, bad: str, repeat: int = 1, parallel: int = 1, **env: list[str]) -> IsolateResult:
        problem = from_commands(good, bad, env.get("good_env", []), env.get("bad_env", []), RULES, self.folder)
        options = IsolateOptions(self.folder / "runs", None, repeat, parallel)
        self.events = Recorder()
        result = isolate(problem, options, self.events)
        self.results.append(result)
        return result


@pytest.fixture
def isolations(tmp_path: Path):
    runner = Isolations(tmp_path)
    yield runner
    for result in runner.results:
        assert_none_left(result.run_dir.path)
        assert_schemas_hold(result.run_dir.path)


def assert_schemas_hold(run_dir: Path) -> None:
    """isolation.json, the manifest and every record match the shipped JSON Schemas."""
    jsonschema.validate(json.loads((run_dir / "isolation.json").read_text()), load_schema("isolation"))
    jsonschema.validate(json.loads((run_dir / "manifest.json").read_text()), load_schema("manifest"))
    jsonschema.validate(json.loads((run_dir / "verdicts.json").read_text()), load_schema("verdicts"))
    for path in run_dir.glob("cells/*/result.json"):
        jsonschema.validate(json.loads(path.read_text()), load_schema("result"))


def assert_none_left(run_dir: Path) -> None:
    wait_gone(run_dir)


def launched_configurations(run_dir: Path) -> list[tuple[str, ...]]:
    """Every launch's argv (port blanked) and env changes, from the records on disk."""
    out = []
    for path in sorted(run_dir.glob("cells/*/result.json")):
        record = json.loads(path.read_text())
        if record["started_at"] is None:
            continue
        argv = " ".join(record["command"])
        argv = re.sub(r"--port \d+", "--port P", argv)
        env = sorted(f"{k}={v}" for k, v in record["env_changes"].items() if k not in ("PYTHONUNBUFFERED",))
        out.append((argv, *env))
    return out


def test_one_culprit_among_six_differences(isolations):
    result = isolations.run(
        line("--rule=--compile=>capture", env="K=0"),
        line("--rule=--compile=>capture", "--compile", "--max-bs", "64", "--mode=fast", "extra", env="K=1 G=1"),
    )
    iso = result.isolation
    assert [f.name for f in iso.factors] == ["K", "G", "--compile", "--max-bs", "--mode", "positional#2"]
    assert iso.status is Status.FOUND and iso.culprit == ("--compile",)
    assert iso.target.label == "failed:cuda_graph_capture"
    assert iso.steps[0].baseline == "bad" and iso.steps[0].result is Result.FAIL  # the bad launch first
    assert all(s.baseline is None for s in iso.steps[1:])  # launches without --compile came up: no good one
    assert any(s.result is Result.PASS and "--compile" not in s.applied for s in iso.steps)
    assert iso.launches == len(iso.steps) <= 1 + 4
    folders = sorted(p.name for p in (result.run_dir.path / "cells").iterdir())
    assert folders[0] == "001-bad-r1"
    assert any(f.endswith("-compile-r1") for f in folders)
    on_disk = json.loads((result.run_dir.path / "isolation.json").read_text())
    assert on_disk["culprit"] == ["--compile"] and on_disk["launches"] == iso.launches
    assert on_disk["target"] == {"outcome": "failed", "failure_class": "cuda_graph_capture"}
    assert {"applied", "outcome", "failure_class", "result"} <= set(on_disk["steps"][2])
    assert isolations.events.steps == list(iso.steps)  # each step was told as it ended
    runs_dir = result.run_dir.path.parent  # runs/latest is the newest matrix run, never an isolation
    assert not (runs_dir / "latest").exists()
    assert (runs_dir / "latest-isolation").resolve() == result.run_dir.path.resolve()


def test_each_step_is_on_disk_as_it_ends(isolations):
    seen: list[int] = []

    class Watching(Recorder):
        def on_step(self, step: Any) -> None:
            partial = read_isolation(next((isolations.folder / "runs").glob("2*")))
            assert partial is not None and partial.status is Status.INTERRUPTED
            seen.append(len(partial.steps))

    rule = "--rule=--x=>capture"
    problem = from_commands(line(rule), line(rule, "--x", "--y"), [], [], RULES, isolations.folder)
    result = isolate(problem, IsolateOptions(isolations.folder / "runs"), Watching())
    isolations.results.append(result)
    assert seen == list(range(1, len(result.isolation.steps) + 1))
    assert read_isolation(result.run_dir.path) == result.isolation


@pytest.mark.parametrize(
    ("rule", "good", "bad", "culprit"),
    [
        ("--mode=fast=>oom", ["--mode", "slow"], ["--mode=fast", "--zz"], ("--mode", "option")),
        ("+model-b=>oom", ["model-a"], ["model-b", "--zz"], ("positional#2", "positional")),
        ("K=1=>oom", ["--env=K=0"], ["--env=K=1", "--zz"], ("K", "env")),
    ],
)
def test_the_culprit_can_be_an_equals_form_a_positional_or_a_variable(isolations, rule, good, bad, culprit):
    envs = [" ".join(w.split("=", 1)[1] for w in words if w.startswith("--env=")) for words in (good, bad)]
    good, bad = ([w for w in words if not w.startswith("--env=")] for words in (good, bad))
    result = isolations.run(line(f"--rule={rule}", *good, env=envs[0]), line(f"--rule={rule}", *bad, env=envs[1]))
    iso = result.isolation
    assert len(iso.factors) == 2
    assert iso.status is Status.FOUND and iso.culprit == (culprit[0],)
    assert iso.factor(culprit[0]).kind.value == culprit[1]


def test_an_env_word_in_front_is_the_environment_and_its_variable_is_found(isolations):
    rule = "--rule=FOO=bad=>capture"
    result = isolations.run(line(rule, "--a", "1"), line(rule, "--a", "2", env="env FOO=bad"))
    iso = result.isolation
    assert [(f.name, f.good, f.bad) for f in iso.factors] == [("FOO", None, "bad"), ("--a", "1", "2")]
    assert iso.status is Status.FOUND and iso.culprit == ("FOO",)
    assert iso.launches <= 4  # good, bad, and the two factors alone at most: nothing launched again
    launched = launched_configurations(result.run_dir.path)
    assert all(argv.startswith(sys.executable) for argv, *_ in launched)  # env is read, never launched
    assert [("FOO=bad" in env) for _, *env in launched] == [bool(set(s.applied) & {"FOO"}) for s in iso.steps]


def test_env_u_unsets_a_variable_diagbench_itself_has(isolations, monkeypatch):
    monkeypatch.setenv("X", "1")  # inherited by every launch unless a side unsets it
    rule = "--rule=X=1=>capture"
    result = isolations.run(line(rule, env="env -u X"), line(rule, "--y"))
    iso = result.isolation
    assert [(f.name, f.label(False), f.label(True)) for f in iso.factors] == [("X", "(unset)", "-"), ("--y", "-", "on")]
    assert iso.status is Status.FOUND and iso.culprit == ("X",)
    records = [json.loads(p.read_text()) for p in sorted(result.run_dir.path.glob("cells/*/result.json"))]
    for record in records:
        unset = "X" in record["env_changes"] and record["env_changes"]["X"] is None
        assert unset == (record["outcome"] == "ready"), record["attempt"]
    assert iso.commands is not None and iso.commands["good"].startswith("env -u X ")


def test_a_pair_guilty_only_together_is_found_and_nothing_launches_twice(isolations):
    factors = ["--a", "--b", "--c", "--d", "--e", "--f"]
    rule = "--rule=--b,--e=>capture"
    result = isolations.run(line(rule), line(rule, *factors))
    iso = result.isolation
    assert iso.status is Status.FOUND and iso.culprit == ("--b", "--e")
    alone = {s.applied: s.result for s in iso.steps}
    assert alone.get(("--b",), Result.PASS) is Result.PASS and alone.get(("--e",), Result.PASS) is Result.PASS
    launched = launched_configurations(result.run_dir.path)
    assert len(launched) == iso.launches
    again = Counter(launched)  # the pair three times, each half twice (a flaky target fakes a pair), nothing else
    assert sorted(n for n in again.values() if n > 1) == [2, 2, 3]
    assert_only_the_culprit_is_launched_again(iso, result.run_dir.path)


def test_a_probe_that_fails_differently_is_unresolved_not_the_target(isolations):
    rules = ["--rule=--a,--b=>capture", "--rule=--a=>oom"]
    result = isolations.run(line(*rules), line(*rules, "--a", "--b", "--c"))
    iso = result.isolation
    other = [s for s in iso.steps if s.label == "failed:oom"]
    assert other and all(s.result is Result.UNRESOLVED and not s.flaky for s in other)
    assert iso.status is Status.FOUND and iso.culprit == ("--a", "--b")


def test_when_every_smaller_set_fails_differently_it_is_not_isolable(isolations):
    rules = ["--rule=--a,--b=>capture", "--rule=--a=>oom", "--rule=--b=>crash"]
    result = isolations.run(line(*rules), line(*rules, "--a", "--b"))
    assert result.isolation.status is Status.NOT_ISOLABLE
    assert result.isolation.status.exit_code == 1
    assert {s.label for s in result.isolation.steps} == {"ready", "failed:cuda_graph_capture", "failed:oom", "crashed"}


def test_a_good_launch_that_fails_stops_with_its_reason_and_keeps_the_records(isolations):
    result = isolations.run(line("--rule=--x=>oom", "--x"), line("--rule=--x=>oom", "--x", "--y"))
    iso = result.isolation
    assert iso.status is Status.BAD_BASELINE and iso.status.exit_code == 2
    assert iso.reason.startswith("the good launch did not come up: failed:oom (L2: torch.OutOfMemoryError")
    assert len(iso.steps) == 2 and iso.launches == 2
    assert len(list(result.run_dir.path.glob("cells/*/result.json"))) == 2
    assert read_isolation(result.run_dir.path) == iso


def test_a_bad_launch_that_comes_up_stops_too(isolations):
    result = isolations.run(line(), line("--y"))
    assert result.isolation.status is Status.BAD_BASELINE
    assert result.isolation.reason == "the bad launch came up: there is no failure to isolate"
    assert result.isolation.target.label == "ready"  # what the bad launch did


def test_repeats_make_a_flaky_probe_unresolved_and_name_the_suspect(isolations, tmp_path):
    counter = tmp_path / "launches"
    rule = f"--rule=--x=>capture --alternate {counter}"  # every other launch with --x fails
    result = isolations.run(line(rule), line(rule, "--x", "--y"), repeat=2)
    iso = result.isolation
    assert iso.status is Status.NOT_ISOLABLE and iso.reason.startswith("flaky:")
    assert iso.suspects == ("--x",)
    flaky = [s for s in iso.steps if s.flaky]
    assert flaky and all(s.result is Result.UNRESOLVED and len(set(s.outcomes)) == 2 for s in flaky)
    assert "the bad launch is flaky: 1 of 2 launches were failed:cuda_graph_capture" in iso.notes
    assert all(len(s.attempts) == 2 for s in iso.steps) and iso.launches == 2 * len(iso.steps)


def test_repeats_of_a_steady_server_agree_and_find_it(isolations):
    rule = "--rule=--x=>capture"
    result = isolations.run(line(rule), line(rule, "--x", "--y", "--z"), repeat=2)
    assert result.isolation.status is Status.FOUND and result.isolation.culprit == ("--x",)
    assert not any(s.flaky for s in result.isolation.steps)


def test_parallel_probes_give_the_same_answer(isolations):
    rule = "--rule=--c,--f=>capture"
    words = ["--a", "--b", "--c", "--d", "--e", "--f"]
    serial = isolations.run(line(rule), line(rule, *words)).isolation
    wide = isolations.run(line(rule), line(rule, *words), parallel=3)
    assert wide.isolation.culprit == serial.culprit == ("--c", "--f")
    launched = launched_configurations(wide.run_dir.path)
    assert len(launched) == wide.isolation.launches
    assert_only_the_culprit_is_launched_again(wide.isolation, wide.run_dir.path)


def test_gpu_slots_run_probes_at_once_each_on_its_own_gpus(isolations):
    from diagbench.spec.gpus import gpu_request_option

    rule = "--rule=--b,--d=>capture"
    problem = from_commands(line(rule), line(rule, "--a", "--b", "--c", "--d"), [], [], RULES, isolations.folder)
    options = IsolateOptions(isolations.folder / "runs", None, 1, None, gpu_request_option("0,1"))
    result = isolate(problem, options, Recorder())
    isolations.results.append(result)
    assert result.isolation.culprit == ("--b", "--d")
    records = [json.loads(p.read_text()) for p in result.run_dir.path.glob("cells/*/result.json")]
    assert {tuple(r["gpus"]) for r in records} == {("0",), ("1",)}
    assert all(r["env_changes"]["CUDA_VISIBLE_DEVICES"] == r["gpus"][0] for r in records)
    manifest = json.loads((result.run_dir.path / "manifest.json").read_text())
    assert manifest["options"]["slots"] == [["0"], ["1"]]


def test_spec_axes_are_the_factors(tmp_path):
    spec_path = tmp_path / "spec.yaml"
    spec_path.write_text(
        f"""
name: axes
server:
  command: [{json.dumps(sys.executable)}, {json.dumps(str(SERVER))}, "--rule=--compile,K=1=>capture"]
  signatures: [pytorch, sglang]
  timeout: 30s
  grace: 2s
matrix:
  kernel: {{env: K, values: {{mma: "1", stock: "0"}}}}
  compile: {{flag: --compile, values: [on, off]}}
  bs: {{args: [--max-bs, "{{value}}"], values: [32, 64]}}
expect:
  - {{when: {{compile: on}}, outcome: ready}}
"""
    )
    problem = from_spec(
        load_spec(spec_path), "kernel=stock,compile=off,bs=32", "kernel=mma,compile=on,bs=64", None, None
    )
    result = isolate(problem, IsolateOptions(tmp_path / "runs"), Recorder())
    assert_none_left(result.run_dir.path)
    assert_schemas_hold(result.run_dir.path)
    iso = result.isolation
    assert [f.name for f in iso.factors] == ["kernel", "compile", "bs"]
    assert iso.status is Status.FOUND and iso.culprit == ("kernel", "compile")
    assert result.run_dir.path.name.endswith("-axes-isolate")
    assert iso.commands is not None and iso.commands["bad"].endswith(
        "ruleserver.py '--rule=--compile,K=1=>capture' --compile --max-bs 64"
    )
    assert iso.commands["bad"].startswith("K=1 ")
    manifest = json.loads((result.run_dir.path / "manifest.json").read_text())
    assert manifest["expect"] == [] and manifest["hypotheses"] == []  # probes are not the matrix's cells


# -- the command line ---------------------------------------------------------------------


def diagbench(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return run_cli(*args, cwd=cwd, columns=250)


def test_json_prints_isolation_json_and_exit_0(tmp_path):
    rule = "--rule=--x=>capture"
    done = diagbench("isolate", "--good", line(rule), "--bad", line(rule, "--x", "--y"), "--json", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    printed = json.loads(done.stdout)
    run_dir = next((tmp_path / "runs").glob("2*"))
    assert printed == json.loads((run_dir / "isolation.json").read_text())
    assert printed["culprit"] == ["--x"] and printed["status"] == "found"
    assert "2 factor(s) between good and bad" in done.stderr  # the people's view goes to stderr
    assert_none_left(run_dir)
    report = diagbench("report", str(run_dir), cwd=tmp_path)
    assert report.returncode == 0
    assert "culprit: --x (good: -, bad: on)" in report.stdout
    assert "L2: RuntimeError: CUDA error: operation not permitted when stream is capturing" in report.stdout


def test_every_report_format_shows_the_isolation_and_isolate_writes_report_html(tmp_path):
    rule = "--rule=--x=>capture"
    done = diagbench("isolate", "--good", line(rule), "--bad", line(rule, "--x", "--y"), cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    run_dir = next((tmp_path / "runs").glob("2*"))
    assert_none_left(run_dir)
    written = json.loads((run_dir / "isolation.json").read_text())
    md = diagbench("report", str(run_dir), "--format", "md", cwd=tmp_path)
    assert md.returncode == 0, md.stderr
    assert "### Isolation: found" in md.stdout and "- **culprit: --x (good: -, bad: on)**" in md.stdout
    assert "| `--x` | flag | - | on |" in md.stdout
    assert "| 1 | bad (all 2) | failed:cuda_graph_capture | fail | L2: RuntimeError: CUDA error:" in md.stdout
    assert "| 2 | --x | failed:cuda_graph_capture | fail |" in md.stdout
    # no launch without --x came up before it: the good one is made, last
    assert "| 3 | good (none applied) | ready | pass | L2: The server is fired up and ready to roll! |" in md.stdout
    assert md.stdout.index("### Isolation") < md.stdout.index("### Cells")
    assert md.stdout.rstrip().endswith("complete.")  # its plan is what it launched
    as_json = json.loads(diagbench("report", str(run_dir), "--format", "json", cwd=tmp_path).stdout)
    assert as_json["isolation"] == written and as_json["complete"] is True
    html = diagbench("report", str(run_dir), "--format", "html", cwd=tmp_path)
    assert html.returncode == 0
    assert html.stdout == (run_dir / "report.html").read_text()  # what isolate left is what report renders
    section = html.stdout[html.stdout.index('<section id="isolation">') :].split("</section>")[0]
    assert "<h2>Isolation: found</h2>" in section and "culprit: --x (good: -, bad: on)" in section
    assert section.count('<span class="badge v-refuted">fail</span>') == sum(
        s["result"] == "fail" for s in written["steps"]
    )
    assert f'<a href="#a-{written["steps"][1]["attempts"][0]}">' in section  # each step opens onto its launch


def test_a_bad_launch_that_comes_up_is_exit_2_and_the_good_one_is_never_made(tmp_path):
    done = diagbench("isolate", "--good", line("--rule=--x=>oom", "--x"), "--bad", line("--x", "--y"), cwd=tmp_path)
    assert done.returncode == 2
    assert "diagbench: the bad launch came up: there is no failure to isolate" in done.stderr
    assert "Traceback" not in done.stderr
    assert [p.parent.name for p in tmp_path.glob("runs/2*/cells/*/result.json")] == ["001-bad-r1"]


def test_good_first_sees_a_good_side_that_a_factor_hid(tmp_path):
    """The good line fails on its own (MODE=1), and the bad side's MODE=2 hides that: without
    --good-first a launch holding MODE=2 came up and stood for the good one, and --x is named
    with a note saying so; --good-first launches the good line and stops on it."""
    rules = ("--rule=MODE=1=>capture", "--rule=--x=>capture")
    good, bad = line(*rules, env="MODE=1"), line(*rules, "--x", env="MODE=2")
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    trusting = diagbench("isolate", "--good", good, "--bad", bad, "--json", cwd=tmp_path / "a")
    answer = json.loads(trusting.stdout)
    assert trusting.returncode == 0 and answer["culprit"] == ["--x"], trusting.stderr
    assert "the good launch was not made: step 2 (MODE) holds it and came up" in answer["notes"]
    assert [step["baseline"] for step in answer["steps"]] == ["bad", None, None]
    checked = diagbench("isolate", "--good", good, "--bad", bad, "--good-first", "--json", cwd=tmp_path / "b")
    answer = json.loads(checked.stdout)
    assert checked.returncode == 2 and answer["status"] == "bad_baseline", checked.stderr
    assert answer["reason"].startswith("the good launch did not come up: failed:cuda_graph_capture")
    assert [step["baseline"] for step in answer["steps"]] == ["bad", "good"]  # and nothing else launched


def test_good_first_launches_it_beside_the_bad_one_and_the_search_uses_it(tmp_path):
    rule = "--rule=--x=>capture"
    done = diagbench(
        "isolate", "--good", line(rule), "--bad", line(rule, "--x", "--y"), "--good-first", "--json", cwd=tmp_path
    )
    answer = json.loads(done.stdout)
    assert done.returncode == 0 and answer["culprit"] == ["--x"], done.stderr
    assert [step["baseline"] for step in answer["steps"]] == ["bad", "good", None]  # --x alone: nothing again
    assert answer["launches"] == 3 and not any("was not made" in note for note in answer["notes"])


@pytest.mark.parametrize(
    ("good", "bad", "said"),
    [
        # the good program cannot even start: a pair (the program, --x) looked guilty together
        (
            "/nonexistent/python " + line("--rule=--x=>capture").split(" ", 1)[1],
            line("--rule=--x=>capture", "--x"),
            "the good launch did not come up: launch_error",
        ),
        # the good side crashes (--w 0), and the launch without --w crashed too
        (
            line("--rule=--w<1=>crash", "--rule=--x=>capture", "--w", "0"),
            None,
            "the good launch did not come up: crashed",
        ),
    ],
    ids=["the good program is missing", "the good side crashes"],
)
def test_a_launch_without_a_factor_that_did_not_come_up_makes_the_good_launch_and_it_decides(tmp_path, good, bad, said):
    bad = bad or line("--rule=--w<1=>crash", "--rule=--x=>capture", "--w", "5", "--x")
    done = diagbench("isolate", "--good", good, "--bad", bad, "--json", cwd=tmp_path)
    answer = json.loads(done.stdout)
    assert done.returncode == 2 and answer["status"] == "bad_baseline", done.stderr
    assert answer["reason"].startswith(said), answer["reason"]
    assert answer["culprit"] == [] and [s["baseline"] for s in answer["steps"]][-1] == "good"
    assert answer["launches"] <= 5  # the good launch before any launch again


def interrupted(tmp_path: Path, args: list[str], cell: str, what: str) -> bytes:
    """`diagbench isolate ARGS`, Ctrl-C once the server of the cell folder `cell` is up: its
    output (it must exit 130)."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "diagbench", "isolate", *args],
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        env={**os.environ, "COLUMNS": "200"},
    )
    wait_until(
        lambda: any("Load weight begin." in p.read_text() for p in tmp_path.glob(f"runs/*/cells/{cell}/server.log")),
        what=what,
    )
    proc.send_signal(signal.SIGINT)
    output, _ = proc.communicate(timeout=30)
    assert proc.returncode == 130, output.decode()
    return output


def test_ctrl_c_during_the_good_first_launch_keeps_the_bad_launch_s_target(tmp_path):
    rules = ("--rule=--x=>capture", "--rule=--port=>hang")  # the good launch hangs, the bad one fails first
    sides = ["--good", line(*rules), "--bad", line(*rules, "--x", "--y"), "--good-first"]
    output = interrupted(tmp_path, sides, "002-good*", "the good launch's server to be up (it hangs)")
    iso = read_isolation(next((tmp_path / "runs").glob("2*")))
    assert iso is not None and iso.status is Status.INTERRUPTED
    assert iso.target.label == "failed:cuda_graph_capture"  # what the bad launch did, though the good one never ended
    assert [(s.baseline, s.result) for s in iso.steps] == [("bad", Result.FAIL), ("good", Result.UNRESOLVED)]
    assert b"target: failed:cuda_graph_capture" in output


def test_a_good_launch_that_fails_too_is_exit_2_with_one_message(tmp_path):
    good = line("--rule=--x=>oom", "--x")
    done = diagbench("isolate", "--good", good, "--bad", good + " --y", cwd=tmp_path)
    assert done.returncode == 2
    assert "diagbench: the good launch did not come up: failed:oom" in done.stderr
    assert "Traceback" not in done.stderr
    assert len(list(tmp_path.glob("runs/2*/cells/*/result.json"))) == 2  # bad, then good: no probe showed a pass
    run_dir = next((tmp_path / "runs").glob("2*"))
    assert "the baselines do not behave: the good launch did not come up" in (run_dir / "report.html").read_text()
    for form in ("table", "md", "json", "html"):
        assert diagbench("report", str(run_dir), "--format", form, cwd=tmp_path).returncode == 2, form  # as isolate did


def test_dry_run_lists_factors_and_commands_and_launches_nothing(tmp_path):
    done = diagbench(
        "isolate",
        "--good",
        "A=0 serve --port {port} --bs 32",
        "--bad",
        "A=1 serve --port {port} --bs=64 --fast",
        "--bad-env",
        "B=2",
        "--dry-run",
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stderr
    assert "4 factor(s) between good and bad" in done.stdout
    assert "good: A=0 serve --port {port} --bs 32" in done.stdout
    assert "bad: A=1 B=2 serve --port {port} --bs=64 --fast" in done.stdout
    assert "the full matrix: 16 launches" in done.stdout
    assert not (tmp_path / "runs").exists()


def test_the_line_diagbench_prints_with_env_u_pastes_back(tmp_path):
    """A spec's `unset` label prints as `env -u X ...`; pasted back as --good, it unsets X."""
    spec = tmp_path / "spec.yaml"
    command = [sys.executable, str(SERVER), "--rule=X=1=>capture"]
    spec.write_text(
        f"""
name: paste
server: {{command: {json.dumps(command)}, signatures: [pytorch, sglang], timeout: 30s, grace: 2s}}
matrix:
  graphs: {{env: X, values: [unset, "1"]}}
  compile: {{flag: --compile, values: [off, on]}}
"""
    )
    env = {**os.environ, "COLUMNS": "250", "X": "1"}  # what diagbench inherits: the good side must unset it
    ask = ["isolate", str(spec), "--good", "graphs=unset,compile=off", "--bad", "graphs=1,compile=on", "--dry-run"]
    dry = run_cli(*ask, cwd=tmp_path, env=env)
    printed = {
        side: text
        for side, _, text in (ln.partition(": ") for ln in dry.stdout.splitlines())
        if side in ("good", "bad")
    }
    assert printed["good"].startswith("env -u X "), dry.stdout
    again = ["isolate", "--good", printed["good"], "--bad", printed["bad"], "--json"]
    done = run_cli(*again, cwd=tmp_path, env=env)
    assert done.returncode == 0, done.stderr
    answer = json.loads(done.stdout)
    assert [(f["name"], f["unset"]) for f in answer["factors"]] == [("X", ["good"]), ("--compile", [])]
    good = [step for step in answer["steps"] if step["baseline"] == "good"]
    assert answer["culprit"] == ["X"] and [step["outcome"] for step in good] == ["ready"]
    assert answer["commands"] == printed  # and what it prints pastes back again
    run_dir = next((tmp_path / "runs").glob("2*"))
    assert_none_left(run_dir)
    assert_schemas_hold(run_dir)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--good", "serve --x", "--bad", "serve --x"], "diagbench: the good and the bad launch are the same"),
        (["--good", "env -i serve", "--bad", "serve"], "diagbench: --good: env -i: not supported"),
        (["--good", "a", "--bad", "b", "--timeout", "soon"], "diagbench: --timeout soon: expected a duration"),
        (["--good", "a", "--bad", "b", "--ready", "("], "diagbench: --ready '(': invalid regular expression"),
        (["--good", "a", "--bad", "b", "--signatures", "sglng"], "diagbench: --signatures: unknown pack 'sglng'"),
        (["--good", "a", "--bad", "b", "--parallel", "2"], "diagbench: --parallel 2: put {port} where each"),
        (["--good", "a", "--between", "x==1..2", "--good-first"], "diagbench: --good-first: --between launches"),
    ],
)
def test_unusable_requests_are_exit_2(tmp_path, args, message):
    done = diagbench("isolate", *args, cwd=tmp_path)
    assert done.returncode == 2
    assert done.stderr.startswith(message), done.stderr
    assert "Traceback" not in done.stderr


def test_ctrl_c_in_the_middle_keeps_the_records_and_exits_130(tmp_path):
    rules = ["--rule=--a,--b=>capture", "--rule=--a=>hang"]  # the first probe, --a alone, hangs
    sides = ["--good", line(*rules), "--bad", line(*rules, "--a", "--b")]
    output = interrupted(tmp_path, sides, "002-*", "the first probe's server to be up (it hangs)")
    run_dir = next((tmp_path / "runs").glob("2*"))
    outcomes = [json.loads(p.read_text())["outcome"] for p in sorted(run_dir.glob("cells/*/result.json"))]
    assert outcomes == ["failed", "cancelled"]
    iso = read_isolation(run_dir)
    assert iso is not None and iso.status is Status.INTERRUPTED and iso.culprit == ()
    assert [s.label for s in iso.steps] == ["failed:cuda_graph_capture", "cancelled"]
    assert b"Traceback" not in output
    assert "<h2>Isolation: interrupted</h2>" in (run_dir / "report.html").read_text()
    assert_none_left(run_dir)
    assert_schemas_hold(run_dir)


def test_the_readme_demo_finds_torch_compile_in_four_launches(isolations):
    """The README's demo, as written there, against the simulated SGLang server."""
    readme = (ROOT / "README.md").read_text()
    good = re.search(r"--good '([^']+)' \\\n\s+--bad '([^']+)'", readme)
    assert good is not None, "the README's isolate demo command moved"
    result = isolations.run(good[1], good[2])
    iso = result.isolation
    assert iso.culprit == ("--enable-torch-compile",) and iso.launches == 4
    assert "4 launches; toggling one factor at a time: 6 launches" in readme  # the figure the README prints
    assert "culprit: --enable-torch-compile (good: -, bad: on)" in readme


# -- what a launch is, for the memo ----------------------------------------------------------


def prober_for(good: str, bad: str, folder: Path) -> Any:
    from diagbench.execute.cancel import Cancel
    from diagbench.isolate.run import Prober, isolation_slots, open_isolation

    problem = from_commands(good, bad, [], [], RULES, folder)
    options = IsolateOptions(folder / "runs")
    slots = isolation_slots(problem, options)
    events = Recorder()
    prober = Prober(problem, options, open_isolation(problem, options, slots, events), events, slots, Cancel())
    prober.cancel.close()
    return prober


def test_the_memo_keys_a_launch_by_its_argv_its_environment_and_its_folder(tmp_path):
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    good, bad = "env -u X A=1 serve --port {port}", "X= A=2 serve --port {port} --fast"
    prober = prober_for(good, bad, tmp_path / "a")
    assert [f.name for f in prober.problem.space.factors] == ["X", "A", "--fast"]
    keys = {applied: prober.key(applied) for applied in [(), ("X",), ("A",), ("X", "A"), ("--fast",)]}
    assert len(set(keys.values())) == len(keys)  # the same argv, X unset or empty, A=1 or A=2: never shared
    assert keys[("X", "A")] == prober.key(("A", "X"))  # the same launch, however the set is written
    elsewhere = prober_for(good, bad, tmp_path / "b")
    assert elsewhere.key(("A",)) != keys[("A",)]  # the same argv and env run in another folder


def test_a_configuration_seen_failing_once_and_coming_up_once_names_no_culprit(isolations, tmp_path):
    counter = tmp_path / "turns"
    rule = f"--rule=--a,--b=>capture --alternate {counter}"  # every other launch with --a --b fails
    result = isolations.run(line(rule), line(rule, "--a", "--b", "--c"))
    iso = result.isolation
    assert iso.status is Status.NOT_ISOLABLE and iso.reason.startswith("flaky:"), iso.reason
    both = [s for s in iso.steps if s.applied == ("--a", "--b")]
    assert {s.outcome.value for s in both} == {"ready", "failed"}  # launched again, and it disagreed
    assert iso.culprit == ()
