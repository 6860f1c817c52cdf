"""`diagbench triage` with real processes: the simulator fails to capture under torch.compile,
and the remedies SGLang advises are launched, judged and priced. Every test checks that no
process of the run is left and that the records match their schemas."""

from __future__ import annotations

import dataclasses
import json
import os
import shlex
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from diagbench.isolate.problem import ServerRules
from diagbench.launch.process import sweep_tagged
from diagbench.schemas import load_schema
from diagbench.triage.problem import from_command
from diagbench.triage.record import Status, read_triage
from diagbench.triage.run import TriageOptions, TriageResult, triage

SIMULATOR = f"{shlex.quote(sys.executable)} -m diagbench.simulator --port {{port}} --speed 4"
CAPTURE = f"{SIMULATOR} --enable-torch-compile"  # fails: StreamCapture under torch.compile
RULES = ServerRules(signatures=("sglang", "pytorch", "generic"), timeout=30.0, grace=2.0)


def assert_none_left(run_dir: Path) -> None:
    deadline = time.monotonic() + 3
    while (left := sweep_tagged(run_dir)) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert left == [], f"processes left behind: {left}"


def assert_schemas_hold(run_dir: Path) -> None:
    for name, path in (("triage", "triage.json"), ("manifest", "manifest.json"), ("verdicts", "verdicts.json")):
        jsonschema.validate(json.loads((run_dir / path).read_text()), load_schema(name))
    for result in run_dir.glob("cells/*/result.json"):
        jsonschema.validate(json.loads(result.read_text()), load_schema("result"))


class Recorder:
    """RunEvents that read the manifest from disk as each launch starts."""

    def __init__(self, run_dirs: list[Path]) -> None:
        self.run_dirs = run_dirs
        self.registered_at_start: dict[str, list[str]] = {}

    def on_open(self, run_dir: Any, planned: Any, done: Any = ()) -> None:
        self.run_dirs.append(run_dir.path)

    def on_wait(self, item: Any, slot: Any, why: str) -> None:
        return None

    def on_helpers(self, what: str, pending: Any, elapsed_s: float, limit_s: float) -> None:
        return None

    def on_start(self, item: Any, slot: Any) -> None:
        manifest = json.loads((self.run_dirs[-1] / "manifest.json").read_text())
        self.registered_at_start[item.cell.id] = [h["id"] for h in manifest["hypotheses"]]

    def on_phase(self, item: Any, phase: str) -> None:
        return None

    def on_done(self, item: Any, record: Any) -> None:
        return None


@pytest.fixture
def triages(tmp_path: Path):
    run_dirs: list[Path] = []

    def run(
        command: str,
        price: int = 0,
        first: bool = False,
        remedies: tuple[Path, ...] = (),
        server: str | None = None,
        rules: ServerRules = RULES,
        parallel: int = 1,
    ) -> tuple[TriageResult, Recorder]:
        problem = from_command(command, server, rules, remedies, price, tmp_path)
        events = Recorder(run_dirs)
        options = TriageOptions(tmp_path / "runs", first=first, parallel=parallel)
        return triage(problem, options, events), events

    yield run
    for run_dir in run_dirs:
        assert_none_left(run_dir)
        assert_schemas_hold(run_dir)


