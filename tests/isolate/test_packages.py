"""Package isolation with real packages from PyPI (uv builds every probe's environment).

The servers are tiny scripts whose launch breaks between two real published versions:
- packaging 22.0 removed `packaging.version.LegacyVersion` (deprecated in 21.x; PEP 440 only
  from 22.0 on), so `from packaging.version import LegacyVersion` fails on 22.0;
- urllib3 2.0 removed `urllib3.contrib.appengine`, and requests 2.29.0 requires
  urllib3<1.27: urllib3 2.0.7 cannot even be installed beside it (requests 2.30 lifted that).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import jsonschema
import pytest

from diagbench.schemas import load_schema
from pypi import need_pypi

READY = "The server is fired up and ready to roll!"
LEGACY_SERVER = f"""import time
import attr, colorama, idna, six, toml
from packaging.version import LegacyVersion  # removed in packaging 22.0
print({READY!r}, flush=True)
time.sleep(600)
"""
APPENGINE_SERVER = f"""import time
import requests, six, toml
from urllib3.contrib import appengine  # removed in urllib3 2.0
print({READY!r}, flush=True)
time.sleep(600)
"""
GOOD = "packaging==21.3 pyparsing==3.0.9 six==1.15.0 idna==3.3 toml==0.10.1 colorama==0.4.4 attrs==22.1.0"
BAD = "packaging==22.0 pyparsing==3.0.9 six==1.16.0 idna==3.4 toml==0.10.2 colorama==0.4.6 attrs==22.2.0"


@pytest.fixture(scope="module")
def env_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One probe-environment cache for this module's tests (built once, re-used after)."""
    need_pypi()
    return tmp_path_factory.mktemp("envs")


