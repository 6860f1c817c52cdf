"""Setup mistakes are said before anything launches: every spec mistake at once (like a
compiler), unknown placeholders, empty conditions, bad env names, a missing program or cwd,
an unwritable --junit path; and a run in which no attempt could start exits 2."""

from __future__ import annotations

import socket
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import fake_command, run_cli, wait_gone
from diagbench.errors import SpecError, SpecErrors
from diagbench.spec.load import load_spec

READY = "The server is fired up and ready to roll!"


def diagbench(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return run_cli(*args, cwd=cwd)


@pytest.fixture(autouse=True)
def _in_tmp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)  # messages name spec.yaml as the tests write it


def load(tmp_path: Path, text: str) -> SpecError:
    (tmp_path / "spec.yaml").write_text(text)
    with pytest.raises(SpecError) as caught:
        load_spec(Path("spec.yaml"))
    return caught.value


def assert_nothing_left(run_id: str) -> None:
    wait_gone(run_id)


# -- every mistake at once -----------------------------------------------------------------

THREE_MISTAKES = """name: x
server:
  command: python3 -m srv --port {prt}
  timeout: eight minutes
matrix:
  a: {flag: --x, values: [on, off]}
hypotheses:
  - {id: h, when: {a: on}, supported_if: [], refuted_if: failed}
"""


def test_three_mistakes_are_three_lines_in_line_order(tmp_path: Path) -> None:
    (tmp_path / "spec.yaml").write_text(THREE_MISTAKES)
    proc = diagbench("plan", "spec.yaml", cwd=tmp_path)
    assert proc.returncode == 2
    assert proc.stdout == ""
    assert proc.stderr.splitlines() == [
        "diagbench: spec.yaml:3: server.command: unknown placeholder '{prt}' (did you mean '{port}'?)",
        'diagbench: spec.yaml:4: server.timeout: expected a positive duration like 90s, 8m or 1h, got "eight minutes"',
        "diagbench: spec.yaml:8: hypotheses[0].supported_if: expected at least one outcome, got an empty list "
        "(e.g. ready, or [failed:oom, crashed])",
    ]


def test_run_reports_them_before_opening_anything(tmp_path: Path) -> None:
    (tmp_path / "spec.yaml").write_text(THREE_MISTAKES)
    proc = diagbench("run", "spec.yaml", cwd=tmp_path)
    assert proc.returncode == 2 and len(proc.stderr.splitlines()) == 3
    assert not (tmp_path / "runs").exists()


def test_mistakes_in_every_section_are_sorted_by_line(tmp_path: Path) -> None:
    error = load(
        tmp_path,
        "name: x\n"
        "server:\n"
        "  command: foo\n"
        "  env: {'MY VAR': '1'}\n"
        "  port: http\n"
        "matrix:\n"
        "  a: {env: A, values: [1, 1]}\n"
        "  b: {flag: --b, values: [maybe]}\n"
        "expect:\n"
        "  - {when: {a: 1}}\n",
    )
    assert isinstance(error, SpecErrors)
    assert [(e.line, e.path) for e in error.errors] == [
        (4, "server.env.MY VAR"),
        (5, "server.port"),
        (7, "matrix.a.values[1]"),
        (8, "matrix.b.values[0]"),
        (10, "expect[0]"),
    ]


def test_a_broken_matrix_skips_the_checks_that_need_it(tmp_path: Path) -> None:
    # `when: {a: on}` would be "unknown axis" only because axis a is broken: not said
    error = load(
        tmp_path,
        "name: x\nserver: {command: foo}\nmatrix:\n  a: {flag: --x, values: [maybe]}\n"
        "hypotheses:\n  - {id: h, when: {a: on}, supported_if: ready, refuted_if: exploded}\n",
    )
    assert str(error).splitlines() == [
        'spec.yaml:4: matrix.a.values[0]: expected on or off (or true/false, yes/no), got "maybe"',
        "spec.yaml:6: hypotheses[0].refuted_if: unknown outcome 'exploded' "
        "(expected one of: cancelled, crashed, failed, launch_error, not_ready, ready, timeout)",
    ]


def test_a_misspelt_required_key_is_said_once(tmp_path: Path) -> None:
    error = load(tmp_path, "name: x\nsever: {command: foo}\nmatri:\n  a: {env: A, values: [1]}\n")
    assert str(error).splitlines() == [
        "spec.yaml:2: sever: unknown key 'sever' (did you mean 'server'?)",
        "spec.yaml:3: matri: unknown key 'matri' (did you mean 'matrix'?)",
    ]


