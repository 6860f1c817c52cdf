"""Reading DEPS (offline): requirement files, word lists, interpreters; the probe-environment cache."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from packaging.version import Version

from diagbench.errors import UserError
from diagbench.isolate.deps import read_deps
from diagbench.isolate.index import Range, parse_between, versions_between
from diagbench.isolate.packages import package_factors
from diagbench.launch.envs import EnvCache


def test_a_lock_file_with_hashes_comments_and_options(tmp_path: Path) -> None:
    (tmp_path / "req.txt").write_text(
        "# uv pip compile\n--index-url https://pypi.org/simple\n"
        "Typing_Extensions==4.8.0 \\\n    --hash=sha256:abc\n"
        "six==1.16.0  # via x\nrich>=13\n\n"
    )
    deps = read_deps("--bad-deps", "req.txt", tmp_path)
    assert {k: (p.line, p.version) for k, p in deps.pins.items()} == {
        "typing-extensions": ("Typing_Extensions==4.8.0", "4.8.0"),
        "six": ("six==1.16.0", "1.16.0"),
        "rich": ("rich>=13", ">=13"),
    }
    (tmp_path / "bad.txt").write_text("six==1\n-e\n")
    with pytest.raises(UserError, match=r"bad.txt:2: expected a requirement such as 'pkg==1.2.3', got '-e'"):
        read_deps("--bad-deps", "bad.txt", tmp_path)


def test_words_interpreters_and_what_differs(tmp_path: Path) -> None:
    good = read_deps("--good-deps", "six==1.15.0 idna==3.3 toml==0.10.1", tmp_path)
    bad = read_deps("--bad-deps", "six==1.16.0 idna==3.3 attrs==22.1.0", tmp_path)
    shown = [(f.name, f.good, f.bad) for f in package_factors(good, bad)]
    assert shown == [("six", "1.15.0", "1.16.0"), ("toml", "0.10.1", None), ("attrs", None, "22.1.0")]
    mine = read_deps("--good-deps", sys.executable, tmp_path)
    assert mine.python == Path(sys.executable) and mine.pins["pytest"].line == f"pytest=={pytest.__version__}"
    assert mine.pins["diagbench"].line.startswith("-e file://")  # installed editable: rebuilt from its folder
    with pytest.raises(UserError, match="--good-deps nope/python: no such file"):
        read_deps("--good-deps", "nope/python", tmp_path)


def test_a_range_reads_as_versions_and_yanked_or_pre_releases_are_left_out() -> None:
    assert parse_between("packaging==21.0..22.0") == Range("packaging", Version("21.0"), Version("22.0"))
    for wrong in ("packaging==21.0", "==1..2", "x==a..b"):
        with pytest.raises(UserError, match="--between"):
            parse_between(wrong)
    published = {
        Version(v): y for v, y in [("1.0", False), ("1.1", True), ("1.2rc1", False), ("1.2", False), ("2.0", False)]
    }
    assert versions_between(Range("p", Version("1.0"), Version("1.2")), published) == (
        [Version("1.0"), Version("1.2")],
        [Version("1.1")],
    )


def test_an_interrupted_build_is_built_again_and_a_known_unresolvable_set_is_remembered(tmp_path: Path) -> None:
    """No network: an empty requirement set builds a bare venv (uv venv only)."""
    cache = EnvCache(tmp_path, Path(sys.executable))
    half = cache.path(["# nothing"])
    (half / "bin").mkdir(parents=True)  # a build killed before its marker
    built = cache.build(["# nothing"])
    assert built.ok and not built.cached and cache.builds == 1 and built.python.exists()
    again = cache.build(["# nothing"])
    assert again.ok and again.cached and cache.builds == 1
    assert cache.path(["a==1", "b==2"]) == cache.path(["b==2", "a==1"])  # the set, not its order
    assert cache.remove_all() == ([], [half])  # leased by this object while it may still launch it
    cache.release()
    assert cache.remove_all() == ([half], [])
    assert cache.entries() == []


def test_isolate_with_deps_names_each_mistake_and_a_dry_run_builds_nothing(tmp_path: Path) -> None:
    import os
    import subprocess

    env = {**os.environ, "DIAGBENCH_ENV_CACHE": str(tmp_path / "envs"), "COLUMNS": "200"}

    def isolate(*args: str) -> subprocess.CompletedProcess[str]:
        argv = [sys.executable, "-m", "diagbench", "isolate", *args]
        return subprocess.run(argv, capture_output=True, text=True, timeout=60, cwd=tmp_path, env=env)

    mistakes = {
        ("--good", "python s.py", "--good-deps", "six==1.15.0", "--bad-deps", "six==1.16.0"): (
            "diagbench: --good: put {python} where the command runs Python ('{python} -m server --port {port}'), "
            "so each probe runs in its own environment"
        ),
        ("--good", "{python} s.py"): (
            "diagbench: --bad: the launch that fails is needed (only with --bad-deps may it be left out)"
        ),
        ("--good", "{python} s.py", "--good-deps", "six==1.15.0"): (
            "diagbench: --bad-deps: needed with the other (or use --between PKG==A..B to walk one package)"
        ),
        ("--good", "{python} s.py", "--good-deps", "six==1.15.0", "--bad-deps", "no/req.txt"): (
            "diagbench: --bad-deps no/req.txt: no such file (give an interpreter, a requirements file, or 'pkg==ver')"
        ),
    }
    for args, message in mistakes.items():
        done = isolate(*args)
        assert (done.returncode, done.stderr.strip()) == (2, message)
    dry = isolate(
        "--good",
        "{python} s.py",
        "--good-deps",
        "six==1.15.0 idna==3.3",
        "--bad-deps",
        "six==1.16.0 idna==3.3",
        "--dry-run",
    )
    assert dry.returncode == 0, dry.stderr
    assert "│ six    │ package │ 1.15.0 │ 1.16.0 │" in dry.stdout
    assert "note: 1 package(s) differ; 1 are the same in both environments" in dry.stdout
    assert not (tmp_path / "envs").exists()