def test_a_capture_failure_is_triaged_to_the_cheapest_remedy_that_works_and_priced(triages):
    # at full speed: 32 tokens take 64 ms with graphs, 102 ms without (even with compile's 0.8)
    full_speed = CAPTURE.replace(" --speed 4", "")
    result, events = triages(full_speed, price=12)
    found = result.triage
    assert found.status is Status.FOUND and found.server == "simulator"
    assert found.target is not None and (found.target.outcome, found.target.failure_class) == (
        "failed",
        "cuda_graph_capture",
    )
    assert "dependency created on uncaptured work" in found.target.evidence.text
    tried = {t.id: t for t in found.remedies}
    # cheapest expected cost first; the variable that is not set is no remedy here
    assert list(tried) == [
        "simulator.halve-cuda-graph-max-bs",
        "simulator.no-torch-compile",
        "simulator.disable-cuda-graph",
    ]
    halve, no_compile, eager = tried.values()
    assert (halve.outcome, halve.failure_class, halve.works) == ("failed", "cuda_graph_capture", False)
    assert halve.change == ("+ --cuda-graph-max-bs 16",) and halve.price is None
    assert no_compile.works and eager.works
    for t in (no_compile, eager):
        assert t.startup_s is not None and t.startup_s > 0
        assert t.price is not None and t.price.ok == 12 and t.price.failed == 0
    # the simulator decodes a token in 2 ms with graphs, 4 ms * 0.8 with compile and no graphs
    assert no_compile.price.tokens_per_s > eager.price.tokens_per_s
    assert no_compile.price.latency_p50_s >= 0.064 and eager.price.latency_p50_s >= 0.102
    rec = found.recommendation
    assert rec is not None and rec.remedy == "simulator.no-torch-compile"
    assert rec.changes == ("- --enable-torch-compile",)
    assert rec.command == SIMULATOR.replace(" --speed 4", "")
    # pre-registered: every remedy's claim was in the manifest before the first remedy launched
    assert events.registered_at_start["none"] == []
    assert events.registered_at_start["simulator.halve-cuda-graph-max-bs"] == list(tried)
    verdicts = json.loads((result.run_dir.path / "verdicts.json").read_text())
    assert [(v["id"], v["verdict"]) for v in verdicts] == [
        ("simulator.halve-cuda-graph-max-bs", "refuted"),
        ("simulator.no-torch-compile", "supported"),
        ("simulator.disable-cuda-graph", "supported"),
    ]
    assert verdicts[1]["claim"] == "`- --enable-torch-compile` makes it come up"


def test_first_stops_at_the_first_remedy_that_comes_up(triages):
    result, events = triages(CAPTURE, first=True)
    assert result.triage.status is Status.FOUND
    assert list(events.registered_at_start) == [
        "none",
        "simulator.halve-cuda-graph-max-bs",
        "simulator.no-torch-compile",
    ]
    eager = result.triage.remedies[-1]
    assert eager.id == "simulator.disable-cuda-graph" and eager.outcome is None
    assert eager.skipped == "--first: a remedy already came up"


def test_remedies_launched_at_once_give_the_same_answer(triages):
    result, _ = triages(CAPTURE, parallel=3)
    tried = {t.id: (t.outcome, t.works) for t in result.triage.remedies}
    assert tried == {
        "simulator.halve-cuda-graph-max-bs": ("failed", False),
        "simulator.no-torch-compile": ("ready", True),
        "simulator.disable-cuda-graph": ("ready", True),
    }
    starts = sorted(
        json.loads(p.read_text())["started_at"] for p in result.run_dir.path.glob("cells/00[123]-*/result.json")
    )
    ends = sorted(
        json.loads(p.read_text())["ended_at"] for p in result.run_dir.path.glob("cells/00[123]-*/result.json")
    )
    assert starts[-1] < ends[0]  # all three ran at once
    assert result.triage.recommendation is not None


def test_a_command_that_comes_up_is_said_so_and_nothing_else_launches(triages):
    result, events = triages(SIMULATOR)
    assert result.triage.status is Status.COMES_UP and result.triage.status.exit_code == 0
    assert list(events.registered_at_start) == ["none"] and result.triage.remedies == ()


