"""Every sink, one planted secret per way in: no file of any run directory and no output of any
command shows one, even read later without the spec (moved away) and in another process.

Ways in: an environment variable (`MY_SVC_KEY`, by name alone), a flag (`--api-key`), a matrix
value (an env axis on a secret name), a URL's credential (`https://x-access-token:T@...` in a
variable), a package's `direct_url` (in the server interpreter's environment), and the server's
own output (it prints every one it was given, and fails on a line that holds the key).
Commands: plan --environment, run (its report.html, JUnit, step summary), report in every format,
classify (text and JSON), triage --json and its reports, isolate --json, the issue report.
"""

from __future__ import annotations

import json
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import run_cli, wait_gone
from diagbench.sensitive import REDACTED

PLANTED = {  # each by its place alone: no token shape, so only where it sits says it is secret
    "env": "env-planted-secret-1111",
    "flag": "flag-planted-secret-2222",
    "axis": "axis-planted-secret-3333",
    "url": "url-planted-secret-4444",
    "direct_url": "direct-planted-secret-5555",
    "triage_env": "triage-planted-secret-6666",
    "isolate_env": "isolate-planted-secret-7777",
}
SERVER = """
import os, sys, time
print("loading weights", flush=True)
print("settings", os.environ.get("MY_SVC_KEY"), sys.argv[1:], os.environ.get("MY_AXIS_TOKEN"), flush=True)
print("cloning", os.environ.get("REPO_URL"), flush=True)
if os.environ.get("FAIL") == "1" or "--fail" in sys.argv:
    print(f"RuntimeError: backend refused key {os.environ.get('MY_SVC_KEY')}", flush=True)
    print("Capture cuda graph failed: CUDA out of memory. Tried to allocate 2.00 GiB", flush=True)
    sys.exit(1)
print("The server is fired up and ready to roll!", flush=True)
time.sleep(60)
"""


def spec_text(python: str, server: Path) -> str:
    return f"""
name: sinks
server:
  command: {python} {server} --api-key {PLANTED["flag"]} --port {{port}}
  env:
    MY_SVC_KEY: {PLANTED["env"]}
    REPO_URL: https://x-access-token:{PLANTED["url"]}@github.com/org/repo.git
  timeout: 20s
  grace: 1s
  kind: sglang
matrix:
  tok: {{env: MY_AXIS_TOKEN, values: {{one: {PLANTED["axis"]}}}}}
  fail: {{env: FAIL, values: ["0", "1"]}}
"""


