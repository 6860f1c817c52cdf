"""Secrets inside other values: a flag inside an environment value, a URL's query, a ready
request's JSON body; and the names `MYSQL_PWD`, `DB_PASS`.

The end-to-end test launches a real server that must be handed every secret as written (it
answers readiness only to the right query and body), and prints each of them bare once it
has them; then every file diagbench wrote and everything it printed is searched for them.
"""

from __future__ import annotations

import html
import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from conftest import run_cli, wait_gone
from diagbench.jsonvalue import JSON
from diagbench.records.redact import Redactor
from diagbench.records.redact_spec import redact_yaml
from diagbench.sensitive import REDACTED, holds_secret

# each 8 characters or more, so a search for it means something
SECRETS = {
    "env_flag": "envflag-secret-0001",  # EXTRA_ARGS: "--api-key X"
    "env_eq_flag": "enveq-secret-0002",  # SGLANG_ARGS: "--token=X"
    "env_pair": "envpair-secret-0003",  # DOCKER_ENV: "HF_TOKEN=X"
    "mysql_pwd": "mysqlpwd-secret-0004",  # MYSQL_PWD (by name)
    "db_pass": "dbpass-secret-0005",  # DB_PASS (by name)
    "axis_flag": "axisflag-secret-0006",  # a labelled env axis value: "--hf-token X"
    "http_query": "httpquery-secret-0007",  # ready.http: /health?token=X
    "request_query": "reqquery-secret-0008",  # ready.request.path: /v1/x?api_key=X
    "body_key": "bodykey-secret-0009",  # ready.request.json: {api_key: X}
    "body_nested": "bodynested-secret-0010",  # ready.request.json: {login: {db_pass: X}}
}
S = SECRETS
BODY = {"prompt": "hi", "max_tokens": 1, "api_key": S["body_key"], "login": {"user": "me", "db_pass": S["body_nested"]}}
SERVER = """
import json, os, threading, time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

GET, POST, BODY = {get!r}, {post!r}, json.loads({body!r})

class Handler(BaseHTTPRequestHandler):
    def do_GET(self):
        self.send_response(200 if self.path == GET else 404)
        self.end_headers()

    def do_POST(self):
        got = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        ok = self.path == POST and got == BODY
        # printed before the answer: diagbench stops the server the moment the answer lands,
        # so a line written after it may never be written
        print("answered", got["api_key"], got["login"]["db_pass"], flush=True)  # a log tail holds them bare
        self.send_response(200 if ok else 400)
        self.send_header("Content-Length", "2")
        self.end_headers()
        self.wfile.write(b"{{}}")

    def log_message(self, *args):
        return

httpd = ThreadingHTTPServer(("127.0.0.1", int(os.environ["PORT"])), Handler)
threading.Thread(target=httpd.serve_forever, daemon=True).start()
bare = [os.environ["EXTRA_ARGS"].split()[1], os.environ["SGLANG_ARGS"].split("=")[1], {query!r}]
os.write(1, " ".join(["READY with", *bare, os.environ["DB_PASS"], "\\n"]).encode())  # the deciding line, bare
time.sleep(60)
"""
GET = f"/health?token={S['http_query']}&verbose=1"
POST = f"/v1/x?model=m&api_key={S['request_query']}"


def write_spec(tmp: Path) -> None:
    server = tmp / "server.py"
    server.write_text(SERVER.format(get=GET, post=POST, body=json.dumps(BODY), query=S["http_query"]))
    spec = {
        "name": "inside",
        "server": {
            "command": [sys.executable, str(server)],
            "env": {
                "PORT": "{port}",
                "EXTRA_ARGS": f"--api-key {S['env_flag']} --max-tokens 5",
                "SGLANG_ARGS": f"--token={S['env_eq_flag']}",
                "DOCKER_ENV": f"HF_TOKEN={S['env_pair']}",
                "SHORT_ARGS": "--api-key abc --port 1",  # short: blanked in its slot only
                "MYSQL_PWD": S["mysql_pwd"],
                "DB_PASS": S["db_pass"],
                "PLAIN": "--max-tokens 5 every e here",
            },
            "ready": {"log": "READY", "http": GET, "request": {"path": POST, "json": BODY}},
            "timeout": "20s",
            "grace": "1s",
        },
        "matrix": {"args": {"env": "ENGINE_ARGS", "values": {"flag": f"--hf-token {S['axis_flag']}", "none": "-v"}}},
    }
    (tmp / "spec.yaml").write_text(yaml.safe_dump(spec, sort_keys=False))


