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
    assert set(data) == {"outcome", "failure_class", "secondary_classes", "signature", "line_no", "line", "phase"}
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