def isolate(cache: Path, cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    argv = [sys.executable, "-m", "diagbench", "isolate", *args, "--runs-dir", str(cwd / "runs"), "--timeout", "60s"]
    env = {**os.environ, "DIAGBENCH_ENV_CACHE": str(cache), "COLUMNS": "200"}
    return subprocess.run(argv, capture_output=True, text=True, timeout=600, cwd=cwd, env=env)


def built(output: str) -> int:
    return sum(" built in " in line for line in output.splitlines() if line.startswith("environment ("))


def test_the_guilty_package_among_six_and_the_cache_on_a_second_run(env_cache: Path, tmp_path: Path) -> None:
    (tmp_path / "server.py").write_text(LEGACY_SERVER)
    args = ["--good", "{python} server.py", "--good-deps", GOOD, "--bad-deps", BAD, "--json"]
    first = isolate(env_cache, tmp_path, *args)
    assert first.returncode == 0, first.stderr
    data = json.loads(first.stdout)
    jsonschema.validate(data, load_schema("isolation"))
    assert data["culprit"] == ["packaging"]
    assert {f["name"]: (f["kind"], f["good"], f["bad"]) for f in data["factors"]}["packaging"] == (
        "package",
        "21.3",
        "22.0",
    )
    assert len(data["factors"]) == 6
    assert data["target"] == {"outcome": "failed", "failure_class": "import_error"}
    assert "culprit: packaging 21.3 -> 22.0" in isolate(env_cache, tmp_path, *args[:-1]).stdout  # the text form
    builds = built(first.stderr)
    # one environment per configuration the search tried, fewer than one at a time; the launches
    # that confirm the culprit (at --repeat 1) re-use theirs
    assert builds <= data["launches"] and builds < 2 + 6
    again = isolate(env_cache, tmp_path, *args)
    assert again.returncode == 0 and json.loads(again.stdout)["culprit"] == ["packaging"]
    assert built(again.stderr) == 0
    assert again.stderr.count("found in the cache") >= builds


def test_a_set_that_does_not_resolve_is_unresolved_and_the_pair_applied_together(
    env_cache: Path, tmp_path: Path
) -> None:
    (tmp_path / "server.py").write_text(APPENGINE_SERVER)
    good = "requests==2.29.0 urllib3==1.26.18 six==1.15.0 toml==0.10.1 idna==3.4"
    bad = "requests==2.31.0 urllib3==2.0.7 six==1.16.0 toml==0.10.2 idna==3.6"
    done = isolate(env_cache, tmp_path, "--good", "{python} server.py", "--good-deps", good, "--bad-deps", bad)
    assert done.returncode == 0, done.stderr
    assert "culprit: requests 2.29.0 -> 2.31.0, urllib3 1.26.18 -> 2.0.7" in done.stdout
    assert "(urllib3 2.0.7 does not install without requests 2.31.0: applied together)" in done.stdout
    assert "environment (urllib3): does not install: " in done.stdout
    record = json.loads(next((tmp_path / "runs").glob("*/isolation.json")).read_text())
    alone = next(s for s in record["steps"] if s["applied"] == ["urllib3"])
    assert (alone["outcome"], alone["result"]) == ("launch_error", "unresolved")
    attempt = tmp_path / "runs" / next((tmp_path / "runs").glob("*")).name / "cells" / alone["attempts"][0]
    reason = json.loads((attempt / "result.json").read_text())["reason"]
    assert reason.startswith("its environment did not resolve or install: ")
    assert not (attempt / "server.log").exists()  # never launched


def test_environments_from_an_interpreter_and_a_requirements_file(env_cache: Path, tmp_path: Path) -> None:
    """An interpreter's own packages are read, never changed; a pip-freeze file is read line by line."""
    (tmp_path / "server.py").write_text(LEGACY_SERVER)
    first = isolate(
        env_cache, tmp_path, "--good", "{python} server.py", "--good-deps", GOOD, "--bad-deps", BAD, "--json"
    )
    good_python = Path(json.loads(first.stdout)["commands"]["good"].split()[0])
    before = sorted(p.name for p in good_python.parent.parent.rglob("*.dist-info"))
    (tmp_path / "bad.txt").write_text("# pip freeze\n" + "\n".join(BAD.split()) + "\n")
    done = isolate(
        env_cache, tmp_path, "--good", "{python} server.py", "--good-deps", str(good_python), "--bad-deps", "bad.txt"
    )
    assert done.returncode == 0, done.stderr
    assert "culprit: packaging 21.3 -> 22.0" in done.stdout
    assert sorted(p.name for p in good_python.parent.parent.rglob("*.dist-info")) == before


def test_the_environment_is_in_the_manifest_and_diff_names_the_upgrade(env_cache: Path, tmp_path: Path) -> None:
    (tmp_path / "server.py").write_text(LEGACY_SERVER)
    first = isolate(
        env_cache, tmp_path, "--good", "{python} server.py", "--good-deps", GOOD, "--bad-deps", BAD, "--json"
    )
    commands = json.loads(first.stdout)["commands"]
    runs = []
    for side in ("good", "bad"):
        python = commands[side].split()[0]
        spec = tmp_path / f"{side}.yaml"
        spec.write_text(
            f"name: up\nserver:\n  command: [{python}, server.py]\n  timeout: 60s\nmatrix:\n  a: {{env: A, values: ['1']}}\n"
        )
        argv = [
            sys.executable,
            "-m",
            "diagbench",
            "run",
            str(spec),
            "--runs-dir",
            str(tmp_path / "r"),
            "--run-id",
            side,
        ]
        subprocess.run(argv, capture_output=True, text=True, timeout=300, cwd=tmp_path)
        runs.append(tmp_path / "r" / side)
    manifest = json.loads((runs[0] / "manifest.json").read_text())
    versions = {d["name"]: d["version"] for d in manifest["environment"]["python"]["distributions"]}
    assert versions["packaging"] == "21.3" and versions["six"] == "1.15.0"
    argv = [sys.executable, "-m", "diagbench", "diff", *map(str, runs)]
    diff = subprocess.run(argv, capture_output=True, text=True, timeout=120)
    start = diff.stdout.index("underneath: ")
    underneath = " ".join(diff.stdout[start : diff.stdout.index("REGRESSION", start)].split())  # fitted to 80 columns
    assert "packaging 21.3 -> 22.0" in underneath and "six 1.15.0 -> 1.16.0" in underneath
    assert "REGRESSION cell a=1: ready -> failed:import_error" in diff.stdout
    assert diff.stdout.index("underneath:") < diff.stdout.index("REGRESSION")


def test_between_bisects_the_published_versions_and_skips_the_yanked(env_cache: Path, tmp_path: Path) -> None:
    """packaging 20.4 .. 23.0 on PyPI: 20.6 was yanked; LegacyVersion went in 22.0."""
    (tmp_path / "server.py").write_text(LEGACY_SERVER.replace("import attr, colorama, idna, six, toml\n", ""))
    done = isolate(env_cache, tmp_path, "--between", "packaging==20.4..23.0", "--good", "{python} server.py", "--json")
    assert done.returncode == 0, done.stderr
    data = json.loads(done.stdout)
    jsonschema.validate(data, load_schema("isolation"))
    assert (data["first_bad"], data["last_good"]) == ("22.0", "21.3")
    assert data["culprit"] == ["packaging"]
    probed = [s["applied"][0] for s in data["steps"] if s["baseline"] is None]
    assert "packaging==20.6" not in probed and len(probed) <= 4  # 9 versions between: a bisection, not a walk
    assert (
        "note: yanked, never probed: 20.6"
        in isolate(env_cache, tmp_path, "--between", "packaging==20.4..23.0", "--good", "{python} server.py").stdout
    )


def test_between_with_a_base_environment_and_mistakes(env_cache: Path, tmp_path: Path) -> None:
    (tmp_path / "server.py").write_text(LEGACY_SERVER)
    base = ["--good-deps", GOOD, "--good", "{python} server.py"]
    done = isolate(env_cache, tmp_path, "--between", "packaging==21.3..22.0", *base)
    assert done.returncode == 0, done.stderr
    assert "first bad: packaging 22.0 (last good: 21.3)" in done.stdout
    wrong = isolate(env_cache, tmp_path, "--between", "packaging==22.0..21.3", *base)
    assert wrong.returncode == 2
    assert (
        wrong.stderr.strip()
        == "diagbench: --between packaging==22.0..21.3: 22.0 is not before 21.3 (write the working version first)"
    )
    missing = isolate(env_cache, tmp_path, "--between", "packaging==21.3..99.0", *base)
    assert missing.returncode == 2 and "packaging 99.0 is not published on" in missing.stderr
    no_mark = isolate(env_cache, tmp_path, "--between", "packaging==21.3..22.0", "--good", "python server.py")
    assert no_mark.returncode == 2 and "--good: put {python} where the command runs Python" in no_mark.stderr


def test_packages_and_a_variable_in_one_isolation(env_cache: Path, tmp_path: Path) -> None:
    """Factors from env and from packages mixed: here the variable is guilty, not the upgrades."""
    (tmp_path / "server.py").write_text(
        "import os, sys, time\nimport six, idna, toml\n"
        "if os.environ.get('SERVER_STRICT') == '1':\n"
        "    print('torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB', file=sys.stderr, flush=True)\n"
        "    sys.exit(1)\n"
        f"print({READY!r}, flush=True)\ntime.sleep(600)\n"
    )
    good, bad = "six==1.15.0 idna==3.3 toml==0.10.1", "six==1.16.0 idna==3.4 toml==0.10.2"
    args = ["--good", "{python} server.py", "--bad", "SERVER_STRICT=1 {python} server.py"]
    done = isolate(env_cache, tmp_path, *args, "--good-deps", good, "--bad-deps", bad, "--json")
    assert done.returncode == 0, done.stderr
    data = json.loads(done.stdout)
    assert [(f["name"], f["kind"]) for f in data["factors"]] == [
        ("six", "package"),
        ("idna", "package"),
        ("toml", "package"),
        ("SERVER_STRICT", "env"),
    ]
    assert data["culprit"] == ["SERVER_STRICT"]
    assert data["target"] == {"outcome": "failed", "failure_class": "oom"}
