"""A full disk is said, never passed off as success or as an interruption: `report` into a
file on a full file system exits 2 with one line (not 0 with a cut file), `report >
/dev/full` too (no traceback), and an `isolate` whose servers' logs fill the disk is recorded
`write_failed` (exit 2), which `report` then gives back as 2, not 130.

A real tmpfs, mounted in a private mount namespace (`unshare -m`): root only."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from conftest import diagbench_argv, fake_command, write_spec

READY = "The server is fired up and ready to roll!"
ROOT_ONLY = pytest.mark.skipif(
    os.geteuid() != 0 or shutil.which("unshare") is None, reason="needs root and unshare (a private tmpfs)"
)
FORMATS = ("html", "json", "junit", "md", "table")


@pytest.fixture(scope="module")
def a_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("run")
    spec = write_spec(folder, {"command": fake_command(f"out={READY}", "hang")})
    done = subprocess.run(diagbench_argv("run", str(spec), "--runs-dir", str(folder / "runs")), capture_output=True)
    assert done.returncode == 0, done.stderr
    return next((folder / "runs").glob("2*"))


def test_report_to_dev_full_is_exit_2_in_one_line(a_run):
    for form in FORMATS:
        with open("/dev/full", "w") as full:
            done = subprocess.run(
                diagbench_argv("report", str(a_run), "--format", form), stdout=full, stderr=subprocess.PIPE, text=True
            )
        assert done.returncode == 2, (form, done.stderr)
        assert "Traceback" not in done.stderr and len(done.stderr.strip().splitlines()) == 1
        assert "No space left on device" in done.stderr


def test_report_to_a_closed_pipe_stays_quiet(a_run):
    proc = subprocess.Popen(diagbench_argv("report", str(a_run), "--format", "html"), stdout=subprocess.PIPE)
    assert proc.stdout is not None
    proc.stdout.read(10)
    proc.stdout.close()
    assert proc.wait(timeout=60) == 0


def in_small_tmpfs(tmp_path: Path, script: str) -> str:
    small = tmp_path / "small"
    small.mkdir()
    shell = f"mount -t tmpfs -o size=1m tmpfs {small} && cd {small} && {script}"
    done = subprocess.run(["unshare", "-m", "sh", "-c", shell], capture_output=True, text=True, timeout=300)
    return done.stdout + done.stderr


@ROOT_ONLY
def test_report_into_a_file_on_a_full_disk_is_exit_2(tmp_path, a_run):
    lines = [
        "head -c 2M /dev/zero > fill 2>/dev/null",
        *(
            f'{shlex(diagbench_argv("report", str(a_run), "--format", form))} > out.{form}; echo "{form} rc=$?"'
            for form in FORMATS
        ),
    ]
    said = in_small_tmpfs(tmp_path, "; ".join(lines))
    for form in FORMATS:
        assert f"{form} rc=2" in said, said
    assert said.count("standard output could not be written whole") == len(FORMATS)
    assert "Traceback" not in said


@ROOT_ONLY
def test_an_isolation_that_fills_the_disk_is_write_failed_not_interrupted(tmp_path):
    good = " ".join(fake_command(f"out='{READY}'", "hang"))
    bad = " ".join(fake_command("flood=8", "hang"))
    isolate = shlex(diagbench_argv("isolate", "--good", good, "--bad", bad, "--runs-dir", "runs"))
    script = (
        f'{isolate} > isolate.out 2>&1; echo "isolate rc=$?"; '
        f'{shlex(diagbench_argv("report"))} runs/2* > /dev/null 2>report.err; echo "report rc=$?"; '
        "cat runs/2*/isolation.json; cat report.err; tail -3 isolate.out"
    )
    said = in_small_tmpfs(tmp_path, script)
    assert "isolate rc=2" in said, said
    assert "report rc=2" in said, said
    body = said[said.index("{") : said.rindex("}") + 1]
    recorded = json.loads(body[: body.index("\n}") + 2])
    assert recorded["status"] == "write_failed", recorded
    assert "No space left on device" in recorded["reason"]


def shlex(argv: list[str]) -> str:
    import shlex as quoting

    return " ".join(quoting.quote(word) for word in argv)