def diagbench(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return run_cli(*args, cwd=cwd)


def leaks(text: str) -> list[str]:
    return [name for name, value in SECRETS.items() if value in text]


@pytest.fixture(scope="module")
def seen(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict[str, str], Path]:
    """Everything one run wrote or printed, by where it came from (plan, run, every report)."""
    tmp = tmp_path_factory.mktemp("inside")
    write_spec(tmp)
    out: dict[str, str] = {}
    for args in (("plan", "spec.yaml"), ("plan", "spec.yaml", "--json")):
        plan = diagbench(*args, cwd=tmp)
        assert plan.returncode == 0, plan.stderr
        out[" ".join(args)] = plan.stdout + plan.stderr
    run = diagbench("run", "spec.yaml", "--run-id", "s", "--junit", "junit.xml", cwd=tmp)
    wait_gone(tmp / "runs" / "s")
    assert run.returncode == 0, run.stdout + run.stderr
    out["run"] = run.stdout + run.stderr
    for fmt in ("table", "md", "json", "junit", "html"):
        report = diagbench("report", "runs/s", "--format", fmt, cwd=tmp)
        assert report.returncode == 0, report.stderr
        out[f"report {fmt}"] = report.stdout + report.stderr
    for path in sorted(tmp.rglob("*")):
        if path.is_file() and path.name not in ("spec.yaml", "server.py"):
            out[str(path.relative_to(tmp))] = path.read_text(errors="replace")
    return out, tmp / "runs" / "s"


def test_the_server_got_every_secret_and_no_file_or_output_shows_one(seen: tuple[dict[str, str], Path]) -> None:
    out, run = seen
    records = [json.loads(p.read_text()) for p in sorted(run.glob("cells/*/result.json"))]
    assert [r["outcome"] for r in records] == ["ready", "ready"]  # the real query and body were sent
    logs = {where for where in out if where.endswith("server.log")}
    assert len(logs) == 2 and all(f"answered {REDACTED} {REDACTED}" in out[where] for where in logs)  # when written
    assert {"report html", "report junit", "runs/s/manifest.json", "junit.xml"} <= set(out)
    assert {where: leaks(text) for where, text in out.items() if leaks(text)} == {}
    # the deciding line and the log tails are kept, with what the server printed bare blanked
    assert all(r["evidence"]["text"] == f"READY with {' '.join([REDACTED] * 4)}" for r in records)
    for where in ("report junit", "report html"):  # read again by `report`, from the spec file's secrets
        assert f"answered {REDACTED} {REDACTED}" in html.unescape(out[where])


def test_env_values_are_blanked_where_they_hold_a_secret_and_kept_where_not(seen: tuple[dict[str, str], Path]) -> None:
    out, run = seen
    want = {
        "EXTRA_ARGS": f"--api-key {REDACTED} --max-tokens 5",
        "SGLANG_ARGS": f"--token={REDACTED}",
        "DOCKER_ENV": f"HF_TOKEN={REDACTED}",
        "SHORT_ARGS": f"--api-key {REDACTED} --port 1",
        "MYSQL_PWD": REDACTED,
        "DB_PASS": REDACTED,
        "PLAIN": "--max-tokens 5 every e here",
    }
    manifest = json.loads((run / "manifest.json").read_text())
    assert {k: manifest["spec"]["server"]["env"][k] for k in want} == want
    assert manifest["spec"]["matrix"]["args"]["values"] == {"flag": f"--hf-token {REDACTED}", "none": "-v"}
    assert [c["env"] for c in manifest["cells"]] == [{"ENGINE_ARGS": f"--hf-token {REDACTED}"}, {"ENGINE_ARGS": "-v"}]
    record = json.loads(next(run.glob("cells/*flag*/result.json")).read_text())
    assert {k: record["env_changes"][k] for k in want} == want
    assert record["env_changes"]["ENGINE_ARGS"] == f"--hf-token {REDACTED}"
    spec_text = yaml.safe_load(manifest["spec_text"])
    assert {k: spec_text["server"]["env"][k] for k in want} == want
    plan = json.loads(out["plan spec.yaml --json"])
    assert {k: plan["cells"][0]["env"][k] for k in want} == want
    for where in ("plan spec.yaml", "report html"):
        assert f"EXTRA_ARGS=--api-key {REDACTED} --max-tokens 5" in html.unescape(out[where])


def test_the_ready_section_keeps_its_shape_with_its_secrets_blanked(seen: tuple[dict[str, str], Path]) -> None:
    out, run = seen
    http, path = f"/health?token={REDACTED}&verbose=1", f"/v1/x?model=m&api_key={REDACTED}"
    body = {**BODY, "api_key": REDACTED, "login": {"user": "me", "db_pass": REDACTED}}
    manifest = json.loads((run / "manifest.json").read_text())
    ready = manifest["spec"]["server"]["ready"]
    assert (ready["http"], ready["request"]["path"], ready["request"]["json"]) == (http, path, body)
    text = yaml.safe_load(manifest["spec_text"])["server"]["ready"]
    assert (text["http"], text["request"]["path"], text["request"]["json"]) == (http, path, body)
    assert f"GET {http} -> 200, then POST {path} -> 200" in out["plan spec.yaml"]
    assert json.loads(out["plan spec.yaml --json"])["ready"]["http"] == http
    record = json.loads(next(run.glob("cells/*/result.json")).read_text())
    assert record["reason"] == f"ready line and GET {http} -> 200 and POST {path} -> 200"


def test_an_unlabelled_env_value_holding_a_secret_cannot_be_a_label(tmp_path: Path) -> None:
    axis = '{env: ENGINE_ARGS, values: ["--api-key abcdef", "-v"]}'
    (tmp_path / "spec.yaml").write_text(f"name: x\nserver: {{command: foo}}\nmatrix:\n  a: {axis}\n")
    proc = diagbench("plan", "spec.yaml", cwd=tmp_path)
    assert proc.returncode == 2
    assert "spec.yaml:4" in proc.stderr and "a secret would be its cell's label" in proc.stderr


# -- the rules, one by one ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "secret"),
    [
        ("--api-key abc", True),
        ("--token=abc", True),
        ("-e HF_TOKEN=abc", True),
        ("--api-key --port", False),  # a flag with no value
        ("--max-tokens 5", False),
        ("key-value-store", False),
        ("--token=", False),
    ],
)
def test_a_value_that_holds_a_secret(value: str, secret: bool) -> None:
    assert holds_secret(value) is secret


