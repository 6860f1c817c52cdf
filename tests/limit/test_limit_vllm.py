"""`diagbench limit` of a real vLLM (its CPU build): the longest --max-model-len that fits a fixed
KV cache (VLLM_CPU_KVCACHE_SPACE=1: 1 GiB; the tiny Llama keeps 1 KiB a token), found by
bisection, agrees with the maximum vLLM itself estimates when one more token does not fit.
Opt-in like tests/launch/test_vllm_real.py (scripts/vllm-cpu/prepare.sh, DIAGBENCH_VLLM_TESTS=1;
CI: .ci/vllm.sh); each launch takes 40-120 s on two shared cores, six launches at most."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from test_limit import Steps, assert_schemas_hold

from conftest import wait_gone
from diagbench.isolate.problem import ServerRules
from diagbench.limit.launches import LaunchOptions
from diagbench.limit.problem import LimitRequest, from_command
from diagbench.limit.record import Status
from diagbench.limit.run import find_limit
from diagbench.limit.search import budget

pytestmark = pytest.mark.vllm

VLLM = Path("/tmp/vllmcpu-venv/bin/vllm")
LLAMA = Path("/tmp/tiny-llama")  # 2 layers x K,V x 2 KV heads x 32 x 4 bytes: 1 KiB of KV cache a token
RULES = ServerRules(signatures=("vllm", "pytorch", "generic"), timeout=360.0, grace=5.0)
# around 1 GiB / 1 KiB = 1048576 tokens; vLLM keeps the cache in blocks, so the limit is a little below
LO, HI = 1048440, 1048456


def command(tmp_path: Path) -> str:
    """`vllm serve` as a user would paste it: 1 GiB of KV cache, contexts past the model's 512 allowed."""
    env = "VLLM_CPU_KVCACHE_SPACE=1 VLLM_ALLOW_LONG_MAX_MODEL_LEN=1 HF_HUB_OFFLINE=1 VLLM_NO_USAGE_STATS=1"
    words = f"{VLLM} serve {LLAMA} --host 127.0.0.1 --port {{port}} --served-model-name tiny --dtype float32"
    return f"{env} TMPDIR={tmp_path} {words} --enforce-eager"


def test_the_longest_context_that_fits_the_kv_cache_is_vllms_own_estimate(tmp_path):
    if not VLLM.exists() or not LLAMA.exists():
        pytest.fail("no vLLM to launch: run scripts/vllm-cpu/prepare.sh first")
    given = LimitRequest(command(tmp_path), [f"--max-model-len={LO}..{HI}"])
    result = find_limit(
        from_command(given, RULES, tmp_path), LaunchOptions(tmp_path / "runs", "vllm-cpu-limit-maxlen"), Steps()
    )
    wait_gone(result.run_dir.path)
    assert_schemas_hold(result.run_dir.path)
    found = result.limit
    assert found.status is Status.FOUND and found.launches <= budget(LO, HI) == 6
    past = found.step(found.smallest_bad)
    assert past is not None and past.failure_class is not None and past.line is not None
    # vLLM's own words when the context does not fit: "... the estimated maximum model length is N"
    estimate = re.search(r"estimated maximum model length is (\d+)", past.line)
    assert estimate is not None, past.line
    assert (found.largest_ok, found.smallest_bad) == (int(estimate[1]), int(estimate[1]) + 1)
    assert found.step(found.largest_ok) is not None and found.step(found.largest_ok).outcome == "ready"
