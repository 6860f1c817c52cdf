"""Command-line conventions: help, metavars, completion, --json everywhere, annotations,
resuming from the run alone, and diff's one rule for cells that did not run."""

from __future__ import annotations

import dataclasses
import json
import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import pytest
import typer.main

from conftest import FAKE, fake_command, run_cli, wait_until
from diagbench.cli.app import app
from diagbench.judge.diff import CellState, cell_states, diff_runs
from diagbench.judge.verdicts import check_expectations
from diagbench.judge.view import RunView
from diagbench.launch.process import sweep_tagged
from diagbench.records.record import AttemptRecord
from diagbench.render.annotations import github_annotations
from diagbench.spec.hypotheses import Expectation
from diagbench.vocab import Outcome

ROOT = Path(__file__).resolve().parents[2]
READY = "The server is fired up and ready to roll!"
COMMANDS = tuple(typer.main.get_command(app).commands)  # type: ignore[attr-defined]  # every command, later ones too
SCRIPT = Path(sys.executable).parent / "diagbench"  # the console script, as a shell completes it


def cli(*args: str, env: dict[str, str] | None = None, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return run_cli(*args, env=env, cwd=cwd)


# -- help ---------------------------------------------------------------------------------


@pytest.mark.parametrize("command", ["", *COMMANDS])
def test_every_help_answers_to_h_and_names_values_in_plain_words(command):
    args = [command, "-h"] if command else ["-h"]
    result = run_cli(*args)
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("Usage: ")
    assert result.stdout == run_cli(*args[:-1], "--help").stdout
    metavars = re.sub(r"\{(port|value|python)\}", "", result.stdout)  # the spec's placeholders, quoted in help
    assert not re.search(r"<[a-z][^>]*>|\{[a-z_]+\}", metavars), result.stdout  # no <list[str]>, {spec}
    assert "--no-strict" not in result.stdout


@pytest.mark.parametrize("command", ["run", "probe", "isolate", "triage", "limit", "debug"])
def test_every_command_that_launches_says_its_exit_codes_in_its_help(command):
    shown = " ".join(run_cli(command, "-h").stdout.split())  # the epilog, as it is wrapped
    assert "Exit codes" in shown, shown
    assert re.search(r"\b0 \w", shown) and re.search(r"\b130 interrupted", shown), shown


PLACEHOLDERS = {
    "SPEC", "RUN", "RUN_A", "RUN_B", "LOG", "NAME", "CMD", "DIR", "ID", "N", "LIST", "FILE", "D", "P", "ARG",
    "AXIS=LABEL", "NAME=VALUE", "REGEX", "PATH", "PACK,...", "COMMAND",
    "AXIS=LABEL,...", "SPEC|CMD", "DEPS", "PKG==A..B", "OUTCOME[:CLASS]", "SERVER", "C", "ENV",
    "OPT=LO..HI", "NAME=LO..HI", "URL", "ATTEMPT",
}  # fmt: skip


def test_every_value_is_named_from_one_vocabulary_and_an_option_alike_everywhere():
    group = typer.main.get_command(app)
    seen: dict[str, set[str]] = {}
    for name, command in group.commands.items():
        if command.hidden:
            continue
        for param in command.params:
            if getattr(param, "is_flag", False):
                continue
            word = param.metavar or param.human_readable_name
            if "|" in word.strip("[]"):
                continue  # choices, spelt out: --format table|md|json
            assert word in PLACEHOLDERS, (name, param.name, word)  # not GOOD, RUNS_DIR, GOOD_ENV
            seen.setdefault(param.opts[0], set()).add(word.removesuffix(",..."))  # one, or a comma list of them
    assert {k: v for k, v in seen.items() if len(v) > 1} == {}, seen  # --runs-dir DIR in every command
    assert seen["--runs-dir"] == {"DIR"} and seen["--good"] == {"CMD"}


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (
            ["plan"],
            "diagbench: plan: missing SPEC (the experiment's YAML spec); usage: diagbench plan [OPTIONS] SPEC; more: diagbench plan -h",
        ),
        (
            ["diff", "runs/a"],
            "diagbench: diff: missing RUN_B (the later run); usage: diagbench diff [OPTIONS] RUN_A RUN_B; more: diagbench diff -h",
        ),
        (
            ["report", "--format", "xx", "r"],
            "diagbench: report: invalid value for '--format' / '-f': 'xx' is not one of",
        ),
        (
            ["frobnicate"],
            "diagbench: no such command 'frobnicate'; usage: diagbench [OPTIONS] COMMAND [ARGS]...; more: diagbench -h",
        ),
        (["isolate"], "diagbench: isolate: missing --good CMD (the launch that comes up"),
    ],
)
def test_a_command_line_mistake_is_one_diagbench_line_with_the_usage(args, message):
    done = cli(*args)
    assert done.returncode == 2
    assert done.stderr.startswith(message) and done.stderr.count("\n") == 1, done.stderr
    assert "Error:" not in done.stderr and "Try '" not in done.stderr


