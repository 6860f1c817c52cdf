"""The verdict rule and expectations, on records made by hand."""

from __future__ import annotations

from diagbench.judge.verdicts import check_expectations, judge
from diagbench.records.record import AttemptRecord
from diagbench.spec.hypotheses import Condition, Expectation, Hypothesis
from diagbench.spec.matrix import CellRow
from diagbench.vocab import Evidence, FailureClass, Outcome

CELLS = [
    CellRow("kernel=stock,compile=on", {"kernel": "stock", "compile": "on"}),
    CellRow("kernel=mma,compile=on", {"kernel": "mma", "compile": "on"}),
    CellRow("kernel=stock,compile=off", {"kernel": "stock", "compile": "off"}),
]
ON = Hypothesis(
    id="h",
    claim="c",
    when={"compile": ("on",)},
    supported_if=(Condition(Outcome.READY),),
    refuted_if=(Condition(Outcome.FAILED, FailureClass.CUDA_GRAPH_CAPTURE),),
    meaning={"supported": "S", "refuted": "R", "inconclusive": "I"},
)


def rec(cell: str, outcome: str, cls: str | None = None, repeat: int = 1) -> AttemptRecord:
    params = next(c.params for c in CELLS if c.id == cell)
    evidence = Evidence(3, f"{outcome} line") if outcome in ("ready", "failed") else None
    return AttemptRecord(
        cell_id=cell,
        repeat=repeat,
        attempt=f"{cell}-r{repeat}",
        params=dict(params),
        command=[],
        env_changes={},
        outcome=Outcome(outcome),
        failure_class=cls,
        evidence=evidence,
    )


def test_supported_when_every_deciding_attempt_matches():
    v = judge(ON, CELLS, [rec("kernel=stock,compile=on", "ready"), rec("kernel=mma,compile=on", "ready")])
    assert (v.verdict, v.meaning) == ("supported", "S")
    assert [d.cell_id for d in v.deciding] == ["kernel=stock,compile=on", "kernel=mma,compile=on"]


def test_refuted_if_any_deciding_attempt_matches_refuted_if():
    v = judge(
        ON,
        CELLS,
        [rec("kernel=stock,compile=on", "ready"), rec("kernel=mma,compile=on", "failed", "cuda_graph_capture")],
    )
    assert (v.verdict, v.meaning) == ("refuted", "R")
    assert v.reason == "kernel=mma,compile=on failed:cuda_graph_capture"


def test_failure_of_another_class_matches_neither():
    v = judge(ON, CELLS, [rec("kernel=stock,compile=on", "ready"), rec("kernel=mma,compile=on", "failed", "oom")])
    assert v.verdict == "inconclusive"
    assert v.reason == "kernel=mma,compile=on matched neither (failed:oom)"


def test_no_cells_run():
    v = judge(ON, CELLS, [])
    assert v.verdict == "inconclusive"
    assert v.reason == "kernel=stock,compile=on not run; kernel=mma,compile=on not run"


def test_cancelled_counts_as_not_run():
    v = judge(ON, CELLS, [rec("kernel=stock,compile=on", "ready"), rec("kernel=mma,compile=on", "cancelled")])
    assert (v.verdict, v.reason) == ("inconclusive", "kernel=mma,compile=on not run")


def test_partial_run_with_a_refutation_is_still_refuted():
    v = judge(ON, CELLS, [rec("kernel=stock,compile=on", "failed", "cuda_graph_capture")])
    assert v.verdict == "refuted"


def test_timeouts_and_launch_errors_are_named():
    v = judge(ON, CELLS, [rec("kernel=stock,compile=on", "timeout"), rec("kernel=mma,compile=on", "launch_error")])
    assert v.reason == "kernel=stock,compile=on timed out; kernel=mma,compile=on launch error"


def test_repeats_must_all_agree_for_support():
    ok = [rec("kernel=stock,compile=on", "ready", repeat=r) for r in (1, 2, 3)]
    ok += [rec("kernel=mma,compile=on", "ready")]
    assert judge(ON, CELLS, ok).verdict == "supported"
    flaky = [*ok, rec("kernel=mma,compile=on", "crashed", repeat=2)]
    assert judge(ON, CELLS, flaky).verdict == "inconclusive"
    disagrees = [*ok, rec("kernel=mma,compile=on", "failed", "cuda_graph_capture", repeat=2)]
    v = judge(ON, CELLS, disagrees)  # ready 1/2, failed 1/2: the cell contradicts itself
    assert (v.verdict, v.reason) == ("inconclusive", "kernel=mma,compile=on flaky (1/2 ready)")
    broken = [r for r in disagrees if r.cell_id != "kernel=mma,compile=on" or r.repeat == 2]
    v = judge(ON, CELLS, broken)  # the same failure with no run that came up: refuted
    assert (v.verdict, v.reason) == ("refuted", "kernel=mma,compile=on failed:cuda_graph_capture")