def test_at_most_twenty_are_shown(tmp_path: Path) -> None:
    axes = "".join(f"  a{i}: {{flag: --a{i}, values: [maybe]}}\n" for i in range(25))
    error = load(tmp_path, "name: x\nserver: {command: foo}\nmatrix:\n" + axes)
    lines = str(error).splitlines()
    assert len(lines) == 21
    assert lines[0].startswith("spec.yaml:4: matrix.a0.values[0]:")
    assert lines[-1] == "spec.yaml: 5 more mistake(s) not shown (fix these first)"


# -- the new checks ------------------------------------------------------------------------

AXIS = "matrix:\n  a: {env: A, values: [1]}\n"


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            "name: x\nserver: {command: [foo, --port, '{prt}']}\n" + AXIS,
            "spec.yaml:2: server.command[2]: unknown placeholder '{prt}' (did you mean '{port}'?)",
        ),
        (
            "name: x\nserver: {command: 'foo --bs {value}'}\n" + AXIS,
            "spec.yaml:2: server.command: unknown placeholder '{value}' (placeholders here: {port}, {python}, {bin:NAME})",
        ),
        (
            "name: x\nserver: {command: foo, env: {URL: 'http://h:{prot}'}}\n" + AXIS,
            "spec.yaml:2: server.env.URL: unknown placeholder '{prot}' (did you mean '{port}'?)",
        ),
        (
            "name: x\nserver: {command: foo, ready: {http: 'http://h:{pot}/health'}}\n" + AXIS,
            "spec.yaml:2: server.ready.http: unknown placeholder '{pot}' (did you mean '{port}'?)",
        ),
        (
            "name: x\nserver: {command: foo}\nmatrix:\n  a: {args: [--bs, '{vlaue}'], values: [1]}\n",
            "spec.yaml:4: matrix.a.args[1]: unknown placeholder '{vlaue}' (did you mean '{value}'?)",
        ),
        (
            "name: x\nserver: {command: foo}\nmatrix:\n  a: {args: [--url, '{value}'], values: ['h:{prt}']}\n",
            "spec.yaml:4: matrix.a.values[0]: unknown placeholder '{prt}' (did you mean '{port}'?)",
        ),
        (
            "name: x\nserver: {command: foo}\nmatrix:\n  a: {env: 'MY VAR', values: [1]}\n",
            "spec.yaml:4: matrix.a.env: invalid environment variable name 'MY VAR' "
            "(use letters, digits and _, not starting with a digit)",
        ),
        (
            "name: x\nserver: {command: foo, fresh_caches: [TRITON_CACHE_DIR, 1CACHE]}\n" + AXIS,
            "spec.yaml:2: server.fresh_caches[1]: invalid environment variable name '1CACHE' "
            "(use letters, digits and _, not starting with a digit)",
        ),
        (
            "name: x\nserver: {command: foo}\n" + AXIS + "hypotheses:\n  - {id: h, when: {a: 1}, "
            "supported_if: [], refuted_if: failed}\n",
            "spec.yaml:6: hypotheses[0].supported_if: expected at least one outcome, got an empty list "
            "(e.g. ready, or [failed:oom, crashed])",
        ),
        (
            "name: x\nserver: {command: foo}\n" + AXIS + "expect:\n  - {outcome: []}\n",
            "spec.yaml:6: expect[0].outcome: expected at least one outcome, got an empty list "
            "(e.g. ready, or [failed:oom, crashed])",
        ),
    ],
)
def test_new_checks(tmp_path: Path, text: str, message: str) -> None:
    assert str(load(tmp_path, text)) == message


def test_an_empty_refuted_if_is_refused_nothing_could_refute_it(tmp_path: Path) -> None:
    (tmp_path / "spec.yaml").write_text(
        "name: x\nserver: {command: foo}\n" + AXIS + "hypotheses:\n"
        "  - {id: h, when: {a: 1}, supported_if: ready, refuted_if: []}\n"
    )
    with pytest.raises(SpecError) as caught:
        load_spec(tmp_path / "spec.yaml")
    assert str(caught.value).endswith(
        "hypotheses[0].refuted_if: expected at least one outcome, got an empty list (e.g. ready, or [failed:oom, crashed])"
    )


