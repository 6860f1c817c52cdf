"""`diagbench triage` of a real vLLM (its CPU build): two of its start-up failures triaged to a
launch that comes up, each priced with real completions. Opt-in like tests/launch/test_vllm_real.py
(scripts/vllm-cpu/prepare.sh, DIAGBENCH_VLLM_TESTS=1; CI: .ci/vllm.sh); each launch takes
20-90 s on two cores."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from test_triage import Recorder, assert_schemas_hold

from diagbench.isolate.problem import ServerRules
from diagbench.launch.process import sweep_tagged
from diagbench.triage.problem import from_command
from diagbench.triage.record import Status
from diagbench.triage.run import TriageOptions, TriageResult, triage

pytestmark = pytest.mark.vllm

VLLM = Path("/tmp/vllmcpu-venv/bin/vllm")
LLAMA = Path("/tmp/tiny-llama")  # max_position_embeddings 512; 1 KiB of KV cache a token (float32)
RULES = ServerRules(signatures=("vllm", "pytorch", "generic"), timeout=360.0, grace=5.0)


def serve(tmp_path: Path, *args: str, env: str = "VLLM_CPU_KVCACHE_SPACE=1") -> str:
    """`vllm serve` of the tiny model as a user would paste it (its TMPDIR the test's own)."""
    words = f"{VLLM} serve {LLAMA} --host 127.0.0.1 --port {{port}} --served-model-name tiny --dtype float32"
    return f"{env} HF_HUB_OFFLINE=1 VLLM_NO_USAGE_STATS=1 TMPDIR={tmp_path} {words} --enforce-eager {' '.join(args)}"


def run(tmp_path: Path, command: str) -> TriageResult:
    if not VLLM.exists() or not LLAMA.exists():
        pytest.fail("no vLLM to launch: run scripts/vllm-cpu/prepare.sh first")
    problem = from_command(command, None, RULES, (), 5, tmp_path)
    result = triage(problem, TriageOptions(tmp_path / "runs"), Recorder([]))
    deadline = time.monotonic() + 10
    while (left := sweep_tagged(result.run_dir.path)) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert left == [], f"processes left behind: {left}"
    assert_schemas_hold(result.run_dir.path)
    return result


def test_a_max_model_len_beyond_the_model_is_halved_until_it_comes_up(tmp_path):
    result = run(tmp_path, serve(tmp_path, "--max-model-len", "1024"))
    found = result.triage
    assert found.server == "vllm" and found.status is Status.FOUND
    assert found.target is not None and found.target.evidence is not None
    assert (found.target.outcome, found.target.failure_class, found.target.signature) == (
        "failed",
        "other",
        "vllm.config_value_error",
    )
    assert found.target.evidence.text.startswith("  Value error, User-specified max_model_len (1024)")
    assert [t.id for t in found.remedies] == ["vllm.halve-max-model-len"]
    halved = found.remedies[0]
    assert halved.works and halved.change == ("~ --max-model-len 1024 -> 512",)
    assert halved.price is not None and halved.price.ok == 5 and halved.price.tokens_per_s > 0
    assert found.recommendation is not None and found.recommendation.command.endswith("--max-model-len 512")


def test_a_kv_cache_too_small_for_one_request_gets_a_shorter_context(tmp_path):
    # 400000 bytes hold about 390 tokens: a 512-token request cannot fit, a 256-token one can
    result = run(tmp_path, serve(tmp_path, "--max-model-len", "512", "--kv-cache-memory-bytes", "400000", env=""))
    found = result.triage
    assert found.target is not None and (found.target.failure_class, found.target.signature) == (
        "oom",  # on the CPU backend the KV cache is host memory (vllm.cpu_kv_cache_too_small)
        "vllm.cpu_kv_cache_too_small",
    )
    tried = {t.id: t for t in found.remedies}
    # raising --gpu-memory-utilization is vLLM's own advice, but an explicit KV size overrides it
    assert not tried["vllm.raise-gpu-memory-utilization"].works
    assert tried["vllm.halve-max-model-len"].works
    assert tried["vllm.halve-max-model-len"].change == ("~ --max-model-len 512 -> 256",)
    assert found.recommendation is not None and found.recommendation.remedy == "vllm.halve-max-model-len"
