"""What a package isolation reads from others (an interpreter's distributions, the words and
files given as DEPS, a package index's listing) can never choose what uv is told, nor make
`--between` build one environment per version: each case as a hostile or sparse source
would give it. Real interpreters, real uv builds, a real package index (tests/fakeindex.py)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import venv
from pathlib import Path

import pytest
from fakeindex import Release, build_index, serving

from diagbench.errors import UserError
from diagbench.isolate.deps import read_deps

PACKAGE = "doorspkg"
READY = "The server is fired up and ready to roll!"
INDEX_VARS = ("UV_DEFAULT_INDEX", "UV_INDEX", "UV_INDEX_URL", "UV_EXTRA_INDEX_URL", "PIP_INDEX_URL")


def installed_from(folder: Path, url: str) -> Path:
    """A real venv holding a distribution whose direct_url.json says `url`."""
    venv.EnvBuilder(with_pip=False, symlinks=True).create(folder)
    site = next((folder / "lib").glob("python*/site-packages"))
    info = site / "myserver-0.3.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: myserver\nVersion: 0.3\n")
    (info / "direct_url.json").write_text(json.dumps({"url": url, "archive_info": {}}))
    return folder / "bin" / "python"


def test_a_direct_url_with_a_line_break_never_reaches_the_requirements_uv_reads(tmp_path: Path) -> None:
    python = installed_from(
        tmp_path / "v", "https://example.com/myserver-0.3.whl\n--index-url https://evil.example/simple"
    )
    with pytest.raises(UserError) as caught:
        read_deps("--good-deps", str(python), tmp_path)
    assert "myserver was installed from" in str(caught.value) and "which is no plain URL" in str(caught.value)
    assert "\n" not in str(caught.value)
    spaced = installed_from(tmp_path / "w", "https://example.com/x.whl --index-url https://evil.example/simple")
    with pytest.raises(UserError, match="no plain URL"):
        read_deps("--good-deps", str(spaced), tmp_path)
    plain = installed_from(tmp_path / "p", "https://example.com/myserver-0.3.whl")
    assert read_deps("--good-deps", str(plain), tmp_path).pins["myserver"].line == (
        "myserver @ https://example.com/myserver-0.3.whl"
    )


def test_a_url_given_as_deps_is_said_never_read_as_a_package(tmp_path: Path) -> None:
    for given in ("six==1.16.0 https://example.com/reqs.txt", "https://user:s3cret@example.com/reqs.txt"):
        with pytest.raises(UserError) as caught:
            read_deps("--good-deps", given, tmp_path)
        assert "a URL is not read" in str(caught.value) and "s3cret" not in str(caught.value)
    with pytest.raises(UserError, match=r"expected a requirement such as 'pkg==1\.2\.3'"):
        read_deps("--good-deps", "six==1.16.0 http:pkg", tmp_path)


def test_a_deps_file_that_is_a_fifo_or_a_device_is_one_message(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "reqs.txt")
    with pytest.raises(UserError, match=r"reqs.txt: a named pipe \(FIFO\), not a regular file"):
        read_deps("--good-deps", "reqs.txt", tmp_path)
    with pytest.raises(UserError, match="/dev/zero: a character device, not a regular file"):
        read_deps("--good-deps", "/dev/zero", tmp_path)


# -- --between over a sparse index --------------------------------------------------------


def isolate(tmp_path: Path, url: str, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in INDEX_VARS}
    env |= {"DIAGBENCH_ENV_CACHE": str(tmp_path / "envs"), "COLUMNS": "200", "UV_INDEX_URL": url}
    argv = [sys.executable, "-m", "diagbench", "isolate", *args, "--runs-dir", str(tmp_path / "runs"), "--json"]
    return subprocess.run(
        [*argv, "--timeout", "30s"], capture_output=True, text=True, timeout=600, cwd=tmp_path, env=env
    )


def server(tmp_path: Path, first_bad: int) -> None:
    (tmp_path / "server.py").write_text(
        f"import sys, time\nimport {PACKAGE}\n"
        f"if int(float({PACKAGE}.VERSION)) >= {first_bad}:\n"
        "    print('torch.OutOfMemoryError: CUDA out of memory.', flush=True)\n    sys.exit(1)\n"
        f"print({READY!r}, flush=True)\ntime.sleep(600)\n"
    )


def built(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if re.match(r"environment \(", line) and "cache" not in line]


def test_between_bisects_only_the_versions_this_interpreter_can_install(tmp_path: Path) -> None:
    """An index listing 300 versions, all but 9 for a Python that does not exist: 9 are bisected."""
    mine = {1, 40, 80, 120, 160, 200, 240, 280, 300}
    releases = [Release(f"{v}.0", None if v in mine else ">=3.99") for v in range(1, 301)]
    build_index(tmp_path / "index", PACKAGE, releases)
    server(tmp_path, first_bad=150)
    with serving(tmp_path / "index") as url:
        done = isolate(tmp_path, url, "--between", f"{PACKAGE}==1.0..300.0", "--good", "{python} server.py")
    assert done.returncode == 0, done.stderr
    data = json.loads(done.stdout)
    assert (data["first_bad"], data["last_good"]) == ("160.0", "120.0")
    assert len(built(done.stderr)) <= 2 + 4  # the two ends, then a bisection of 7
    assert "9 published version(s) of doorspkg from 1.0 to 300.0" in json.dumps(data)


def test_between_stops_after_its_skip_budget_when_nothing_between_installs(tmp_path: Path) -> None:
    """100 versions between whose every release needs a package no index has: a short answer, not 98 builds."""
    releases = [Release(f"{v}.0", None, () if v in (1, 100) else ("nowhere-to-be-found==1",)) for v in range(1, 101)]
    build_index(tmp_path / "index", PACKAGE, releases)
    server(tmp_path, first_bad=50)
    with serving(tmp_path / "index") as url:
        done = isolate(tmp_path, url, "--between", f"{PACKAGE}==1.0..100.0", "--good", "{python} server.py")
    assert done.returncode == 1, done.stderr
    assert json.loads(done.stdout)["culprit"] == []
    assert len(built(done.stderr)) <= 2 + 16  # the ends, and the skip budget of 2*ceil(log2 100)+2
    assert re.search(r"the first bad version is one of the \d+ from \d+\.0 to \d+\.0: ", done.stderr), done.stderr