def test_top_level_help_lists_commands_in_reading_order_run_first():
    listed = re.findall(r"^  (\w+)  ", run_cli("-h").stdout.split("Commands:")[1], re.MULTILINE)
    shown = [name for name in listed if name in COMMANDS]
    assert shown[:5] == ["run", "plan", "report", "diff", "isolate"]
    assert sorted(shown) == sorted(name for name in COMMANDS if name != "worker")  # every public command, once


def test_run_help_lists_the_exit_codes_and_what_resume_needs():
    text = run_cli("run", "-h").stdout
    assert "Usage: root run [OPTIONS] [SPEC]" in text or "run [OPTIONS] [SPEC]" in text
    for code in ("0", "1", "2", "3", "130"):
        assert re.search(rf"^\s+{code}  \w", text, re.M), code
    assert "--only AXIS=LABEL" in text and "--repeat N" in text and "--resume RUN" in text


def test_version_has_help_and_prints_the_version():
    assert "--version             print diagbench's version and exit" in run_cli("-h").stdout
    from diagbench import __version__

    assert run_cli("--version").stdout == f"diagbench {__version__}\n"


def test_each_command_is_where_the_app_looks_for_it():
    """cli/commands.py imports a command's module only when the command is used: its table
    must name every registered command, and the module that registers it."""
    import importlib

    from diagbench.cli.commands import COMMAND_MODULES

    for module in set(COMMAND_MODULES.values()):
        importlib.import_module(f"diagbench.cli.{module}")
    registered = {
        info.name or typer.main.get_command_name(info.callback.__name__): info.callback.__module__
        for info in app.registered_commands
        if info.callback is not None
    }
    assert registered == {name: f"diagbench.cli.{module}" for name, module in COMMAND_MODULES.items()}


def test_classify_starts_without_what_other_commands_need(tmp_path):
    """`classify --json` imports its own module alone: not typer, the scheduler, the executor
    plugins or YAML (once the packs are cached: the first run parses them)."""
    log = tmp_path / "server.log"
    log.write_text(READY + "\n")
    code = (
        "import sys\nfrom diagbench.cli import main\n"
        f"sys.argv = ['diagbench', 'classify', '--json', {str(log)!r}]\n"
        "try:\n    main()\nexcept SystemExit:\n    pass\n"
        "print(sorted(m for m in sys.modules if m.startswith(('diagbench.cli.', 'diagbench.execute', 'yaml', 'typer'))))\n"
    )
    env = {**os.environ, "XDG_CACHE_HOME": str(tmp_path / "cache")}  # its own cache: another test's run never races it
    for _ in range(2):  # the first run fills the packs' cache, the second reads it
        done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, env=env)
    loaded = done.stdout.splitlines()[-1]
    assert loaded == str(["diagbench.cli.fastpath"]), done


# -- completion ---------------------------------------------------------------------------


def complete(words: str) -> list[str]:
    parts = words.split(" ")
    env = {**os.environ, "_DIAGBENCH_COMPLETE": "complete_bash", "COMP_WORDS": words, "COMP_CWORD": str(len(parts) - 1)}
    done = subprocess.run([str(SCRIPT)], capture_output=True, text=True, env=env, timeout=60)
    assert done.returncode == 0, done.stderr
    return done.stdout.split()