def test_a_flaky_cell_does_not_hide_a_cell_that_refutes_consistently():
    records = [
        rec("kernel=stock,compile=on", "ready"),
        rec("kernel=stock,compile=on", "failed", "cuda_graph_capture", repeat=2),
        rec("kernel=mma,compile=on", "failed", "cuda_graph_capture"),
        rec("kernel=mma,compile=on", "timeout", repeat=2),
    ]
    v = judge(ON, CELLS, records)
    assert (v.verdict, v.reason) == ("refuted", "kernel=mma,compile=on failed:cuda_graph_capture (1/2)")
    assert v.to_json()["evidence"]["cell_id"] == "kernel=mma,compile=on"
    assert v.flaky == "kernel=stock,compile=on 1/2 ready"


def test_expectations_flag_violations_only():
    exp = Expectation(0, {"compile": ("off",)}, (Condition(Outcome.READY),))
    records = [rec("kernel=stock,compile=off", "failed", "oom"), rec("kernel=stock,compile=on", "failed", "oom")]
    [violation] = check_expectations([exp], records)
    assert (violation.cell_id, violation.wanted, violation.got) == ("kernel=stock,compile=off", "ready", "failed:oom")
    assert check_expectations([exp], [rec("kernel=stock,compile=off", "ready")]) == []


def test_hypothesis_json_round_trip():
    assert Hypothesis.from_json(ON.to_json()) == ON


def test_verdict_json_names_its_deciding_line():
    v = judge(
        ON,
        CELLS,
        [rec("kernel=stock,compile=on", "ready"), rec("kernel=mma,compile=on", "failed", "cuda_graph_capture")],
    )
    data = v.to_json()
    assert data["evidence"] == {
        "cell_id": "kernel=mma,compile=on",
        "attempt": "kernel=mma,compile=on-r1",
        "line_no": 3,
        "text": "failed line",
    }
    assert {"id", "claim", "verdict", "reason", "meaning", "deciding_cells", "evidence"} <= set(data)


def test_not_ready_is_any_launch_that_did_not_come_up(tmp_path) -> None:
    from diagbench.spec.load import load_spec

    spec = tmp_path / "s.yaml"
    spec.write_text(
        "name: s\nserver: {command: srv, ready: {log: up}}\nmatrix:\n  kernel: {env: K, values: [stock, mma]}\n"
        "  compile: {flag: --c, values: [on, off]}\n"
        "expect:\n  - {when: {compile: on}, outcome: not_ready}\n"
        "hypotheses:\n  - {id: h, claim: c, when: {compile: on}, supported_if: ready, refuted_if: not_ready}\n"
    )
    loaded = load_spec(spec)
    (hyp,) = loaded.hypotheses
    assert str(hyp.refuted_if[0]) == "not_ready"
    cells = [CellRow(c.id, dict(c.params)) for c in loaded.cells]
    on = [c.id for c in cells if c.params["compile"] == "on"]
    for outcome, cls in (("failed", "other"), ("crashed", None), ("timeout", None), ("launch_error", None)):
        records = [AttemptRecord(on[0], 1, "a1", dict(cells[0].params), [], {}, Outcome(outcome), failure_class=cls)]
        assert judge(hyp, cells, records).verdict == "refuted", outcome
        assert check_expectations(loaded.expectations, records) == []
    ready = [AttemptRecord(on[0], 1, "a1", dict(cells[0].params), [], {}, Outcome.READY)]
    assert check_expectations(loaded.expectations, ready)[0].wanted == "not_ready"
    assert Hypothesis.from_json(hyp.to_json()) == hyp  # survives the manifest


def test_not_ready_takes_no_failure_class(tmp_path) -> None:
    import pytest

    from diagbench.errors import SpecError
    from diagbench.spec.load import load_spec

    spec = tmp_path / "s.yaml"
    spec.write_text(
        "name: s\nserver: {command: srv, ready: {log: up}}\nmatrix:\n  compile: {flag: --c, values: [on, off]}\n"
        "expect:\n  - {when: {compile: on}, outcome: 'not_ready:oom'}\n"
    )
    with pytest.raises(SpecError, match="a failure class only narrows 'failed'"):
        load_spec(spec)


def test_the_schemas_accept_not_ready_wherever_an_outcome_is() -> None:
    import json
    import re

    from diagbench.schemas import schema_text

    for name in ("spec", "manifest"):
        patterns = set(re.findall(r'"pattern": "(\^\(not_ready[^"]+)"', schema_text(name)))
        assert patterns, name
        assert schema_text(name).count('"$ref": "#/$defs/condition"') >= 3  # expect, supported_if, refuted_if
        for pattern in patterns:
            rx = re.compile(json.loads(f'"{pattern}"'))
            assert rx.match("not_ready") and rx.match("failed:oom") and rx.match("crashed")
            assert not rx.match("not_ready:oom")
