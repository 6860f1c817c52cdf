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
from diagbench.schemas import NAMES, VOCAB, load_schema, vocabulary, vocabulary_text
from diagbench.vocab import FAILURE_CLASSES, OUTCOMES, LogOutcome

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
        "diagbench: unknown schema 'nope' (choose one of: spec, result, verdicts, manifest, classify, isolation, triage, limit, debug)"
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
    for name in ("limit", "debug"):
        if (run / f"{name}.json").is_file():
            check(name, json.loads((run / f"{name}.json").read_text()))


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


# -- the vocabulary, spelled once ------------------------------------------------------------

SHIPPED = sorted((ROOT / "diagbench" / "schemas").glob("*.json"))
WORDS = {*OUTCOMES, *FAILURE_CLASSES, *(o.value for o in LogOutcome)}


def walk(node: Any, path: str = "") -> list[tuple[str, str, Any]]:
    """Every (path, key, value) of a schema's objects."""
    found: list[tuple[str, str, Any]] = []
    if isinstance(node, dict):
        for key, value in node.items():
            found.append((path, key, value))
            found += walk(value, f"{path}/{key}")
    elif isinstance(node, list):
        for i, value in enumerate(node):
            found += walk(value, f"{path}[{i}]")
    return found


def test_vocab_json_is_what_vocab_py_says() -> None:
    shipped = (ROOT / "diagbench" / "schemas" / VOCAB).read_text()
    assert shipped == vocabulary_text(), "diagbench/schemas/vocab.json is stale: run python scripts/schema_vocab.py"


@pytest.mark.parametrize("path", SHIPPED, ids=lambda p: p.name)
def test_no_shipped_schema_spells_the_vocabulary_out_but_vocab_json(path: Path) -> None:
    """An outcome or a class is named in vocab.json only: the other schemas refer to it, so
    adding a word to vocab.py (and regenerating vocab.json) reaches every schema."""
    defs: Any = vocabulary()["$defs"]
    for where, key, value in walk(json.loads(path.read_text())):
        if path.name == VOCAB:
            continue
        if key == "enum":
            assert not WORDS & {str(v) for v in value}, f"{path.name}{where}: refer to vocab.json's $defs instead"
        if key == "pattern" and isinstance(value, str):  # (a property named `pattern` is an object)
            assert not any(f"|{w}|" in value or f"({w}|" in value for w in WORDS), f"{path.name}{where}: spelled out"
        if key == "$ref" and value.startswith(VOCAB):
            assert value.removeprefix(VOCAB + "#/$defs/") in defs, f"{path.name}{where}: no such word list {value}"


@pytest.mark.parametrize("name", NAMES)
def test_every_word_list_of_every_schema_is_the_enums(name: str) -> None:
    """Bundled as it is printed and loaded, each schema's word lists are exactly vocab.py's enums."""
    schema = load_schema(name)
    lists = [v for _, key, v in walk(schema) if key == "enum" and WORDS & {str(x) for x in v}]
    assert lists, f"{name} names no outcome or class"
    enums = (list(OUTCOMES), list(FAILURE_CLASSES), [o.value for o in LogOutcome])
    assert all([w for w in v if w is not None] in enums for v in lists)
    refs = {v for _, key, v in walk(schema) if key == "$ref"}
    assert not any(ref.startswith(VOCAB) for ref in refs)  # bundled: every reference is the schema's own
    jsonschema.validators.validator_for(schema).check_schema(schema)