def test_what_a_shell_expands_is_not_a_placeholder(tmp_path: Path) -> None:
    (tmp_path / "spec.yaml").write_text("name: x\nserver: {command: 'echo ${HOME} {port}', shell: true}\n" + AXIS)
    assert load_spec(tmp_path / "spec.yaml").server.command == ("echo ${HOME} {port}",)


# -- before launching: the program, the cwd, the --junit path --------------------------------


def spec_with(tmp_path: Path, command: str, extra: str = "") -> Path:
    path = tmp_path / "spec.yaml"
    path.write_text(f"name: x\nserver:\n  command: {command}\n  timeout: 10s\n  grace: 1s\n{extra}" + AXIS)
    return path


@pytest.mark.parametrize("command", ["plan", "run"])
def test_a_missing_program_is_said_before_launching(tmp_path: Path, command: str) -> None:
    spec_with(tmp_path, "no-such-server-xyz --port {port}")
    proc = diagbench(command, "spec.yaml", cwd=tmp_path)
    assert proc.returncode == 2
    assert proc.stderr.endswith(
        "diagbench: executable 'no-such-server-xyz' not found on PATH (install it or give its full path); "
        "every cell would end launch_error\n"
    )
    assert not (tmp_path / "runs").exists()


@pytest.mark.parametrize("command", ["plan", "run"])
def test_a_missing_cwd_is_said_before_launching(tmp_path: Path, command: str) -> None:
    spec_with(tmp_path, sys.executable, "  cwd: nowhere\n")
    proc = diagbench(command, "spec.yaml", cwd=tmp_path)
    assert proc.returncode == 2
    assert f"diagbench: working directory {tmp_path / 'nowhere'} does not exist (fix server.cwd)" in proc.stderr
    assert not (tmp_path / "runs").exists()


def test_a_program_missing_for_some_cells_is_a_warning_and_those_cells_fail(tmp_path: Path) -> None:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    server = bin_dir / "fake-server"
    server.write_text(f"#!{sys.executable}\nprint({READY!r}, flush=True)\nimport time; time.sleep(30)\n")
    server.chmod(0o755)
    (tmp_path / "spec.yaml").write_text(
        "name: x\nserver: {command: fake-server, timeout: 10s, grace: 1s}\n"
        f"matrix:\n  path: {{env: PATH, values: {{good: '{bin_dir}', bad: '{tmp_path}'}}}}\n"
    )
    proc = diagbench("run", "spec.yaml", "--run-id", "partial", cwd=tmp_path)
    assert_nothing_left("partial")
    assert "cell(s) path=bad would end launch_error" in proc.stderr
    assert proc.returncode == 0  # one cell ran: not a setup failure of the whole run
    assert "launch_error" in proc.stdout and "ready" in proc.stdout


def test_a_run_in_which_no_attempt_could_start_exits_2(tmp_path: Path) -> None:
    with socket.socket() as held:  # the spec's fixed port is taken: every attempt is launch_error
        held.bind(("127.0.0.1", 0))
        held.listen()
        port = held.getsockname()[1]
        command = " ".join(fake_command(f"out={READY}", "hang"))
        spec_with(tmp_path, command, f"  port: {port}\n")
        proc = diagbench("run", "spec.yaml", "--run-id", "none-started", cwd=tmp_path)
    assert_nothing_left("none-started")
    assert proc.returncode == 2
    assert f"diagbench: no attempt could start: port {port} is already in use by" in proc.stderr
    report = diagbench("report", "runs/none-started", cwd=tmp_path)
    assert report.returncode == 2 and "no attempt could start" in report.stderr


@pytest.mark.parametrize("where", ["no/such/dir/j.xml", "."])
def test_an_unwritable_junit_path_stops_before_the_run(tmp_path: Path, where: str) -> None:
    spec_with(tmp_path, sys.executable)
    proc = diagbench("run", "spec.yaml", "--junit", where, cwd=tmp_path)
    assert proc.returncode == 2
    assert proc.stderr.startswith(f"diagbench: --junit {where}: cannot write there (")
    assert proc.stderr.endswith("; fix the path, nothing was run\n")
    assert not (tmp_path / "runs").exists()


def test_checking_the_junit_path_leaves_an_existing_file_alone(tmp_path: Path) -> None:
    from diagbench.cli.checks import check_writable

    kept = tmp_path / "old.xml"
    kept.write_text("<old/>")
    check_writable(kept, "--junit")
    check_writable(tmp_path / "new.xml", "--junit")
    assert kept.read_text() == "<old/>" and not (tmp_path / "new.xml").exists()
