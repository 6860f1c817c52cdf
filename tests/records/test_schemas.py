"""The shipped JSON Schemas hold for what diagbench reads and writes: every experiment
spec, every committed run's records, the golden report, and classify --json."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml

from diagbench.logs.classify import classify_file
from diagbench.logs.signatures import builtin_packs, load_packs
from diagbench.schemas import NAMES, load_schema

ROOT = Path(__file__).resolve().parents[2]
RUNS = sorted(p for p in (ROOT / "runs").iterdir() if (p / "manifest.json").is_file())
FIXTURES = ROOT / "tests" / "fixtures"


def check(name: str, data: Any) -> None:
    schema = load_schema(name)
    jsonschema.validators.validator_for(schema).check_schema(schema)
    jsonschema.validate(data, schema)


@pytest.mark.parametrize("name", NAMES)
def test_every_schema_is_itself_valid_and_printed_by_the_cli(name: str) -> None:
    out = subprocess.run([sys.executable, "-m", "diagbench", "schema", name], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    schema = json.loads(out.stdout)
    jsonschema.validators.validator_for(schema).check_schema(schema)
    assert schema["$id"].endswith(f"/{name}.json")


def test_an_unknown_schema_name_is_one_message_and_exit_2() -> None:
    out = subprocess.run([sys.executable, "-m", "diagbench", "schema", "nope"], capture_output=True, text=True)
    assert out.returncode == 2
    assert out.stderr.strip() == (
        "diagbench: unknown schema 'nope' (choose one of: spec, result, verdicts, manifest, classify, isolation, triage)"
    )


@pytest.mark.parametrize("spec", sorted((ROOT / "experiments").glob("*.yaml")), ids=lambda p: p.name)
def test_every_experiment_matches_the_spec_schema(spec: Path) -> None:
    check("spec", yaml.safe_load(spec.read_text()))


def test_the_spec_schema_rejects_a_misspelt_key() -> None:
    with pytest.raises(jsonschema.ValidationError, match="comand"):
        check("spec", {"name": "x", "server": {"comand": "x"}, "matrix": {"a": {"env": "A", "values": [1]}}})


@pytest.mark.parametrize("run", RUNS, ids=lambda p: p.name)
def test_every_committed_run_matches_the_record_schemas(run: Path) -> None:
    check("manifest", json.loads((run / "manifest.json").read_text()))
    check("verdicts", json.loads((run / "verdicts.json").read_text()))
    results = sorted(run.glob("cells/*/result.json"))
    assert results, f"{run} has no records"
    for result in results:
        check("result", json.loads(result.read_text()))
    if (run / "isolation.json").is_file():
        check("isolation", json.loads((run / "isolation.json").read_text()))
    if (run / "triage.json").is_file():
        check("triage", json.loads((run / "triage.json").read_text()))


def test_the_golden_json_report_holds_records_and_verdicts_of_the_schemas() -> None:
    report = json.loads((ROOT / "tests" / "golden" / "report.json").read_text())
    for attempt in report["attempts"]:
        check("result", attempt)
    check("verdicts", report["verdicts"])


def test_a_record_with_a_wrong_outcome_word_fails_the_schema() -> None:
    run = RUNS[0]
    record = json.loads(next(run.glob("cells/*/result.json")).read_text())
    with pytest.raises(jsonschema.ValidationError):
        check("result", {**record, "outcome": "exploded"})


@pytest.mark.parametrize("log", sorted(FIXTURES.glob("*.log")), ids=lambda p: p.name)
def test_classify_json_matches_its_schema(log: Path) -> None:
    result = classify_file(log, load_packs(builtin_packs(), ROOT))
    check("classify", result.to_json())