def test_the_shell_completes_commands_options_and_choices():
    assert complete("diagbench rep") == ["report"]
    assert complete("diagbench report --form") == ["--format"]
    assert complete("diagbench report --format ") == ["table", "md", "json", "junit", "html", "issue"]
    assert "--resume" in complete("diagbench run --re")
    demo = str(ROOT / "experiments" / "demo.yaml")
    assert complete(f"diagbench plan {demo} --only k") == ["kernel=mma", "kernel=stock"]
    assert complete(f"diagbench run {demo} --only inductor") == ["inductor_graphs=unset", "inductor_graphs=0"]


def test_install_completion_writes_a_script_and_sources_it(tmp_path):
    # typer detects the shell from the process tree, which differs between a terminal, a CI
    # runner and a background job; its test switch makes the shell an argument instead
    env = {**os.environ, "HOME": str(tmp_path), "_TYPER_COMPLETE_TEST_DISABLE_SHELL_DETECTION": "1"}
    done = subprocess.run([str(SCRIPT), "--install-completion", "bash"], capture_output=True, text=True, env=env)
    assert done.returncode == 0, done.stderr
    script = tmp_path / ".bash_completions" / "diagbench.sh"
    assert "_DIAGBENCH_COMPLETE=complete_bash" in script.read_text()
    assert f"source '{script}'" in (tmp_path / ".bashrc").read_text()


# -- --json -------------------------------------------------------------------------------


def test_plan_json_has_each_cell_with_argv_env_and_what_it_decides():
    data = json.loads(cli("plan", str(ROOT / "experiments" / "demo.yaml"), "--json").stdout)
    assert data["spec"] == "demo-compile-isolation" and data["cells_selected"] == data["cells_total"] == 6
    assert data["cwd"] == str(ROOT / "experiments")  # the default cwd: the spec's folder
    first = data["cells"][0]
    assert first["cell_id"] == "kernel=mma,compile=on,max_bs=32,inductor_graphs=unset"
    assert "--enable-torch-compile" in first["argv"] and "{port}" in first["argv"]
    assert first["env"] == {"SGLANG_SM120_MMA_FLASHMLA": "1", "TORCHINDUCTOR_CUDAGRAPHS": None}
    stock_on = next(
        c for c in data["cells"] if c["cell_id"].startswith("kernel=stock,compile=on,max_bs=32,inductor_graphs=unset")
    )
    assert stock_on["decides"] == ["kernel-is-blocker"]
    narrowed = json.loads(
        cli("plan", str(ROOT / "experiments" / "demo.yaml"), "--json", "--only", "compile=off").stdout
    )
    assert narrowed["cells_selected"] == 2 and narrowed["not_decidable"] == [
        "kernel-is-blocker",
        "inductor-graphs-collide",
    ]


def test_signatures_json_and_id_show_every_field_and_the_source():
    listed = json.loads(cli("signatures", "--json").stdout)
    ids = [s["id"] for s in listed]
    assert len(ids) == len(set(ids)) > 50
    capture = next(s for s in listed if s["id"] == "sglang.capture_failed")
    assert capture["class"] == "cuda_graph_capture" and capture["settles"] is True and "sglang" in capture["source"]
    anchored = next(s for s in listed if "{prefix}" in s["pattern"])
    assert "{prefix}" not in anchored["expanded"] and "rank" in anchored["expanded"]
    whole = cli("signatures", "--id", anchored["id"]).stdout
    assert f"pattern:   {anchored['pattern']}\n" in whole and f"expanded:  {anchored['expanded']}\n" in whole
    assert f"source:    {anchored['source']}" in whole
    assert cli("signatures", "--full").stdout.count("\nsource:") == len(listed)
    wrong = cli("signatures", "--id", "sglang.capture_faild")
    assert wrong.returncode == 2
    assert (
        wrong.stderr
        == "diagbench: --id sglang.capture_faild: no such signature (did you mean 'sglang.capture_failed'?)\n"
    )


