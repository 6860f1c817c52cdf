"""Debug sets as data: the built-in files, the loader's refusals (a FIFO, a huge file, a variable
that loads code), and which sets a failure gets (pure)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from diagbench.debug.plan import plan_debug
from diagbench.debug.sets import ANY, builtin_files, load_sets
from diagbench.errors import SpecError
from diagbench.records.record import AttemptRecord
from diagbench.triage.apply import Launch
from diagbench.vocab import FAILURE_CLASSES, OUTCOMES, Outcome


def failed(failure_class: str | None, outcome: Outcome = Outcome.FAILED) -> AttemptRecord:
    return AttemptRecord("none", 1, "000-none-r1", {}, [], {}, outcome, failure_class=failure_class)


def test_every_built_in_set_cites_a_source_and_names_known_failures() -> None:
    catalogue = load_sets()
    assert len(builtin_files()) >= 6 and len(catalogue.sets) >= 10
    for found in catalogue.sets:
        assert len(found.source) > 40, found.id  # a file, a function or the words it quotes
        assert found.why, found.id
        assert all(word in (*FAILURE_CLASSES, *OUTCOMES) for word in found.when), found.id
    ids = {s.id for s in catalogue.sets}
    assert {"cuda.launch-blocking", "nccl.debug-info", "torch.dynamo-verbose", "triton.print-autotuning"} <= ids


@pytest.mark.parametrize(
    ("record", "server", "expected"),
    [
        (failed("illegal_memory_access"), None, ["+ CUDA_LAUNCH_BLOCKING=1", "+ TRITON_DEBUG=1"]),
        (failed("cuda_graph_capture"), "refserver", ["+ CUDA_LAUNCH_BLOCKING=1", "+ TRITON_PRINT_AUTOTUNING=1"]),
        (
            failed("nccl"),
            None,
            [
                "+ NCCL_DEBUG=INFO",
                "+ NCCL_DEBUG_SUBSYS=INIT,BOOTSTRAP,NET,GRAPH,ENV",
                "+ TORCH_DISTRIBUTED_DEBUG=DETAIL",
            ],
        ),
        (failed("torch_compile"), None, ["+ TORCHDYNAMO_VERBOSE=1", "+ TORCH_LOGS=+dynamo"]),
        (failed(None, Outcome.CRASHED), None, ["+ PYTHONFAULTHANDLER=1"]),
        (failed("oom"), "vllm", ["+ VLLM_LOGGING_LEVEL=DEBUG"]),
        (failed("oom"), "sglang", ["+ --log-level debug"]),
        (failed("oom"), None, []),
    ],
)
def test_a_failure_gets_the_settings_its_class_calls_for(record, server, expected) -> None:
    plan = plan_debug(load_sets(), Launch(("srv", "--port", "{port}"), {}), server, record, wrappers=False)
    assert [s.change for s in plan.settings] == expected


def test_a_setting_the_command_has_already_is_left_out_and_said() -> None:
    launch = Launch(("srv",), {"CUDA_LAUNCH_BLOCKING": "1", "TRITON_DEBUG": "1"})
    plan = plan_debug(load_sets(), launch, None, failed("illegal_memory_access"), wrappers=False)
    assert plan.settings == ()
    assert plan.notes == (
        "cuda.launch-blocking: already set in the command",
        "triton.debug: already set in the command",
        "cuda.compute-sanitizer: a wrapper, launched only with --sanitizer",
    )


def test_a_wrapper_is_used_only_where_it_is_installed(tmp_path: Path) -> None:
    plan = plan_debug(
        load_sets(), Launch(("srv",), {"PATH": str(tmp_path)}), None, failed("illegal_memory_access"), True
    )
    assert "cuda.compute-sanitizer: compute-sanitizer is not installed here (not on PATH)" in plan.notes
    tool = tmp_path / "compute-sanitizer"
    tool.write_text("#!/bin/sh\n")
    tool.chmod(0o755)
    plan = plan_debug(
        load_sets(), Launch(("srv",), {"PATH": str(tmp_path)}), None, failed("illegal_memory_access"), True
    )
    assert plan.launch.argv == ("compute-sanitizer", "--tool", "memcheck", "srv")
    assert "+ wrap: compute-sanitizer --tool memcheck" in [s.change for s in plan.settings]


def sets_file(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "mine.yaml"
    path.write_text(text)
    return path


def test_a_users_set_adds_and_replaces_a_built_in_one(tmp_path: Path) -> None:
    path = sets_file(
        tmp_path,
        "server: any\nsets:\n"
        "  - {id: cuda.launch-blocking, for: [oom], env: {CUDA_LAUNCH_BLOCKING: '1'}, source: our runbook}\n"
        "  - {id: team.verbose, for: [oom], add: [--verbose], source: our runbook, finds: ['^DEBUG ']}\n",
    )
    catalogue = load_sets([path])
    plan = plan_debug(catalogue, Launch(("srv",), {}), None, failed("oom"), False)
    assert [s.change for s in plan.settings] == ["+ CUDA_LAUNCH_BLOCKING=1", "+ --verbose"]
    illegal = plan_debug(catalogue, Launch(("srv",), {}), None, failed("illegal_memory_access"), False)
    assert [s.set for s in illegal.settings] == ["triton.debug"]  # the built-in launch-blocking set is retired for it
    assert next(s for s in catalogue.sets if s.id == "team.verbose").server == ANY


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            "server: any\nsets:\n  - {id: x, for: [oom], env: {LD_PRELOAD: /tmp/evil.so}, source: s}\n",
            "mine.yaml:3: sets[0].env.LD_PRELOAD: LD_PRELOAD is not a debug setting: it changes what the server loads",
        ),
        (
            "server: any\nsets:\n  - {id: x, for: [oom], env: {PYTHONPATH: /tmp}, source: s}\n",
            "mine.yaml:3: sets[0].env.PYTHONPATH: PYTHONPATH is not a debug setting",
        ),
        (
            "server: any\nsets:\n  - {id: x, for: [oom], env: {DIAGBENCH_ATTEMPT: x}, source: s}\n",
            "mine.yaml:3: sets[0].env.DIAGBENCH_ATTEMPT: DIAGBENCH_ATTEMPT is not a debug setting",
        ),
        ("server: any\nsets:\n  - {id: x, for: [oom], env: {A: '1'}}\n", "mine.yaml:3: sets[0]: missing key 'source'"),
        ("server: any\nsets:\n  - {id: x, for: [oom], source: s}\n", "expected a change: env, set, add or wrap"),
        ("server: any\nsets:\n  - {id: x, for: [oops], env: {A: '1'}, source: s}\n", '"oops" is no failure class'),
        ("server: nope\nsets: []\n", 'unknown server "nope"'),
        (
            "server: any\nsets:\n  - {id: x, for: [oom], wrap: [/bin/sh, -c, 'rm -rf ~'], source: s}\n",
            "/bin/sh is a shell, not a tool that runs the command",
        ),
        (
            "server: any\nsets:\n  - {id: x, for: [oom], env: {A: '1'}, finds: ['('], source: s}\n",
            "invalid regular expression",
        ),
    ],
)
def test_a_debug_set_file_mistake_names_its_file_and_line(tmp_path: Path, text: str, message: str) -> None:
    with pytest.raises(SpecError) as caught:
        load_sets([sets_file(tmp_path, text)])
    assert message in str(caught.value)


def test_a_fifo_or_a_huge_file_is_refused_without_reading_it(tmp_path: Path) -> None:
    fifo = tmp_path / "fifo.yaml"
    os.mkfifo(fifo)  # no writer: reading it would block for ever
    with pytest.raises(SpecError, match="not a regular file"):
        load_sets([fifo])
    huge = tmp_path / "huge.yaml"
    with huge.open("wb") as handle:
        handle.truncate(1 << 30)  # sparse: 1 GB that costs nothing on disk
    with pytest.raises(SpecError, match="1,073,741,824 bytes: larger than the 1024 KiB a YAML file may be here"):
        load_sets([huge])
    with pytest.raises(SpecError, match="no such file"):
        load_sets([tmp_path / "missing.yaml"])