def test_a_secret_inside_an_env_value_is_learned_and_blanked_in_a_log() -> None:
    secrets = Redactor.of(
        [{"EXTRA_ARGS": "--api-key abcdefgh1 --x 1", "OPTS": "--token=abcdefgh2", "S": "--api-key e"}]
    )
    assert {"abcdefgh1", "abcdefgh2"} <= secrets.known and not {"e", "1"} & secrets.known
    assert secrets.log("loaded abcdefgh1 and abcdefgh2") == f"loaded {REDACTED} and {REDACTED}"


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        ("/health?token=abc", f"/health?token={REDACTED}"),
        ("http://h:1/x?a=1&api_key=abc&b=2#top", f"http://h:1/x?a=1&api_key={REDACTED}&b=2#top"),
        ("/x?access_token=abc&hf_token=def", f"/x?access_token={REDACTED}&hf_token={REDACTED}"),
        ("/x?max_tokens=5&tokenizer=t", "/x?max_tokens=5&tokenizer=t"),
        ("/x?token=&key", "/x?token=&key"),
        ("/x?token={port}&key=none", "/x?token={port}&key=none"),
        ("GET /v1/x?key=abc HTTP/1.1", f"GET /v1/x?key={REDACTED} HTTP/1.1"),
    ],
)
def test_a_secret_named_query_parameter(url: str, shown: str) -> None:
    assert Redactor().text(url) == shown


def test_a_query_secret_is_learned() -> None:
    known = Redactor.of(urls=["/h?token=long-query-1&note=long-but-plain&key=short"]).known
    assert "long-query-1" in known and not {"long-but-plain", "short"} & known


def test_a_json_body_by_key_at_any_depth() -> None:
    body: JSON = {"api_key": "k", "n": 1, "msgs": [{"token": 7, "text": "hi"}], "auth": {"user": "u", "tries": [1]}}
    assert Redactor().json(body) == {
        "api_key": REDACTED,
        "n": 1,
        "msgs": [{"token": REDACTED, "text": "hi"}],
        "auth": {"user": REDACTED, "tries": [REDACTED]},
    }
    assert Redactor().json({"api_key": None, "token": True, "key": ""}) == {"api_key": None, "token": True, "key": ""}
    known = Redactor.of(bodies=[{"a": {"password": "long-enough-1"}, "b": "long-enough-2"}]).known
    assert "long-enough-1" in known and "long-enough-2" not in known


def test_the_spec_text_blanks_inside_env_values_queries_and_json_bodies() -> None:
    text = (
        "server:\n"
        "  env: {EXTRA: --api-key abc, PLAIN: --max-tokens 5}\n"
        "  ready:\n"
        "    http: /h?token=abc\n"
        "    request: {path: /x, json: {prompt: 'key: 5', api_key: k, login: {password: p}, stream: false}}\n"
        "other:\n"
        '  request: {json: \'{"api_key": "k", "n": 1}\'}\n'  # a body written as JSON text
    )
    assert yaml.safe_load(redact_yaml(text, Redactor())) == {
        "server": {
            "env": {"EXTRA": f"--api-key {REDACTED}", "PLAIN": "--max-tokens 5"},
            "ready": {
                "http": f"/h?token={REDACTED}",
                "request": {
                    "path": "/x",
                    "json": {"prompt": "key: 5", "api_key": REDACTED, "login": {"password": REDACTED}, "stream": False},
                },
            },
        },
        "other": {"request": {"json": f'{{"api_key": "{REDACTED}", "n": 1}}'}},
    }