def test_diff_json_of_the_two_gpu_runs():
    a, b = ROOT / "runs" / "refserver-capture-h200", ROOT / "runs" / "refserver-capture-h200-fresh-caches"
    done = cli("diff", str(a), str(b), "--json")
    assert done.returncode == 1  # one regression
    data = json.loads(done.stdout)
    assert data["regressions"] == 1 and data["from"]["run_id"] == "refserver-capture-h200"
    (cell,) = data["cells"]
    assert cell["cell_id"] == "kernel=torch,compile=on,inductor_graphs=unset,warmup=first"
    assert cell["before"]["outcomes"] == {"ready": 1} and cell["after"]["outcomes"] == {"failed:cuda_graph_capture": 1}
    assert cell["regression"] is True and len(data["unchanged"]) == 11
    assert data["verdicts"] == [{"id": "custom-kernel-breaks-capture", "before": "supported", "after": "refuted"}]
    assert data["warnings"] == [
        "the spec 'refserver-capture' changed between the runs (sha256 a895705b501b… and 21914cb08f1f…): "
        "a change may come from the spec, not the stack"
    ]
    assert cli("diff", str(a), str(b), "--format", "json").stdout == done.stdout
    page = cli("diff", str(a), str(b), "--format", "html").stdout
    assert page.startswith("<!doctype html>") and "REGRESSION" in page and "custom-kernel-breaks-capture" in page
    heads = re.findall(r"<thead>.*?</thead>", page, re.S)
    assert len(heads) == 2  # the cells' table and the verdicts' table say which side is which
    for head in heads:
        assert "before <code>refserver-capture-h200</code>" in head
        assert "after <code>refserver-capture-h200-fresh-caches</code>" in head


def test_classify_json_is_one_object():
    data = json.loads(cli("classify", str(ROOT / "tests" / "fixtures" / "sglang_capture_oom.log"), "--json").stdout)
    assert (data["outcome"], data["failure_class"]) == ("failed", "cuda_graph_capture")


# -- diff's rule for cells that did not run -----------------------------------------------


def rec(cell: str, outcome: str, attempt: str = "", failure_class: str | None = None) -> AttemptRecord:
    return AttemptRecord(
        cell_id=cell,
        repeat=1,
        attempt=attempt or cell,
        params={},
        command=[],
        env_changes={},
        outcome=Outcome(outcome),
        failure_class=failure_class,
    )


def view(run_id: str, records: list[AttemptRecord], spec: str = "s", sha: str = "a" * 64) -> RunView:
    return RunView(run_id, Path(run_id), spec, "", "", "h" * 64, sha, True, [], records, [], [], [])


@pytest.mark.parametrize("after", ["cancelled", "skipped", "internal_error", None])
def test_a_ready_cell_that_did_not_run_is_never_a_regression(after):
    before = view("a", [rec("x=1", "ready")])
    later = view("b", [rec("x=1", after)] if after else [])
    changes = diff_runs(before, later)
    assert changes.regressions == 0
    (change,) = changes.cells
    assert change.after.words == f"not run ({after or 'absent'})"


def test_cells_that_did_not_run_for_different_reasons_are_unchanged():
    changes = diff_runs(view("a", [rec("x=1", "cancelled")]), view("b", [rec("x=1", "skipped")]))
    assert changes.cells == [] and changes.regressions == 0


def test_repeats_read_k_of_n_and_one_failed_repeat_is_a_regression():
    before = view("a", [rec("x=1", "ready", "r1"), rec("x=1", "ready", "r2")])
    after = view("b", [rec("x=1", "ready", "r1"), rec("x=1", "failed", "r2", "oom"), rec("x=1", "cancelled", "r3")])
    (change,) = diff_runs(before, after).cells
    assert change.regression and change.after.words == "ready 1/2, failed:oom 1/2"
    assert cell_states(after.records)["x=1"] == CellState((("ready", 1), ("failed:oom", 1)), ())


def test_diff_warns_when_the_runs_come_from_different_specs():
    assert diff_runs(view("a", [], spec="one"), view("b", [], spec="two")).warnings == [
        "the runs come from different specs ('one' and 'two'): cells are matched by id"
    ]
    assert diff_runs(view("a", []), view("b", [])).warnings == []


# -- annotations --------------------------------------------------------------------------


def test_annotations_escape_what_github_would_misread():
    broken = view("a", [rec("mode=bad,bs=8", "crashed")])
    (line,) = github_annotations(broken)
    assert line == "::warning title=diagbench%3A mode=bad%2Cbs=8 (r1) crashed::"