def test_a_users_remedies_file_adds_and_overrides(triages, tmp_path):
    mine = tmp_path / "mine.yaml"
    mine.write_text(
        "server: simulator\n"
        "remedies:\n"
        "  - id: simulator.no-torch-compile\n"  # overrides the built-in one: now the most expensive
        "    for: [cuda_graph_capture]\n"
        "    change: {remove: [--enable-torch-compile]}\n"
        "    cost: 5\n"
        "    source: our team's runbook\n"
        "  - id: team.small-graphs-no-compile\n"
        "    for: cuda_graph_capture\n"
        "    change: {remove: --enable-torch-compile, set: {--cuda-graph-max-bs: '8'}}\n"
        "    cost: 1\n"
        "    source: our team's runbook\n"
    )
    result, _ = triages(CAPTURE, remedies=(mine,))
    ids = [t.id for t in result.triage.remedies]
    assert ids == [  # by cost; among equals, the built-in files first, then the user's
        "simulator.halve-cuda-graph-max-bs",
        "team.small-graphs-no-compile",
        "simulator.disable-cuda-graph",
        "simulator.no-torch-compile",
    ]
    first = result.triage.remedies[1]
    assert first.works and first.change == ("- --enable-torch-compile", "+ --cuda-graph-max-bs 8")
    assert result.triage.remedies[-1].source == "our team's runbook"
    assert result.triage.recommendation is not None
    assert result.triage.recommendation.remedy == "team.small-graphs-no-compile"  # unpriced: the least given up


def test_pairs_are_launched_only_when_no_single_remedy_works(triages, tmp_path):
    # two causes at once: torch.compile breaks capture, and bs 256 runs out of memory; the one
    # remedy that lifts both (no graphs at all) is kept for timeouts by the user's file
    mine = tmp_path / "no-eager.yaml"
    mine.write_text(
        "server: simulator\n"
        "remedies:\n"
        "  - {id: simulator.disable-cuda-graph, for: timeout, change: {add: --disable-cuda-graph}, source: t}\n"
    )
    command = f"TORCHINDUCTOR_CUDAGRAPHS=1 {CAPTURE} --cuda-graph-max-bs 256"
    result, events = triages(command, remedies=(mine,))
    singles = ["simulator.halve-cuda-graph-max-bs", "simulator.unset-inductor-cudagraphs", "simulator.no-torch-compile"]
    pairs = [
        "simulator.halve-cuda-graph-max-bs+simulator.unset-inductor-cudagraphs",
        "simulator.halve-cuda-graph-max-bs+simulator.no-torch-compile",
        "simulator.unset-inductor-cudagraphs+simulator.no-torch-compile",
    ]
    tried = {t.id: t for t in result.triage.remedies}
    assert list(tried) == singles + pairs
    assert [tried[i].works for i in singles + pairs] == [False, False, False, False, True, False]
    assert tried[pairs[1]].change == ("~ --cuda-graph-max-bs 256 -> 128", "- --enable-torch-compile")
    # the pairs were registered after the singles ended, before any pair launched
    assert events.registered_at_start[singles[0]] == singles
    assert events.registered_at_start[pairs[0]] == singles + pairs
    assert result.triage.status is Status.FOUND and result.triage.recommendation is not None
    assert result.triage.recommendation.remedy == pairs[1]


def test_price_without_a_pricing_request_says_so_and_keeps_start_up_times(triages, tmp_path):
    mine = tmp_path / "triton.yaml"  # a server with no built-in remedies, so no pricing request
    mine.write_text(
        "server: triton\n"
        "remedies:\n"
        "  - {id: team.eager, for: cuda_graph_capture, change: {add: --disable-cuda-graph}, source: t}\n"
    )
    # Triton's own ready lines would decide for a log of Triton's: --ready names the simulator's
    rules = dataclasses.replace(RULES, ready="The server is fired up and ready to roll!")
    result, _ = triages(CAPTURE, price=5, remedies=(mine,), server="triton", rules=rules)
    found = result.triage
    assert found.server == "triton" and [t.id for t in found.remedies] == ["team.eager"]
    eager = found.remedies[0]
    assert eager.works and eager.price is None and eager.startup_s is not None
    assert found.notes == (
        "--price 5: no pricing request is known for triton (a remedies file's price_request names one): "
        "start-up times only",
    )


MUTE = """import os, socket, sys, time
if not os.environ.get("REMEDY"):
    print("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB", flush=True)
    sys.exit(1)
listener = socket.socket()
listener.bind(("127.0.0.1", int(sys.argv[2])))
listener.listen(64)  # connections are taken by the kernel, and never answered
print("The server is fired up and ready to roll!", flush=True)
time.sleep(600)
"""


