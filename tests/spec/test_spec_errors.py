"""Every bad spec: exit 2 and one located message. The exact text is pinned."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from diagbench.errors import SpecError
from diagbench.spec.load import load_spec

GOOD_SERVER = "server: {command: foo}\n"
AXIS = "matrix:\n  a: {env: A, values: [1]}\n"

CASES = [
    ("", "spec.yaml:1: the file is empty (a spec needs at least 'name' and 'server')"),
    ("- a\n- b\n", "spec.yaml:1: expected a mapping of spec keys at the top, got a list"),
    (
        "name: x\nserver:\n  command: [a, b\nmatrix: {}\n",
        "spec.yaml:4: invalid YAML: expected ',' or ']', but got ':' (check the indentation and quoting)",
    ),
    (
        "name: x\nserver:\n\tcommand: foo\n",
        "spec.yaml:3: invalid YAML: found character '\\t' that cannot start any token (check the indentation and quoting)",
    ),
    (
        "name: x\nserver:\n  comand: foo\n" + AXIS,
        "spec.yaml:3: server.comand: unknown key 'comand' (did you mean 'command'?)",
    ),
    ("name: x\nsever: {command: foo}\n" + AXIS, "spec.yaml:2: sever: unknown key 'sever' (did you mean 'server'?)"),
    ("name: x\n" + GOOD_SERVER, "spec.yaml:1: missing key 'matrix' (add a `matrix:` section with at least one axis)"),
    (
        "name: x\n" + GOOD_SERVER + "matrix:\n  a: {env: A, values: []}\n",
        "spec.yaml:4: matrix.a.values: expected at least one value, got an empty list",
    ),
    (
        "name: x\n" + GOOD_SERVER + "matrix: {}\n",
        "spec.yaml:3: matrix: expected at least one axis (add e.g. `compile: {flag: --enable-torch-compile, values: [on, off]}`)",
    ),
    (
        "name: x\nserver:\n  command: foo\n  ready: {log: 'ready ('}\n" + AXIS,
        "spec.yaml:4: server.ready.log: invalid regular expression 'ready (': missing ), unterminated subpattern at position 6",
    ),
    (
        "name: x\nserver:\n  command: foo\n  timeout: eight minutes\n" + AXIS,
        'spec.yaml:4: server.timeout: expected a positive duration like 90s, 8m or 1h, got "eight minutes"',
    ),
    (
        "name: x\nserver: {command: foo, port: http}\n" + AXIS,
        'spec.yaml:2: server.port: expected auto or a port number, got "http"',
    ),
    (
        "name: x\nserver: {command: foo, port: 70000}\n" + AXIS,
        'spec.yaml:2: server.port: expected auto or a port number from 1 to 65535, got "70000"',
    ),
    (
        'name: x\nserver: {command: "foo \'bar"}\n' + AXIS,
        "spec.yaml:2: server.command: cannot split the command like a shell would: No closing quotation (close the quote)",
    ),
    ("name: x\nserver: {command: []}\n" + AXIS, "spec.yaml:2: server.command: expected a command, got an empty list"),
    (
        "name: x\nserver: {command: foo}\nmatrix:\n  a: {env: A, values: [1, 2]}\n  exclude: [{b: 1}]\n",
        "spec.yaml:5: matrix.exclude[0].b: unknown axis 'b' (expected one of: a)",
    ),
    (
        "name: x\nserver: {command: foo}\nmatrix:\n  a: {env: A, values: [1, 2]}\n  exclude: [{a: 3}]\n",
        "spec.yaml:5: matrix.exclude[0].a: unknown label '3' for axis 'a' (labels are: 1, 2)",
    ),
    (
        "name: x\nserver: {command: foo}\nmatrix:\n  a: {env: A, values: [1, 2]}\n  include: [{a: 1, b: 2}]\n",
        "spec.yaml:5: matrix.include[0].b: unknown axis 'b' (expected one of: a)",
    ),
    (
        "name: x\nserver: {command: foo}\nmatrix:\n  a: {env: A, values: [1, 1]}\n",
        "spec.yaml:4: matrix.a.values[1]: duplicate label '1'",
    ),
    (
        "name: x\nserver: {command: foo}\nmatrix:\n  a: {env: A, flag: --x, values: [on]}\n",
        "spec.yaml:4: matrix.a: expected exactly one of env, flag, args, got env and flag",
    ),
    (
        "name: x\nserver: {command: foo}\nmatrix:\n  a: {flag: --x, values: [maybe]}\n",
        'spec.yaml:4: matrix.a.values[0]: expected on or off (or true/false, yes/no), got "maybe"',
    ),
    (
        "name: x\nserver: {command: foo}\nmatrix:\n  a: {args: [--bs, 32], values: [1]}\n",
        'spec.yaml:4: matrix.a.args: expected the args to use {value} (e.g. args: [--cuda-graph-max-bs, "{value}"])',
    ),
    (
        "name: x\nserver: {command: foo}\nmatrix:\n  a: {env: A}\n",
        "spec.yaml:4: matrix.a: missing key 'values' (list the levels, e.g. values: [on, off])",
    ),
    (
        "name: x\nserver: {command: foo}\nmatrix:\n  a: [1, 2]\n",
        "spec.yaml:4: matrix.a: expected a mapping with env, flag or args, and values, got a list",
    ),
    (
        "name: x\nserver:\n  command: foo\n  failures: {mine: {pattern: boom, class: kaboom}}\n" + AXIS,
        "spec.yaml:4: server.failures.mine.class: unknown failure class \"kaboom\" (did you mean 'oom'?)",
    ),
    (
        "name: x\nserver:\n  command: foo\n  signatures: [sglang, vlm]\n" + AXIS,
        "spec.yaml:4: server.signatures[1]: unknown signature pack 'vlm' (did you mean 'vllm'?; or give a path to a pack file)",
    ),
    (
        "name: x\nserver:\n  command: foo\n  signatures: [nccl]\n" + AXIS,
        "spec.yaml:3: server: no ready condition: none of the chosen signature packs has a ready line "
        "(set server.ready.log (a regex) or server.ready.http (a path such as /health))",
    ),
    (
        "name: x\nserver:\n  command: foo\n  ready: {http: health}\n" + AXIS,
        'spec.yaml:4: server.ready.http: expected a URL path starting with / (or a full http:// URL), got "health" (write /health)',
    ),
    (
        "name: x\nserver:\n  command: foo\n  ready: {request: {json: {prompt: hi}}}\n" + AXIS,
        "spec.yaml:4: server.ready.request: missing key 'path' (e.g. request: {path: /v1/completions, json: {prompt: hi, max_tokens: 1}})",
    ),
    (
        "name: x\nserver:\n  command: foo\n  ready:\n    request: {path: /v1/completions, methd: POST}\n" + AXIS,
        "spec.yaml:5: server.ready.request.methd: unknown key 'methd' (did you mean 'method'?)",
    ),
    (
        "name: x\nserver:\n  command: foo\n  ready:\n    request: {path: /x, method: DELETE}\n" + AXIS,
        'spec.yaml:5: server.ready.request.method: expected GET, POST or PUT, got "DELETE"',
    ),
    (
        "name: x\nserver:\n  command: foo\n  ready:\n    request: {path: /x, status: 42}\n" + AXIS,
        'spec.yaml:5: server.ready.request.status: expected an HTTP status code from 100 to 599, got "42"',
    ),
    (
        "name: x\nserver:\n  command: foo\n  ready:\n    request: {path: /x, json: '{prompt: hi}'}\n" + AXIS,
        "spec.yaml:5: server.ready.request.json: not valid JSON: Expecting property name enclosed in double quotes "
        "at character 1 (write it as a YAML mapping)",
    ),
    (
        "name: x\nserver:\n  command: foo\n  ready:\n    request: {path: /x, json: {day: 2024-01-01}}\n" + AXIS,
        "spec.yaml:5: server.ready.request.json: cannot be sent as JSON: Object of type date is not JSON serializable "
        "(quote the value)",
    ),
    (
        "name: x\nserver:\n  command: foo\n  ready: {}\n" + AXIS,
        "spec.yaml:4: server.ready: expected log, http and/or request (e.g. ready: {log: 'fired up and ready'})",
    ),
    (
        "name: x\nserver: {command: foo}\nmatrix:\n  a: {flag: --x, values: [on, off]}\n"
        "hypotheses:\n  - {id: h, when: {a: on}, supported_if: ready, refuted_if: exploded}\n",
        "spec.yaml:6: hypotheses[0].refuted_if: unknown outcome 'exploded' "
        "(expected one of: cancelled, crashed, failed, launch_error, not_ready, ready, timeout)",
    ),
    (
        "name: x\nserver: {command: foo}\nmatrix:\n  a: {flag: --x, values: [on, off]}\n  exclude: [{a: off}]\n"
        "hypotheses:\n  - {id: h, when: {a: off}, supported_if: ready, refuted_if: failed}\n",
        "spec.yaml:7: hypotheses[0].when: selects no cell of the matrix (check it against `diagbench plan` and the exclude list)",
    ),
    (
        "name: x\nserver: {command: foo}\nmatrix:\n  a: {flag: --x, values: [on, off]}\n"
        "hypotheses:\n  - {id: h, when: {a: on}, supported_if: ready, refuted_if: failed}\n"
        "  - {id: h, when: {a: off}, supported_if: ready, refuted_if: failed}\n",
        "spec.yaml:7: hypotheses[1].id: duplicate hypothesis id 'h' (give each hypothesis its own id)",
    ),
    (
        "name: x\nserver: {command: foo}\nmatrix:\n  a: {flag: --x, values: [on, off]}\n"
        "hypotheses:\n  - {id: h, when: {a: on}, supported_if: ready:oom, refuted_if: failed}\n",
        "spec.yaml:6: hypotheses[0].supported_if: a failure class only narrows 'failed', got 'ready:oom' (write failed:oom)",
    ),
    (
        "name: x\nserver: {command: foo}\nmatrix:\n  a: {flag: --x, values: [on, off]}\n"
        "hypotheses:\n  - {id: h, when: {a: on}, supported_if: ready, refuted_if: 'failed:ooom'}\n",
        "spec.yaml:6: hypotheses[0].refuted_if: unknown failure class 'ooom' (did you mean 'oom'?)",
    ),
    (
        "name: x\nserver: {command: foo}\nmatrix:\n  a: {flag: --x, values: [on, off]}\nexpect:\n  - {when: {a: on}}\n",
        "spec.yaml:6: expect[0]: missing key 'outcome' (e.g. {when: {compile: off}, outcome: ready})",
    ),
    (
        "name: x\nserver: {command: foo}\nmatrix:\n  a: {flag: --x, values: [on, off]}\n"
        "hypotheses:\n  - {id: h, when: {a: on}, supported_if: ready, refuted_if: failed, meaning: {yes: y}}\n",
        "spec.yaml:6: hypotheses[0].meaning.yes: unknown key 'yes' (expected one of: inconclusive, refuted, supported)",
    ),
]


@pytest.mark.parametrize(("text", "message"), CASES)
def test_bad_spec_message(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, text: str, message: str) -> None:
    monkeypatch.chdir(tmp_path)
    Path("spec.yaml").write_text(text)
    with pytest.raises(SpecError) as caught:
        load_spec(Path("spec.yaml"))
    assert str(caught.value) == message


def test_missing_file() -> None:
    with pytest.raises(SpecError) as caught:
        load_spec(Path("no/such/spec.yaml"))
    assert str(caught.value) == "no/such/spec.yaml: no such file (check the path)"


def test_a_directory_is_not_a_spec(tmp_path: Path) -> None:
    with pytest.raises(SpecError, match="is a directory"):
        load_spec(tmp_path)


def test_binary_file(tmp_path: Path) -> None:
    path = tmp_path / "spec.yaml"
    path.write_bytes(b"\xff\xfe\x00garbage")
    with pytest.raises(SpecError, match="not UTF-8 text"):
        load_spec(path)


@pytest.mark.parametrize("command", ["plan", "run"])
def test_cli_exit_2_and_one_line_without_traceback(tmp_path: Path, command: str) -> None:
    path = tmp_path / "spec.yaml"
    path.write_text("name: x\nserver:\n  comand: foo\n" + AXIS)
    proc = subprocess.run([sys.executable, "-m", "diagbench", command, str(path)], capture_output=True, text=True)
    assert proc.returncode == 2
    assert proc.stderr == f"diagbench: {path}:3: server.comand: unknown key 'comand' (did you mean 'command'?)\n"
    assert proc.stdout == ""


def test_cli_bad_only_is_usage_error(tmp_path: Path) -> None:
    path = tmp_path / "spec.yaml"
    path.write_text("name: x\nserver: {command: foo}\nmatrix:\n  a: {flag: --x, values: [on, off]}\n")
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "diagbench",
            "run",
            str(path),
            "--only",
            "a=maybe",
            "--runs-dir",
            str(tmp_path / "runs"),
        ],
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 2
    assert proc.stderr == "diagbench: --only a=maybe: unknown label 'maybe' for axis 'a' (labels are: on, off)\n"
    assert not (tmp_path / "runs").exists()  # nothing is opened for an unusable command line


def test_user_pack_file_in_a_spec(tmp_path: Path) -> None:
    (tmp_path / "mine.yaml").write_text(
        "pack: mine\nsignatures:\n  - {id: mine.boom, kind: failure, class: oom, pattern: 'boom'}\n"
    )
    path = tmp_path / "spec.yaml"
    path.write_text("name: x\nserver:\n  command: foo\n  signatures: [sglang, ./mine.yaml]\n" + AXIS)
    spec = load_spec(path)
    assert "mine.boom" in {s.id for s in spec.server.signatures}


def test_a_broken_user_pack_is_located_in_the_pack_file(tmp_path: Path) -> None:
    (tmp_path / "mine.yaml").write_text("pack: mine\nsignatures:\n  - {id: x, kind: failure, pattern: 'a('}\n")
    path = tmp_path / "spec.yaml"
    path.write_text("name: x\nserver:\n  command: foo\n  signatures: [./mine.yaml]\n" + AXIS)
    with pytest.raises(SpecError) as caught:
        load_spec(path)
    assert str(caught.value).startswith(
        f"{tmp_path / 'mine.yaml'}:3: signatures[0].pattern: invalid regular expression 'a('"
    )


def test_a_missing_user_pack_is_located_in_the_spec(tmp_path: Path) -> None:
    path = tmp_path / "spec.yaml"
    path.write_text("name: x\nserver:\n  command: foo\n  signatures: [./nope.yaml]\n" + AXIS)
    with pytest.raises(SpecError) as caught:
        load_spec(path)
    assert (
        str(caught.value)
        == f"{path}:4: server.signatures[0]: signature pack './nope.yaml': no such file (check the path)"
    )


def test_a_retry_on_a_failure_line_is_one_message(tmp_path: Path) -> None:
    (tmp_path / "mine.yaml").write_text(
        "pack: mine\nsignatures:\n  - {id: x, kind: failure, retry: true, pattern: 'again'}\n"
    )
    path = tmp_path / "spec.yaml"
    path.write_text("name: x\nserver:\n  command: foo\n  signatures: [./mine.yaml]\n" + AXIS)
    with pytest.raises(SpecError) as caught:
        load_spec(path)
    assert str(caught.value) == (
        f"{tmp_path / 'mine.yaml'}:3: signatures[0].retry: retry is for phase lines "
        "(use kind: phase, with the phase the retry runs)"
    )
