"""The probe-environment cache is a door: diagbench runs the Pythons it finds there, so it must
be a folder of this user that nobody else can write; an environment in use is never removed
under a running isolation; a failure that may be the network's or the index's is never
remembered as "does not resolve"; the indexes are part of each environment's key.

Real processes throughout: a real package index (tests/fakeindex.py) serving real wheels,
real uv builds, a real second user where one is needed (root only)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from fakeindex import Release, build_index, serving

from diagbench.launch.envs import EnvCache, Indexes

OTHER = "dbdoorsother"
ROOT_ONLY = pytest.mark.skipif(
    os.geteuid() != 0 or shutil.which("useradd") is None, reason="needs root and useradd (a second user)"
)
READY = "The server is fired up and ready to roll!"
SERVER = f"""import sys, time
import doorspkg
if doorspkg.VERSION >= "40":
    print("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB", flush=True)
    sys.exit(1)
print({READY!r}, flush=True)
time.sleep(600)
"""
PACKAGE = "doorspkg"  # on no public index: found only where the test's index is used
INDEX_VARS = ("UV_DEFAULT_INDEX", "UV_INDEX", "UV_INDEX_URL", "UV_EXTRA_INDEX_URL", "PIP_INDEX_URL")


def isolate(tmp_path: Path, cache: Path, *args: str, index: str | None = None) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in INDEX_VARS}
    env |= {"DIAGBENCH_ENV_CACHE": str(cache), "COLUMNS": "200", **({"UV_INDEX_URL": index} if index else {})}
    argv = [sys.executable, "-m", "diagbench", "isolate", *args, "--runs-dir", str(tmp_path / "runs")]
    return subprocess.run(
        [*argv, "--timeout", "30s"], capture_output=True, text=True, timeout=600, cwd=tmp_path, env=env
    )


def other_user() -> str:
    if subprocess.run(["id", OTHER], capture_output=True).returncode != 0:
        subprocess.run(["useradd", "--no-create-home", "--shell", "/bin/sh", OTHER], check=True, capture_output=True)
    return OTHER


@ROOT_ONLY
def test_a_cache_linked_into_another_users_folder_is_refused_and_its_python_never_runs(tmp_path: Path) -> None:
    theirs, ran = tmp_path / "theirs", tmp_path / "ran"
    good, bad = (f"{PACKAGE}==1.0",), (f"{PACKAGE}==40.0",)
    keys = EnvCache(theirs, Path(sys.executable))
    for requirements in (good, bad):
        env = keys.path(requirements)
        (env / "bin").mkdir(parents=True)
        (env / "diagbench-complete").write_text("")
        python = env / "bin" / "python"
        python.write_text(f"#!/bin/sh\ntouch {ran}\necho '{READY}'\nexec sleep 600\n")
        python.chmod(0o755)
    for path in [theirs, *theirs.rglob("*")]:
        shutil.chown(path, other_user())
    (tmp_path / "link").symlink_to(theirs)
    (tmp_path / "server.py").write_text(SERVER)
    deps = ["--good-deps", " ".join(good), "--bad-deps", " ".join(bad)]
    done = isolate(tmp_path, tmp_path / "link", "--good", "{python} server.py", *deps)
    assert done.returncode == 2, done.stdout + done.stderr
    assert f"belongs to {OTHER}" in done.stderr and "DIAGBENCH_ENV_CACHE" in done.stderr
    assert not ran.exists()


def test_a_cache_that_is_a_file_is_one_message(tmp_path: Path) -> None:
    plain = tmp_path / "envs"
    plain.write_text("not a folder\n")
    (tmp_path / "server.py").write_text(SERVER)
    done = isolate(tmp_path, plain, "--good", "{python} server.py", "--good-deps", "a==1", "--bad-deps", "a==2")
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr
    assert f"probe-environment cache {plain} (DIAGBENCH_ENV_CACHE or ~/.cache): {plain} is not a folder" in done.stderr
    env = {**os.environ, "DIAGBENCH_ENV_CACHE": str(plain)}
    clean = subprocess.run(
        [sys.executable, "-m", "diagbench", "cleanup", "--envs", "--runs-dir", str(tmp_path / "runs")],
        capture_output=True,
        text=True,
        env=env,
    )
    assert clean.returncode == 2 and "Traceback" not in clean.stderr and "is not a folder" in clean.stderr


def test_cleanup_envs_leaves_an_environment_a_running_diagbench_uses(tmp_path: Path) -> None:
    cache = tmp_path / "envs"
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys, time; from pathlib import Path; from diagbench.launch.envs import EnvCache\n"
            f"built = EnvCache(Path({str(cache)!r}), Path(sys.executable)).build(['# nothing'])\n"
            "print(built.ok, flush=True); time.sleep(600)",
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    env = {**os.environ, "DIAGBENCH_ENV_CACHE": str(cache)}
    argv = [sys.executable, "-m", "diagbench", "cleanup", "--envs", "--runs-dir", str(tmp_path / "runs")]
    try:
        assert holder.stdout is not None and holder.stdout.readline() == "True\n"
        done = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=60)
        assert done.returncode == 0, done.stderr
        assert "removed 0 probe environment(s)" in done.stdout and "left 1 in use by a running diagbench" in done.stdout
        assert len([p for p in cache.iterdir() if p.is_dir()]) == 1
    finally:
        holder.kill()
        holder.wait()
        if holder.stdout is not None:
            holder.stdout.close()
    after = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=60)
    assert "removed 1 probe environment(s)" in after.stdout
    assert [p for p in cache.iterdir() if p.is_dir()] == []


def test_the_indexes_are_part_of_an_environments_key(tmp_path: Path) -> None:
    one = EnvCache(tmp_path, Path(sys.executable), Indexes("https://a.example/simple"))
    two = EnvCache(tmp_path, Path(sys.executable), Indexes("https://b.example/simple"))
    extra = EnvCache(tmp_path, Path(sys.executable), Indexes("https://a.example/simple", ("https://c.example/s",)))
    assert len({c.key(["x==1"]) for c in (one, two, extra, EnvCache(tmp_path, Path(sys.executable)))}) == 4


@pytest.fixture
def index(tmp_path: Path):
    folder = tmp_path / "index"
    build_index(folder, PACKAGE, [Release("1.0"), Release("40.0")])
    with serving(folder) as url:
        yield folder, url


def test_an_index_outage_is_never_remembered_as_does_not_resolve(tmp_path: Path, index) -> None:
    folder, url = index
    (tmp_path / "server.py").write_text(SERVER)
    args = ["--good", "{python} server.py", "--good-deps", f"{PACKAGE}==1.0", "--bad-deps", f"{PACKAGE}==40.0"]
    (folder / "outage").touch()
    down = isolate(tmp_path, tmp_path / "envs", *args, index=url)
    assert down.returncode == 2, down.stdout + down.stderr
    assert "not found in the package registry" in down.stdout + down.stderr
    (folder / "outage").unlink()
    back = isolate(tmp_path, tmp_path / "envs", *args, index=url)
    assert back.returncode == 0, back.stdout + back.stderr
    assert f"culprit: {PACKAGE} 1.0 -> 40.0" in back.stdout
    assert "known from the cache" not in back.stdout + back.stderr


def test_a_lock_files_index_url_is_honoured(tmp_path: Path, index) -> None:
    _folder, url = index
    (tmp_path / "server.py").write_text(SERVER)
    (tmp_path / "good.txt").write_text(f"# uv pip compile\n--index-url {url}\n{PACKAGE}==1.0\n")
    (tmp_path / "bad.txt").write_text(f"-i {url}\n{PACKAGE}==40.0 \\\n    --hash=sha256:0\n")
    done = isolate(
        tmp_path, tmp_path / "envs", "--good", "{python} server.py", "--good-deps", "good.txt", "--bad-deps", "bad.txt"
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"culprit: {PACKAGE} 1.0 -> 40.0" in done.stdout
    (tmp_path / "links.txt").write_text(f"--find-links {url}\n{PACKAGE}==1.0\n")
    refused = isolate(
        tmp_path, tmp_path / "envs", "--good", "{python} server.py", "--good-deps", "links.txt", "--bad-deps", "bad.txt"
    )
    assert refused.returncode == 2
    assert "links.txt:1: --find-links is not supported here" in refused.stderr