def test_a_passing_run_annotates_no_error_only_a_violation_or_a_bug_is_one():
    predicted = Expectation.from_json(0, {"when": {"compile": ["on"]}, "outcome": ["failed:cuda_graph_capture"]})
    records = [
        rec("compile=on", "failed", "on", "cuda_graph_capture"),  # the expect said so
        rec("compile=off", "crashed", "off"),  # no expect covers it
        rec("compile=off", "internal_error", "bug"),  # diagbench's own failure
    ]
    records[0] = dataclasses.replace(records[0], params={"compile": "on"})
    run = dataclasses.replace(view("a", records), expectations=[predicted])
    levels = [line.split(" ", 1)[0] for line in github_annotations(run)]
    assert levels == ["::notice", "::warning", "::error"]
    assert "(as expected)" in github_annotations(run)[0]
    wrong = dataclasses.replace(records[0], outcome=Outcome.READY)
    violated = view_of_records([wrong], [predicted])
    assert [line.split(" ", 1)[0] for line in github_annotations(violated)] == ["::error"]


def view_of_records(records: list[AttemptRecord], expectations: list[Expectation]) -> RunView:
    """A view judged as `report` judges one: violations from the expectations."""
    return dataclasses.replace(
        view("a", records), expectations=expectations, violations=check_expectations(expectations, records)
    )


@pytest.fixture
def two_cells(tmp_path: Path) -> Path:
    """Two cells: `good` comes up; `slow` hangs until a marker file exists (so a run can be cut short)."""
    marker = tmp_path / "go"
    dispatch = tmp_path / "dispatch.py"
    ready = [str(FAKE), "out=Load weight begin. avail mem=1 GB", f"out={READY}", "hang"]
    dispatch.write_text(
        "import os, sys\n"
        f"ready = {ready!r}\n"
        f"hang = {[str(FAKE), 'out=Load weight begin. avail mem=1 GB', 'hang']!r}\n"
        f"go = sys.argv[1] == 'good' or os.path.exists({str(marker)!r})\n"
        "os.execv(sys.executable, [sys.executable, *(ready if go else hang)])\n"
    )
    spec = tmp_path / "spec.yaml"
    spec.write_text(
        f"""name: two
server:
  command: [{json.dumps(sys.executable)}, dispatch.py]   # relative: resolved in the spec's folder
  timeout: 60s
  grace: 2s
matrix:
  mode: {{args: ["{{value}}"], values: [good, slow]}}
expect:
  - {{when: {{mode: slow}}, outcome: ready}}
"""
    )
    return spec


