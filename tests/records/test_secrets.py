"""Secrets never reach a file diagbench writes or anything it prints.

The end-to-end tests launch a real server whose command line, environment and matrix carry
secrets, then read every file of the run directory, the JUnit and Markdown reports and
everything `run`, `plan` and `report` printed, and look for each secret value.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from conftest import run_cli, wait_gone
from diagbench.records.redact import Redactor
from diagbench.records.redact_spec import redact_yaml
from diagbench.sensitive import REDACTED, looks_secret, secret_name
from diagbench.vocab import Evidence, Outcome

ROOT = Path(__file__).resolve().parents[2]
SERVER = """
import os, sys, time
print("loading weights", flush=True)
if os.environ.get("ECHO_SECRETS"):  # a server that logs its own settings, as SGLang and vLLM do
    print(f"server_args=ServerArgs(api_key='{os.environ['MY_SERVICE_TOKEN']}', hf={os.environ['HF_TOKEN']!r})")
    print(f"caller {os.environ['DIAGBENCH_TEST_API_KEY']} Authorization: Bearer abcdefghijklmnopqrstuv")
    print(f"READY argv={sys.argv[1:]}", flush=True)
else:
    print("READY", flush=True)
time.sleep(60)
"""
# every value a secret could leak as; each is 8 characters or more, so a grep is meaningful
SECRETS = {
    "api_key_flag": "sk-abcdefghijklmnop1234",  # --api-key X (and a value shape)
    "token_eq_flag": "tok-eq-0123456789",  # --token=X (by flag name alone)
    "hf_env": "hf_ABCDEFGHIJKLMNOPQRSTUVwxyz01234567",  # HF_TOKEN (name and shape)
    "service_env": "srv-secret-value-42",  # MY_SERVICE_TOKEN (by name alone)
    "axis_one": "axis-secret-one-111",  # a matrix env axis on a secret name
    "axis_two": "axis-secret-two-222",
    "password_axis": "pw-long-secret-333",  # an args axis: --password {value}
    "jwt_plain": "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.c2lnbmF0dXJl",  # shape, innocent name
    "caller_env": "caller-secret-zzz-999",  # in diagbench's own environment, inherited by the server
}


def spec_text(tmp: Path, echo: bool) -> str:
    server = tmp / "server.py"
    server.write_text(SERVER)
    return f"""
name: secrets
description: keep {SECRETS["jwt_plain"]} out of the records
server:
  command: {sys.executable} {server} --api-key {SECRETS["api_key_flag"]} --token={SECRETS["token_eq_flag"]} --port {{port}}
  env:
    HF_TOKEN: {SECRETS["hf_env"]}
    MY_SERVICE_TOKEN: "{SECRETS["service_env"]}"
    API_KEY: "e"
    SESSION: "{SECRETS["jwt_plain"]}"
    PLAIN: every e here
    {"ECHO_SECRETS: '1'" if echo else "QUIET: '1'"}
  ready: {{log: READY}}
  timeout: 20s
  grace: 1s
matrix:
  tok: {{env: MY_AXIS_TOKEN, values: {{one: "{SECRETS["axis_one"]}", two: "{SECRETS["axis_two"]}"}}}}
  pw: {{args: [--password, "{{value}}"], values: {{long: "{SECRETS["password_axis"]}"}}}}
