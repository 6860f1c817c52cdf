"""`classify` on fixtures written from the reference's real strings (see fixtures/expected.yaml)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from diagbench.logs.classify import classify_file
from diagbench.logs.signatures import builtin_packs, load_packs

FIXTURES = Path(__file__).parent / "fixtures"
EXPECTED = yaml.safe_load((FIXTURES / "expected.yaml").read_text())
SIGS = load_packs(builtin_packs(), Path("."))


@pytest.mark.parametrize("name", sorted(EXPECTED))
@pytest.mark.parametrize("engine", ["auto", "re"])
def test_fixture(name: str, engine: str) -> None:
    want = EXPECTED[name]
    got = classify_file(FIXTURES / name, SIGS, engine).to_json()
    assert {k: got[k] for k in ("outcome", "failure_class", "secondary_classes", "line_no", "phase")} == {
        k: want[k] for k in ("outcome", "failure_class", "secondary_classes", "line_no", "phase")
    }


def test_every_fixture_is_listed() -> None:
    assert sorted(p.name for p in FIXTURES.glob("*.log")) == sorted(EXPECTED)


def test_no_failed_launch_is_called_ready() -> None:
    for name, want in EXPECTED.items():
        if want["outcome"] != "ready":
            assert classify_file(FIXTURES / name, SIGS).outcome != "ready", name


def test_cli_json_has_exactly_the_contract_keys() -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "diagbench", "classify", "--json", str(FIXTURES / "sglang_capture_oom.log")],
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 0
    data = json.loads(proc.stdout)
    assert set(data) == {
        "outcome",
        "failure_class",
        "secondary_classes",
        "signature",
        "line_no",
        "line",
        "phase",
        "server",
    }
    assert data["line"].startswith("Exception: Capture cuda graph failed: CUDA error: out of memory")
    assert data["signature"] == "sglang.capture_failed"


def test_cli_human_output_shows_context() -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "diagbench", "classify", str(FIXTURES / "vllm_capture_raw.log")],
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 0
    assert "outcome: failed:cuda_graph_capture" in proc.stdout
    assert ">      11 | (EngineCore_0 pid=2817) ERROR" in proc.stdout
    assert "phase reached: capture" in proc.stdout


def test_cli_missing_log_is_a_usage_error(tmp_path: Path) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "diagbench", "classify", str(tmp_path / "nope.log")], capture_output=True, text=True
    )
    assert proc.returncode == 2
    assert proc.stderr.startswith("diagbench: ") and "cannot read the log" in proc.stderr


def test_user_pack_from_a_file(tmp_path: Path) -> None:
    pack = tmp_path / "mine.yaml"
    pack.write_text(
        "pack: mine\nsignatures:\n  - {id: mine.boom, kind: failure, class: other, priority: 99, "
        "pattern: 'Warming up model'}\n"
    )
    sigs = load_packs(["tgi", str(pack)], tmp_path)
    got = classify_file(FIXTURES / "tgi_port.log", sigs)
    assert (got.signature, got.line_no) == ("mine.boom", 1)


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_run_decides_a_replayed_log_as_classify_does(runs, name: str) -> None:
    """One engine: a server that writes the fixture live gets the same decision."""
    from conftest import fake_command

    want = EXPECTED[name]
    weak = classify_file(FIXTURES / name, SIGS).signature == "generic.uncaught_exception"
    # an uncaught exception ends the process: live, the weak line names the crash
    then = "exit=1" if weak else "hang"
    # a hang can only end in the timeout, so keep it short there; elsewhere the timeout only
    # bounds a loaded machine's start-up (the decision comes from the log, long before it)
    timeout = "2s" if want["outcome"] == "unknown" else "30s"
    r = runs.one({"command": fake_command(f"replay={FIXTURES / name}", then), "timeout": timeout})
    if want["outcome"] == "unknown":
        assert r.outcome == "timeout"
        return
    if weak:
        assert (r.outcome, r.exit_code, r.evidence.line_no) == ("crashed", 1, want["line_no"])
        return
    assert (r.outcome, r.failure_class, r.evidence.line_no) == (
        want["outcome"],
        want["failure_class"],
        want["line_no"],
    )
    assert r.secondary_classes == want["secondary_classes"]


def test_cli_server_option_states_the_server(tmp_path: Path) -> None:
    log = tmp_path / "server.log"
    log.write_text("INFO:     Started server process [1]\nINFO:     Application startup complete.\nsome request\n")
    argv = [sys.executable, "-m", "diagbench", "classify", "--json", str(log)]
    bare = json.loads(subprocess.run(argv, capture_output=True, text=True).stdout)
    assert (bare["outcome"], bare["server"]) == ("ready", None)  # weak: the log ends after uvicorn's line
    given = json.loads(subprocess.run([*argv, "--server", "vLLM"], capture_output=True, text=True).stdout)
    assert (given["outcome"], given["signature"], given["server"]) == ("ready", "vllm.uvicorn_ready", "vllm")
    wrong = subprocess.run([*argv, "--server", "vlm"], capture_output=True, text=True)
    assert wrong.returncode == 2
    assert wrong.stderr.startswith("diagbench: unknown server 'vlm': did you mean 'vllm'? (expected one of: vllm, ")


def test_spec_server_kind_names_a_known_server(tmp_path: Path) -> None:
    from diagbench.errors import SpecError
    from diagbench.spec.load import load_spec

    spec = tmp_path / "spec.yaml"
    spec.write_text("name: x\nserver:\n  command: foo\n  kind: vlm\nmatrix:\n  a: {env: A, values: [1]}\n")
    with pytest.raises(SpecError) as caught:
        load_spec(spec)
    assert str(caught.value) == f"{spec}:4: server.kind: unknown server \"vlm\" (did you mean 'vllm'?)"
    spec.write_text(
        "name: x\nserver:\n  command: foo\n  kind: tgi\n  signatures: [sglang]\nmatrix:\n  a: {env: A, values: [1]}\n"
    )
    with pytest.raises(SpecError, match="none of the chosen signature packs has a ready line of tgi"):
        load_spec(spec)
    spec.write_text("name: x\nserver:\n  command: foo\n  kind: Llama.cpp\nmatrix:\n  a: {env: A, values: [1]}\n")
    assert load_spec(spec).server.kind == "llamacpp"


def test_run_with_server_kind_takes_its_own_ready_line(runs) -> None:
    """A server that only prints uvicorn's line: ready when the spec says it is vLLM, else a timeout."""
    from conftest import fake_command

    command = fake_command(
        "out=INFO:     Started server process [7]", "out=INFO:     Application startup complete.", "hang"
    )
    known = runs.one({"command": command, "kind": "vllm", "timeout": "10s"})
    assert (known.outcome, known.signature, known.evidence.line_no) == ("ready", "vllm.uvicorn_ready", 2)
    unknown = runs.one({"command": command, "timeout": "1s"}, name="no-kind")
    assert unknown.outcome == "timeout"