def planted_interpreter(tmp: Path) -> Path:
    """A virtual environment whose one distribution was installed from a URL holding a token."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(tmp / "venv")], check=True)
    site = next((tmp / "venv" / "lib").glob("python3*/site-packages"))
    info = site / "planted-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: planted\nVersion: 1.0\n")
    url = f"https://x-access-token:{PLANTED['direct_url']}@github.com/org/planted.git"
    (info / "direct_url.json").write_text(json.dumps({"url": url, "vcs_info": {"vcs": "git", "commit_id": "abc"}}))
    return tmp / "venv" / "bin" / "python"


def leaks(text: str) -> list[str]:
    return [name for name, value in PLANTED.items() if value in text]


class Seen:
    """Everything written or printed, by where."""

    def __init__(self, tmp: Path):
        self.tmp = tmp
        self.out: dict[str, str] = {}

    def cli(self, name: str, *args: str, ok: tuple[int, ...] = (0,), timeout: float = 120) -> str:
        env = {"GITHUB_STEP_SUMMARY": str(self.tmp / "summary.md")}
        proc = run_cli(*args, cwd=self.tmp, env=env, timeout=timeout)
        assert proc.returncode in ok, f"{name}: {proc.returncode}\n{proc.stdout}\n{proc.stderr}"
        self.out[name] = proc.stdout + proc.stderr
        return proc.stdout

    def files(self) -> None:
        for path in sorted(self.tmp.rglob("*")):
            if path.is_file() and "venv" not in path.parts and path.name not in ("spec.yaml", "server.py"):
                self.out[str(path.relative_to(self.tmp))] = path.read_text(errors="replace")


@pytest.fixture(scope="module")
def seen(tmp_path_factory: pytest.TempPathFactory) -> Seen:
    tmp = tmp_path_factory.mktemp("sinks")
    python = planted_interpreter(tmp)
    server = tmp / "server.py"
    server.write_text(SERVER)
    (tmp / "spec.yaml").write_text(spec_text(str(python), server))
    s = Seen(tmp)
    s.cli("plan --environment", "plan", "spec.yaml", "--environment")
    s.cli("plan --json --environment", "plan", "spec.yaml", "--environment", "--json")
    s.cli("run", "run", "spec.yaml", "--run-id", "s", "--junit", "junit.xml", ok=(0, 1))
    wait_gone("s")
    (tmp / "spec.yaml").rename(tmp / "moved.yaml.txt")  # read later without the spec
    (tmp / "moved.yaml.txt").unlink()
    for fmt in ("table", "md", "json", "junit", "html", "issue"):
        s.cli(f"report {fmt}", "report", "runs/s", "--format", fmt, ok=(0, 1))
    for log in sorted(tmp.glob("runs/s/cells/*/server.log")):
        s.cli(f"classify {log.parent.name}", "classify", str(log), ok=(0, 1, 3))
        s.cli(f"classify --json {log.parent.name}", "classify", str(log), "--json", ok=(0, 1, 3))
    command = f"MY_SVC_KEY={PLANTED['triage_env']} {shlex.quote(str(python))} {server} --fail --port {{port}}"
    s.cli("triage --json", "triage", command, "--server", "sglang", "--run-id", "t", "--json", ok=(0, 1))
    wait_gone("t")
    for fmt in ("table", "md", "json", "junit", "html", "issue"):
        s.cli(f"triage report {fmt}", "report", "runs/t", "--format", fmt, ok=(0, 1))
    good = f"MY_SVC_KEY={PLANTED['isolate_env']} {shlex.quote(str(python))} {server} --port {{port}}"
    s.cli(
        "isolate --json",
        "isolate",
        "--good",
        good,
        "--bad",
        good.replace("--port", "--fail --port"),
        "--run-id",
        "i",
        "--timeout",
        "20s",
        "--grace",
        "1s",
        "--json",
        ok=(0, 1),
    )
    wait_gone("i")
    s.cli("isolate report md", "report", "runs/i", "--format", "md", ok=(0, 1))
    s.cli("isolate report issue", "report", "runs/i", "--format", "issue", ok=(0, 1))
    s.files()
    return s


def test_no_output_and_no_file_shows_a_planted_secret(seen: Seen) -> None:
    files = [w for w in seen.out if w.startswith("runs/")]
    assert any(w.endswith("server.log") for w in files) and "runs/s/report.html" in files
    assert {"junit.xml", "summary.md", "runs/t/triage.json", "runs/i/isolation.json"} <= set(seen.out)
    assert {where: leaks(text) for where, text in seen.out.items() if leaks(text)} == {}


def test_each_way_in_was_really_taken(seen: Seen) -> None:
    """The test means something only if every planted value reached a sink, blanked."""
    assert "planted==1.0" in seen.out["plan --environment"] and "x-access-token:" in seen.out["plan --environment"]
    logs = [text for where, text in seen.out.items() if where.endswith("server.log") and where.startswith("runs/s")]
    assert all(f"settings {REDACTED} ['--api-key', '{REDACTED}'" in text for text in logs)
    assert all(f"cloning https://x-access-token:{REDACTED}@github.com/org/repo.git" in text for text in logs)
    assert f"refused key {REDACTED}" in seen.out["report issue"]
    assert f"refused key {REDACTED}" in seen.out["triage report issue"]
    assert f"refused key {REDACTED}" in seen.out["isolate report issue"]