def test_a_remedy_whose_server_never_answers_is_priced_briefly_and_never_recommended(triages, tmp_path):
    (tmp_path / "mute.py").write_text(MUTE)
    mine = tmp_path / "triton.yaml"
    mine.write_text(
        "server: triton\n"
        "price_request: {path: /v1/completions, json: {prompt: hi}, timeout: 3s}\n"
        "remedies:\n"
        "  - {id: team.mute, for: oom, change: {env: {REMEDY: '1'}}, source: t}\n"
    )
    rules = dataclasses.replace(RULES, ready="The server is fired up and ready to roll!")
    command = f"{shlex.quote(sys.executable)} {tmp_path / 'mute.py'} --port {{port}}"
    started = time.monotonic()
    result, _ = triages(command, price=8, remedies=(mine,), server="triton", rules=rules)
    found = result.triage
    mute = found.remedies[0]
    assert mute.works and mute.price is not None
    assert (mute.price.ok, mute.price.failed) == (0, 1)  # stopped at the first request nobody answered
    assert mute.price.error is not None and mute.price.error.startswith("ReadTimeout")
    assert found.recommendation is None
    assert "came up but answered no pricing request, so never recommended: team.mute" in found.notes
    assert time.monotonic() - started < 30  # 8 requests of 3 s each were 24 s of pricing alone


# -- the command line -------------------------------------------------------------------------


def diagbench(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "diagbench", *args],
        capture_output=True,
        text=True,
        cwd=cwd,
        timeout=120,
        env={**os.environ, "COLUMNS": "250"},
    )


def test_no_remedy_for_the_class_is_exit_1_with_a_clear_message(tmp_path):
    done = diagbench("triage", f"{SIMULATOR} --no-such-flag", cwd=tmp_path)
    assert done.returncode == 1, done.stderr
    assert "no remedy known for failed:other of simulator (see diagbench remedies --server simulator; " in done.stderr
    assert "Traceback" not in done.stderr
    run_dir = next((tmp_path / "runs").glob("2*"))
    found = read_triage(run_dir)
    assert found is not None and found.status is Status.NO_REMEDY and found.recommendation is None
    assert_none_left(run_dir)
    assert_schemas_hold(run_dir)