def test_an_interrupted_run_prints_its_resume_command_which_needs_no_spec(two_cells, tmp_path):
    runs = tmp_path / "runs"
    proc = subprocess.Popen(
        [sys.executable, "-m", "diagbench", "run", "spec.yaml", "--runs-dir", str(runs)],
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    wait_until(
        lambda: any("Load weight begin." in p.read_text() for p in runs.glob("*/cells/002-*/server.log")),
        timeout=60,
        what="the slow cell to be up and hanging",
    )
    proc.send_signal(signal.SIGTERM)  # what Ctrl-C does too; SIGINT may be ignored in a background job
    out, err = proc.communicate(timeout=60)
    run = next(p for p in runs.iterdir() if p.name != "latest")
    assert proc.returncode == 130, err
    assert err.strip().endswith(f"Resume: diagbench run --resume {runs / run.name}")
    assert sweep_tagged(run.name) == []
    assert "[1/2 running 1] mode=slow: launching" in out, out  # plain lines: piped
    (tmp_path / "go").touch()
    again = cli("run", "--resume", str(runs / run.name), cwd=ROOT)  # elsewhere, and without the spec
    assert again.returncode == 0, again.stderr
    outcomes = [json.loads(p.read_text())["outcome"] for p in sorted(run.glob("cells/*/result.json"))]
    assert outcomes == ["ready", "ready"]
    assert (run / "report.html").is_file()


def test_resume_without_a_spec_or_a_run_is_one_message():
    done = cli("run")
    assert done.returncode == 2
    assert done.stderr == (
        "diagbench: give the experiment's spec (diagbench run SPEC), or --resume RUN to finish an interrupted run\n"
    )


def test_in_github_actions_a_violated_expect_is_an_error_with_its_deciding_line(tmp_path):
    spec = tmp_path / "spec.yaml"
    spec.write_text(
        f"""name: gha
server:
  command: {json.dumps(fake_command("err=torch.OutOfMemoryError: CUDA out of memory. Tried 2 GiB", "exit=1"))}
  timeout: 20s
matrix:
  bs: {{env: BS, values: ["8"]}}
expect:
  - {{when: {{bs: "8"}}, outcome: ready}}
hypotheses:
  - {{id: fits, claim: bs 8 fits, when: {{bs: "8"}}, supported_if: ready, refuted_if: "failed:oom"}}
"""
    )
    done = cli("run", str(spec), "--runs-dir", str(tmp_path / "runs"), env={"GITHUB_ACTIONS": "true"})
    assert done.returncode == 1
    annotations = [line for line in done.stdout.splitlines() if line.startswith("::")]
    assert annotations == [
        "::error title=diagbench%3A expect #1 violated by bs=8::wanted ready, got failed:oom: "
        "L1: torch.OutOfMemoryError: CUDA out of memory. Tried 2 GiB",
        "::notice title=diagbench%3A hypothesis fits refuted::bs=8 failed:oom",
    ]
    report = cli("report", str(tmp_path / "runs" / "latest"), env={"GITHUB_ACTIONS": "true"})
    assert [line for line in report.stdout.splitlines() if line.startswith("::")] == annotations
    quiet = cli("report", str(tmp_path / "runs" / "latest"), env={"GITHUB_ACTIONS": ""})
    assert "::error" not in quiet.stdout


def test_no_hypotheses_no_hash_line(tmp_path):
    spec = tmp_path / "spec.yaml"
    spec.write_text(
        f"name: bare\nserver: {{command: {json.dumps(fake_command(f'out={READY}', 'hang'))}, timeout: 20s}}\n"
        "matrix: {only: {env: X, values: ['1']}}\n"
    )
    done = cli("run", str(spec), "--runs-dir", str(tmp_path / "runs"))
    assert done.returncode == 0, done.stderr
    assert "hypotheses sha256" not in done.stdout
    assert "hypotheses sha256" not in cli("report", str(tmp_path / "runs" / "latest"), "--format", "md").stdout


# -- the README and the example workflow --------------------------------------------------


def test_the_readme_first_spec_runs_as_written(tmp_path):
    readme = (ROOT / "README.md").read_text()
    spec = readme.split("Start small.", 1)[1].split("```yaml\n", 1)[1].split("```", 1)[0]
    assert len(spec.strip().splitlines()) <= 20
    (tmp_path / "first.yaml").write_text(spec)
    done = cli("run", "first.yaml", cwd=tmp_path, env={"COLUMNS": "80"})
    assert done.returncode == 0, done.stdout + done.stderr
    assert re.search(r"^\[1/2 running 0\] bind=loopback: ready after [\d.]+s: GET / -> 200$", done.stdout, re.M)
    assert re.search(r"^\[2/2 running 0\] bind=bogus: crashed after [\d.]+s: exited before ready", done.stdout, re.M)
    assert re.search(r"^bogus-address-fails +supported$", done.stdout, re.M)  # not_ready held
    assert "(complete) at\n" in done.stdout
    run = (tmp_path / "runs" / "latest").resolve()
    assert (run / "report.html").is_file()
    assert sweep_tagged(run.name) == []


def test_the_example_workflow_installs_diagbench_and_runs_the_users_spec():
    import yaml

    workflow = yaml.safe_load((ROOT / "examples" / "github" / "gpu-smoke.yml").read_text())
    assert workflow["env"]["SPEC"].startswith(".github/") and workflow["env"]["DIAGBENCH"].startswith("diagbench")
    steps = [step.get("run", "") for step in workflow["jobs"]["smoke"]["steps"]]
    assert any('pip" install --quiet "$DIAGBENCH"' in s for s in steps)
    assert any(s.startswith('diagbench run "$SPEC"') for s in steps)
    assert not any("example.invalid" in s or "experiments/" in s for s in steps)