"""


def diagbench(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {
        **os.environ,
        "DIAGBENCH_TEST_API_KEY": SECRETS["caller_env"],
        "GITHUB_STEP_SUMMARY": str(cwd / "summary.md"),
    }
    return run_cli(*args, cwd=cwd, env=env)


def assert_nothing_left(run_id: str) -> None:
    wait_gone(run_id)


def leaks(text: str) -> list[str]:
    return [name for name, value in SECRETS.items() if value in text]


def run_and_gather(tmp_path: Path, echo: bool) -> tuple[dict[str, str], Path]:
    """Everything diagbench wrote or printed for one run, by where it came from."""
    (tmp_path / "spec.yaml").write_text(spec_text(tmp_path, echo))
    seen: dict[str, str] = {}
    plan = diagbench("plan", "spec.yaml", cwd=tmp_path)
    assert plan.returncode == 0, plan.stderr
    seen["plan"] = plan.stdout + plan.stderr
    run = diagbench("run", "spec.yaml", "--run-id", "s", "--junit", "junit.xml", cwd=tmp_path)
    assert_nothing_left("s")
    assert run.returncode == 0, run.stderr
    seen["run"] = run.stdout + run.stderr
    for fmt in ("table", "md", "json", "junit"):
        report = diagbench("report", "runs/s", "--format", fmt, cwd=tmp_path)
        assert report.returncode == 0, report.stderr
        seen[f"report {fmt}"] = report.stdout + report.stderr
    for path in sorted(tmp_path.rglob("*")):
        if path.is_file() and path.name not in ("spec.yaml", "server.py"):
            seen[str(path.relative_to(tmp_path))] = path.read_text(errors="replace")
    return seen, tmp_path / "runs" / "s"


@pytest.fixture(scope="module")
def quiet(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict[str, str], Path]:
    """One run of a server that keeps its secrets to itself (shared by the tests that read it)."""
    return run_and_gather(tmp_path_factory.mktemp("quiet"), echo=False)


def test_no_secret_in_any_file_or_output_of_a_run(quiet: tuple[dict[str, str], Path]) -> None:
    seen, _ = quiet
    assert {"plan", "run", "junit.xml", "summary.md", "runs/s/manifest.json", "runs/s/verdicts.json"} <= set(seen)
    assert len([k for k in seen if k.endswith("result.json")]) == 2
    assert {where: leaks(text) for where, text in seen.items() if leaks(text)} == {}
    assert REDACTED in seen["plan"] and REDACTED in seen["runs/s/manifest.json"]


def test_the_manifest_keeps_what_is_not_secret(quiet: tuple[dict[str, str], Path]) -> None:
    _, run = quiet
    manifest = json.loads((run / "manifest.json").read_text())
    server = manifest["spec"]["server"]
    assert server["env"]["API_KEY"] == REDACTED and server["env"]["PLAIN"] == "every e here"
    assert server["command"][2:6] == ["--api-key", REDACTED, f"--token={REDACTED}", "--port"]
    assert manifest["spec"]["matrix"]["tok"]["values"] == {"one": REDACTED, "two": REDACTED}
    assert [c["args"] for c in manifest["cells"]] == [["--password", REDACTED]] * 2
    # the spec text: a short secret is blanked in its slot only, and the text is still the spec
    text = manifest["spec_text"]
    assert 'API_KEY: "<redacted>"' in text and "PLAIN: every e here" in text and "name: secrets" in text
    redacted = yaml.safe_load(text)
    original = yaml.safe_load((run.parent.parent / "spec.yaml").read_text())
    assert redacted["server"]["timeout"] == original["server"]["timeout"]
    assert redacted["matrix"]["pw"]["args"] == ["--password", "{value}"]  # the template is not a secret


def test_a_server_that_prints_its_secrets_is_blanked_everywhere_its_own_log_too(tmp_path: Path) -> None:
    seen, run = run_and_gather(tmp_path, echo=True)
    logs = {where for where in seen if where.endswith("server.log")}
    assert len(logs) == 2
    for where in logs:  # the values the run knew are blanked as server.log is written; the rest as it was
        assert f"api_key='{REDACTED}'" in seen[where] and "loading weights\n" in seen[where]
    assert {where: leaks(text) for where, text in seen.items() if leaks(text)} == {}
    record = json.loads(next(run.glob("cells/*/result.json")).read_text())
    assert record["evidence"]["text"].startswith("READY argv=[")  # the deciding line is kept, blanked
    assert "abcdefghijklmnopqrstuv" not in seen["junit.xml"]  # a Bearer token in the log tail


def test_plan_shows_secret_variables_blanked(tmp_path: Path) -> None:
    (tmp_path / "spec.yaml").write_text(spec_text(tmp_path, echo=False))
    plan = diagbench("plan", "spec.yaml", cwd=tmp_path)
    assert plan.returncode == 0
    assert f"HF_TOKEN={REDACTED}" in plan.stdout and f"API_KEY={REDACTED}" in plan.stdout
    assert "PLAIN=every e here" in plan.stdout
    assert f"--api-key {REDACTED} --token={REDACTED}" in plan.stdout


@pytest.mark.parametrize(
    "axis",
    [
        '{env: HF_TOKEN, values: ["a-token-value", "another-value"]}',
        '{args: [--api-key, "{value}"], values: [k1, k2]}',
        '{env: MODEL, values: ["hf_abcdefghijklmnopqrstuvwxyzABCDEFGH"]}',
    ],
)
def test_a_secret_cannot_be_a_label(tmp_path: Path, axis: str) -> None:
    (tmp_path / "spec.yaml").write_text(f"name: x\nserver: {{command: foo}}\nmatrix:\n  a: {axis}\n")
    proc = diagbench("plan", "spec.yaml", cwd=tmp_path)
    assert proc.returncode == 2
    assert "a secret would be its cell's label" in proc.stderr
    assert "give each value a label: values: {a: ..., b: ...}" in proc.stderr


# -- the rules, one by one ---------------------------------------------------------------


@pytest.mark.parametrize(
    "name",
    [
        *("HF_TOKEN", "OPENAI_API_KEY", "--api-key", "--hf-token", "--token", "--password", "apiKey", "HF_TOKEN2"),
        *("AUTH", "MYSQL_PWD", "DB_PASS", "DB_PASSWD", "PASSWD", "--db-pass", "dbPass", "userPwd"),
    ],
)
def test_secret_names(name: str) -> None:
    assert secret_name(name)


@pytest.mark.parametrize(
    "name",
    [
        *("MAX_TOKENS", "--max-total-tokens", "--tokenizer", "TOKENIZERS_PARALLELISM", "HF_TOKEN_PATH"),
        *("PWD", "OLDPWD", "BYPASS", "COMPASS", "PASS", "--pass", "DB_PASSAGE", "PWD_DIR"),
    ],
)
def test_names_that_only_contain_a_secret_word(name: str) -> None:
    assert not secret_name(name)


def test_argv_by_flag_both_forms_and_inside_a_shell_string() -> None:
    argv = ["srv", "--api-key", "e", "--token=abc", "--max-tokens", "100", "sh -c 'x --hf-token zz --port 1'"]
    assert Redactor().argv(argv) == [
        "srv",
        "--api-key",
        REDACTED,
        f"--token={REDACTED}",
        "--max-tokens",
        "100",
        f"sh -c 'x --hf-token {REDACTED} --port 1'",
    ]


def test_a_short_secret_is_never_blanked_as_a_substring() -> None:
    secrets = Redactor.of([{"API_KEY": "e", "LONG_TOKEN": "long-secret-1"}])
    assert secrets.known == frozenset({"long-secret-1"})
    assert secrets.text("every e here; long-secret-1") == f"every e here; {REDACTED}"
    text = 'env: {API_KEY: "e", NOTE: every e here}\n'
    assert redact_yaml(text, secrets) == 'env: {API_KEY: "<redacted>", NOTE: every e here}\n'


@pytest.mark.parametrize(
    "value",
    [
        "hf_abcdefghijklmnopqrstuvwxyzABCDEFGH",
        "api_org_abcdefghijklmnopqrstuvwxyzABCDEFGH",
        "sk_live_4eC39HqLyjWDarjtT1zdp7dc",
        "rk_test_4eC39HqLyjWDarjtT1zdp7dc",
        "pypi-AgEIcHlwaS5vcmcCJGI4YmNhMTM2LTRkOTMtNDc4ZC05ZjQ1LWFhYTNlN2Q1OTQ4ZQ",
        "AIzaSyDaGmWKa4JsXZ-HjGw7ISLn_3namBGewQe",
        "sk-proj-abcdefghijkl",
        "ghp_abcdefghijklmnopqrst",
        "nvapi-abcdefghijklmnop",
        "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.c2ln",
    ],
)
def test_value_shapes(value: str) -> None:
    assert looks_secret(value)
    assert Redactor().env({"INNOCENT": f"x {value} y"}) == {"INNOCENT": f"x {REDACTED} y"}


@pytest.mark.parametrize(
    ("url", "shown"),
    [  # the vendors' documented forms: Slack's incoming webhooks, Sentry's DSN (public key, and the old secret key)
        ("https://hooks.slack.com/services/T00000000/B00000000/XXXXXXXXXXXXXXXXXXXXXXXX", "https://hooks.slack.com/"),
        ("https://hooks.slack.com/workflows/T0000/A0000/123456/abcdefghij", "https://hooks.slack.com/"),
        ("https://0123456789abcdef0123456789abcdef@o12345.ingest.sentry.io/678", "https://"),
        ("https://0123456789abcdef0123456789abcdef:fedcba9876543210fedcba9876543210@sentry.example.com/9", "https://"),
    ],
)
def test_urls_that_are_secrets(url: str, shown: str) -> None:
    assert looks_secret(url)
    blanked = Redactor().text(f"posting to {url} now")
    assert blanked.startswith(f"posting to {shown}{REDACTED}") and blanked.endswith(" now")
    assert not any(part in blanked for part in ("XXXXXXXX", "abcdefghij", "0123456789abcdef", "fedcba98"))


@pytest.mark.parametrize(
    "value",
    [
        *("task-abcdefghijkl", "/models/hf_cache", "Qwen/risk-assessment-model", "sk-short", "hf_overrides=None"),
        *("hf_abcdefghijklmnop", "sk_live_short", "pypi-simple-index-mirror-host", "AIza-short", "git@github.com"),
        *("https://hooks.slack.com/", "https://me@example.com/x", "ssh://git@github.com/o/r"),
    ],
)
def test_values_that_only_resemble_a_shape(value: str) -> None:
    assert not looks_secret(value)


def test_a_servers_own_words() -> None:
    line = "ServerArgs(api_key='s3cr3t', max_tokens=5, model='m') HF_TOKEN=abc 'token': \"xyz\" https://u:pw@h/x"
    assert Redactor().log(line) == (
        f"ServerArgs(api_key='{REDACTED}', max_tokens=5, model='m') HF_TOKEN={REDACTED} "
        f"'token': \"{REDACTED}\" https://u:{REDACTED}@h/x"
    )
    assert Redactor().log("api_key=None, token: null") == "api_key=None, token: null"


def test_a_block_scalar_command_stays_valid_yaml() -> None:
    text = "server:\n  command: |\n    srv --password hunter2\n  timeout: 5s\n"
    out = redact_yaml(text, Redactor())
    assert "hunter2" not in out
    assert yaml.safe_load(out) == {"server": {"command": f"srv --password {REDACTED}\n", "timeout": "5s"}}


def test_an_assignment_inside_a_command_word() -> None:
    argv = ["docker", "run", "-e", "HF_TOKEN=abcdefghij12", "img", "--override", '{"api_key": "zzzzzzzzzz"}']
    secrets = Redactor.of(argvs=[argv])
    assert secrets.known == frozenset({"abcdefghij12", "zzzzzzzzzz"})
    assert secrets.argv(argv)[3:] == [f"HF_TOKEN={REDACTED}", "img", "--override", f'{{"api_key": "{REDACTED}"}}']
    text = "server:\n  command: [docker, run, -e, HF_TOKEN=abcdefghij12, img]\nclaim: 'the token: 300'\n"
    assert redact_yaml(text, Redactor()) == (
        "server:\n  command: [docker, run, -e, \"HF_TOKEN=<redacted>\", img]\nclaim: 'the token: 300'\n"
    )


def test_the_part_of_a_secret_left_at_a_cut_end_is_blanked() -> None:
    from diagbench.records.record import AttemptRecord
    from diagbench.records.redact import redact_record

    secrets = Redactor.of([{"MY_TOKEN": "abcdefgh12345678"}])
    clipped = "READY " + "x" * 484 + "abcdefgh12"  # a 500-character deciding line cut inside the secret
    record = AttemptRecord("c", 1, "a", {}, [], {}, Outcome.READY, evidence=Evidence(3, clipped))
    evidence = redact_record(record, secrets).evidence
    assert evidence is not None and evidence.text == "READY " + "x" * 484 + REDACTED
    assert secrets.cut("345678 and the rest of a log tail") == f"{REDACTED} and the rest of a log tail"
    assert secrets.cut("clipped at hf_abc") == f"clipped at {REDACTED}"
    assert secrets.cut("an ordinary line that ends in 1234") == "an ordinary line that ends in 1234"


def test_the_url_password_pattern_blanks_what_it_did_before_it_was_made_linear() -> None:
    """Every string of up to 6 pieces that matter, and longer random ones, blanked as the
    pattern before the fix blanked them (its cost: benchmarks/redaction.py)."""
    import itertools
    import random
    import re

    from diagbench.records.redact import _URL_PASSWORD

    old = re.compile(r"([A-Za-z][A-Za-z0-9+.-]*://[^/\s:@]*:)[^/\s@]+(@)")

    def blanked(pattern: re.Pattern[str], text: str) -> str:
        return pattern.sub(lambda m: f"{m.group(1)}{REDACTED}{m.group(2)}", text)

    pieces = ("a", "1", "://", ":", "@", "/", " ")
    short = ("".join(t) for n in range(1, 7) for t in itertools.product(pieces, repeat=n))
    rng = random.Random(8)
    long = ("".join(rng.choices("aZ9+.-:/@ \t_?#=", k=rng.randint(8, 40))) for _ in range(20_000))
    differ = [text for text in itertools.chain(short, long) if blanked(old, text) != blanked(_URL_PASSWORD, text)]
    assert differ == []
    assert blanked(_URL_PASSWORD, "see 1git+ssh://me:pw@host/x") == f"see 1git+ssh://me:{REDACTED}@host/x"


@pytest.mark.parametrize("how", ["file", "stdin"])
def test_classify_prints_a_logs_lines_with_their_secrets_blanked(tmp_path: Path, how: str) -> None:
    log = tmp_path / "server.log"
    log.write_text(
        "loading\n"
        f"ServerArgs(api_key='{SECRETS['service_env']}', hf={SECRETS['hf_env']!r}, model='m')\n"
        f"GET /health?token={SECRETS['token_eq_flag']}&v=1 with {SECRETS['caller_env']}\n"
        f"torch.OutOfMemoryError: CUDA out of memory. --api-key {SECRETS['api_key_flag']}\n"
    )
    source = ("server.log",) if how == "file" else ("-",)
    shown = {}
    for extra in ((), ("--json",)):
        proc = run_cli(
            "classify",
            *source,
            *extra,
            input=log.read_text() if how == "stdin" else None,
            cwd=tmp_path,
            env={"DIAGBENCH_TEST_API_KEY": SECRETS["caller_env"]},
            timeout=60,
        )
        assert proc.returncode == 1, proc.stderr  # failed
        shown[extra] = proc.stdout
    assert leaks(shown[()] + shown[("--json",)]) == []
    assert json.loads(shown[("--json",)])["line"] == f"torch.OutOfMemoryError: CUDA out of memory. --api-key {REDACTED}"
    assert f"GET /health?token={REDACTED}&v=1 with {REDACTED}" in shown[()]  # context lines too