def test_json_prints_triage_json_and_report_renders_it(tmp_path):
    done = diagbench("triage", CAPTURE, "--json", "--price", "5", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    printed = json.loads(done.stdout)
    run_dir = next((tmp_path / "runs").glob("2*"))
    assert printed == json.loads((run_dir / "triage.json").read_text())
    assert printed["recommendation"]["changes"] == ["- --enable-torch-compile"]
    table = diagbench("report", str(run_dir), cwd=tmp_path)
    assert table.returncode == 0 and "recommended: simulator.no-torch-compile" in table.stdout
    assert "comes up with / costs" in table.stdout
    md = diagbench("report", str(run_dir), "--format", "md", cwd=tmp_path)
    assert "**Recommended: `simulator.no-torch-compile`**" in md.stdout and "- --enable-torch-compile" in md.stdout
    html = diagbench("report", str(run_dir), "--format", "html", cwd=tmp_path)
    assert "<h2>Triage: a launch that works</h2>" in html.stdout
    assert "<h2>Triage: a launch that works</h2>" in (run_dir / "report.html").read_text()


def test_format_issue_has_what_a_maintainer_asks_for_and_no_secret(tmp_path):
    secret, token = "sk-live-0123456789abcdef", "hf_0123456789abcdefghij"
    command = f"HF_TOKEN={token} {CAPTURE} --api-key {secret}"
    done = diagbench("triage", command, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    run_dir = next((tmp_path / "runs").glob("2*"))
    issue = diagbench("report", str(run_dir), "--format", "issue", "--for", "sglang", cwd=tmp_path)
    assert issue.returncode == 0, issue.stderr
    text = issue.stdout
    assert secret not in text and token not in text and "--api-key '<redacted>'" in text
    assert text.startswith("## Launch fails with failed:cuda_graph_capture: Exception: Capture cuda graph failed")
    assert "https://github.com/sgl-project/sglang/issues/new/choose" in text and "python3 -m sglang.check_env" in text
    assert "### Environment" in text and "- **python**: " in text
    assert ">    " in text and "CUDA error: dependency created on uncaptured work in another stream" in text
    assert "### What was tried" in text and "It comes up with: `- --enable-torch-compile`." in text
    for path in run_dir.rglob("*"):  # diagbench's own files: the server's raw log is the server's words
        if path.is_file() and path.name != "server.log":
            assert secret not in path.read_text() and token not in path.read_text(), path
    bad = diagbench("report", str(run_dir), "--format", "issue", "--for", "vlm", cwd=tmp_path)
    assert bad.returncode == 2 and "--for vlm: unknown server" in bad.stderr


def test_ctrl_c_keeps_the_records_and_exits_130(tmp_path):
    slow = tmp_path / "slow.yaml"
    slow.write_text(
        "server: simulator\n"
        "remedies:\n"
        "  - {id: slow.crawl, for: cuda_graph_capture, change: {set: {--speed: '0.01'}}, cost: 1, source: t}\n"
    )
    proc = subprocess.Popen(
        [sys.executable, "-m", "diagbench", "triage", CAPTURE, "--remedies", str(slow)],
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        env={**os.environ, "COLUMNS": "200"},
    )
    deadline = time.monotonic() + 30
    while not list(tmp_path.glob("runs/*/cells/*-slow.crawl-r1/server.log")) and time.monotonic() < deadline:
        time.sleep(0.05)
    time.sleep(0.5)
    proc.send_signal(signal.SIGINT)
    output, _ = proc.communicate(timeout=30)
    assert proc.returncode == 130, output.decode()
    assert b"Traceback" not in output
    run_dir = next((tmp_path / "runs").glob("2*"))
    outcomes = [json.loads(p.read_text())["outcome"] for p in sorted(run_dir.glob("cells/*/result.json"))]
    # the command, halving, the crawl stopped mid-launch, the two never launched
    assert outcomes == ["failed", "failed", "cancelled", "cancelled", "cancelled"]
    found = read_triage(run_dir)
    assert found is not None and found.status is Status.INTERRUPTED
    tried = {t.id: t for t in found.remedies}
    assert tried["simulator.halve-cuda-graph-max-bs"].outcome == "failed"
    assert tried["slow.crawl"].outcome is None and tried["slow.crawl"].attempts == ("002-slow.crawl-r1",)
    assert_none_left(run_dir)
    assert_schemas_hold(run_dir)


def test_remedies_lists_them_with_sources(tmp_path):
    done = diagbench("remedies", "--server", "vllm", "--class", "cuda_graph_capture", "--json", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    rows = json.loads(done.stdout)
    assert [r["id"] for r in rows] == ["vllm.halve-max-num-seqs", "vllm.enforce-eager"]
    assert all(r["server"] == "vllm" and r["source"] for r in rows)
    bad = diagbench("remedies", "--class", "cuda_graph_captur", cwd=tmp_path)
    assert bad.returncode == 2 and "did you mean 'cuda_graph_capture'?" in bad.stderr


def test_format_issue_shows_the_cause_a_hang_and_the_environment_where_the_records_have_them(tmp_path):
    done = diagbench("triage", CAPTURE, "--first", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    run_dir = next((tmp_path / "runs").glob("2*"))
    # fields a newer diagbench writes (the log reader's cause, a hang's stacks, the environment)
    path = run_dir / "cells" / "000-none-r1" / "result.json"
    record = json.loads(path.read_text())
    record["cause"] = {
        "type": "torch.AcceleratorError",
        "message": "dependency created on uncaptured work",
        "line_no": 20,
    }
    record["hang"] = {
        "pid": 4242,
        "name": "scheduler",
        "thread": "MainThread",
        "frames": ["capture (cuda_graph_runner.py:455)"],
        "site": "capture",
    }
    path.write_text(json.dumps(record))
    manifest_path = run_dir / "manifest.json"
    manifest = json.loads(manifest_path.read_text())
    manifest["environment"] = {"driver": "580.159.03", "cuda": "13.0", "nccl": "2.27.7"}
    manifest_path.write_text(json.dumps(manifest))
    issue = diagbench("report", str(run_dir), "--format", "issue", cwd=tmp_path)
    assert issue.returncode == 0, issue.stderr
    text = issue.stdout
    assert "**Cause** (line 20): `torch.AcceleratorError`: dependency created on uncaptured work" in text
    assert "**Hang**: pid 4242 (scheduler), thread MainThread, at capture" in text
    assert "capture (cuda_graph_runner.py:455)" in text
    assert "- **driver**: 580.159.03" in text and "- **nccl**: 2.27.7" in text and "- **hostname**" not in text


def test_format_issue_of_a_plain_run_shows_each_way_it_failed_with_its_command(tmp_path):
    spec = tmp_path / "s.yaml"
    spec.write_text(
        "name: s\n"
        "server:\n"
        f"  command: {sys.executable} -m diagbench.simulator --port {{port}} --speed 4\n"
        "  signatures: [sglang, pytorch]\n"
        "  timeout: 30s\n"
        "matrix:\n"
        "  compile: {flag: --enable-torch-compile, values: [on, off]}\n"
        "  token: {env: HF_TOKEN, values: {a: hf_0123456789abcdefghij}}\n"
    )
    done = diagbench("run", str(spec), cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    run_dir = next((tmp_path / "runs").glob("2*"))
    text = diagbench("report", str(run_dir), "--format", "issue", cwd=tmp_path).stdout
    assert "hf_0123456789abcdefghij" not in text and "HF_TOKEN=" in text
    assert "--enable-torch-compile" in text.split("### Command")[1].split("```")[1]
    assert text.count("### `") == 1 and "failed:cuda_graph_capture (sglang.capture_failed)" in text
    assert "### What was tried" not in text  # no triage: nothing tried


def test_remedies_that_change_nothing_are_named_with_why_none_applied(tmp_path):
    mine = tmp_path / "mine.yaml"
    mine.write_text(
        "server: simulator\n"
        "remedies:\n"
        "  - id: team.slow-down\n"
        "    for: [other]\n"
        "    change: {set: {--speed: '4'}}\n"  # the command sets it so already
        "    cost: 1\n"
        "    source: our team's runbook\n"
    )
    done = diagbench("triage", f"{SIMULATOR} --no-such-flag", "--remedies", str(mine), cwd=tmp_path)
    assert done.returncode == 1, done.stderr
    assert (
        "no remedy applies to failed:other of simulator: those known for it (team.slow-down (~ --speed 4)) "
        "change nothing in this command" in " ".join(done.stderr.split())
    ), done.stderr
    assert "no remedy known" not in done.stderr


def test_a_triage_reports_html_counts_its_launches_draws_them_and_shows_code_as_code(tmp_path):
    done = diagbench("triage", CAPTURE, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    run_dir = next((tmp_path / "runs").glob("2*"))
    page = (run_dir / "report.html").read_text()
    launched = len(list((run_dir / "cells").iterdir()))
    assert f"{launched} of {launched} attempt(s) recorded" in page and "of 0 attempt" not in page
    assert "partial" not in page.split("</header>")[0]
    matrix = page.split("<h2>Matrix</h2>", 1)[1].split("</section>", 1)[0]
    assert "no-torch-compile" in matrix  # the remedies drawn as the matrix's cells
    assert "<code>- --enable-torch-compile</code> makes it come up" in page
    assert "`- --enable-torch-compile`" not in page


def test_quiet_prints_only_the_final_answer(tmp_path):
    done = diagbench("triage", CAPTURE, "--first", "--quiet", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("triage: "), done.stdout  # no live lines before the answer
    assert "recommended: " in done.stdout and "note:" not in done.stderr
