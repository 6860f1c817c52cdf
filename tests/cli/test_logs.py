"""`diagbench logs RUN [ATTEMPT] [--tail N]`: a run's server logs, secrets blanked (issue 37)."""

from __future__ import annotations

from pathlib import Path

from conftest import fake_command, run_cli, write_spec

SECRET = "opensesame-4242"


def test_logs_prints_each_attempts_log_blanked_one_attempt_and_a_tail(tmp_path: Path) -> None:
    spec = write_spec(
        tmp_path,
        {"command": fake_command("out=first", f"out=token is {SECRET}", "out=up", "hang"), "ready": {"log": "up"}},
        matrix={"n": {"env": "N", "values": ["1", "2"]}},
        name="logs",
    )
    spec.write_text(spec.read_text().replace("server:\n", f"server:\n  env: {{API_TOKEN: {SECRET}}}\n", 1))
    assert run_cli("run", str(spec), "--run-id", "r", cwd=tmp_path).returncode == 0
    every = run_cli("logs", "runs/r", cwd=tmp_path)
    assert every.returncode == 0, every.stderr
    assert SECRET not in every.stdout and "token is <redacted>" in every.stdout
    assert every.stdout.startswith("==> 001-n-1-r1 (ready) <==\nfirst\n")
    assert "\n==> 002-n-2-r1 (ready) <==\n" in every.stdout
    one = run_cli("logs", "runs/r", "002", "--tail", "1", cwd=tmp_path)
    assert one.returncode == 0 and one.stdout == "up\n", one.stdout + one.stderr


def test_an_unknown_attempt_names_the_ones_there(tmp_path: Path) -> None:
    spec = write_spec(tmp_path, {"command": fake_command("out=up", "hang"), "ready": {"log": "up"}})
    assert run_cli("run", str(spec), "--run-id", "r", cwd=tmp_path).returncode == 0
    bad = run_cli("logs", "runs/r", "nope", cwd=tmp_path)
    assert bad.returncode == 2 and "Traceback" not in bad.stderr
    assert "runs/r: attempt 'nope' is not one of this run's attempts (001-only-x-r1)" in bad.stderr
