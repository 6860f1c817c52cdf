"""Whose a process is: the tag every server's tree inherits, and the diagbench that owns it.

A server and all its descendants carry three variables:

    DIAGBENCH_ATTEMPT=<nonce>/<attempt>   teardown's marker; the nonce is new for every
                                          invocation, so two runs never share a tag, even
                                          with the same run id
    DIAGBENCH_OWNER=<pid>@<start>@<pidns>  the diagbench process that launched it
    DIAGBENCH_RUN=<run directory>         where its record belongs

so a later diagbench can tell a live run's servers (never touched) from the leftovers of
one that died (stopped and recorded in that run's directory).

A diagbench started with DIAGBENCH_SCOPE=<word> also passes that on, names its temporary
folders with it, and cleans up after dead diagbenches of that scope only: a test session
(or a pytest-xdist worker) sets its own, so no other diagbench takes its leftovers while it
is still checking them. Unset is a scope too, everyone's default: a user's diagbench never
touches what a scoped one left (`DIAGBENCH_SCOPE=<word> diagbench cleanup` does).
"""

from __future__ import annotations

import functools
import hashlib
import os
import re
import secrets
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import psutil

__all__ = [
    "CACHES_PREFIX",
    "OWNER_VAR",
    "RUN_VAR",
    "SCOPE_VAR",
    "TAG_VAR",
    "Owner",
    "Tag",
    "caches_owner",
    "caches_prefix",
    "current_scope",
    "in_scope",
    "me",
    "new_nonce",
    "running",
    "scope_mark",
]

TAG_VAR = "DIAGBENCH_ATTEMPT"
OWNER_VAR = "DIAGBENCH_OWNER"
RUN_VAR = "DIAGBENCH_RUN"
SCOPE_VAR = "DIAGBENCH_SCOPE"
CACHES_PREFIX = "diagbench-caches-"  # + <owner>-<random>: an attempt's fresh compile caches


@dataclass(frozen=True)
class Owner:
    """A diagbench process: its pid, its start time (a pid alone may be reused) and its
    pid namespace (a pid means nothing in another container)."""

    pid: int
    started: str  # clock ticks since boot (Linux), exact and immune to clock changes
    namespace: str = ""  # the pid namespace's inode, or "" where there is none

    @classmethod
    def parse(cls, text: str) -> Owner | None:
        parts = text.split("@")
        if len(parts) != 3 or not parts[0].isdigit() or not parts[1]:
            return None
        return cls(int(parts[0]), parts[1], parts[2])

    def __str__(self) -> str:
        return f"{self.pid}@{self.started}@{self.namespace}"

    def gone(self) -> bool:
        """Whether this process has certainly ended. A process in another pid namespace,
        or one whose start cannot be read, is never called gone: it is left alone."""
        if self.namespace != _namespace():
            return False
        started = _start_time(self.pid)
        return started is None or started != self.started


def running(pid: int) -> bool:
    """Whether some process (whichever) has this pid now."""
    return _start_time(pid) is not None


def me() -> Owner:
    """This diagbench process."""
    return _owner(os.getpid())  # by pid: a forked child is another owner


@functools.cache
def _owner(pid: int) -> Owner:
    return Owner(pid, _start_time(pid) or "0", _namespace())


@functools.cache
def _namespace() -> str:
    try:
        return os.readlink("/proc/self/ns/pid").strip("pid:[]")
    except OSError:
        return ""


def _start_time(pid: int) -> str | None:
    """When `pid` started, or None if no such process runs (a zombie runs nothing)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as handle:
            fields = handle.read().rpartition(b")")[2].split()
        return None if fields[0] == b"Z" else fields[19].decode()  # state, ..., starttime (stat field 22)
    except FileNotFoundError:
        return None
    except (OSError, IndexError):
        pass
    try:  # no /proc: the start time psutil reports
        proc = psutil.Process(pid)
        return None if proc.status() == psutil.STATUS_ZOMBIE else f"{proc.create_time():.2f}"
    except psutil.Error:
        return None


@dataclass(frozen=True)
class Tag:
    """The tag of one attempt of one invocation."""

    nonce: str  # new for every invocation
    attempt: str
    owner: Owner
    run_dir: Path
    scope: str = ""  # the owner's DIAGBENCH_SCOPE ("" where it had none)

    @property
    def value(self) -> str:
        return f"{self.nonce}/{self.attempt}"

    def env(self) -> dict[str, str]:
        env = {TAG_VAR: self.value, OWNER_VAR: str(self.owner), RUN_VAR: str(self.run_dir)}
        return env | ({SCOPE_VAR: self.scope} if self.scope else {})

    @classmethod
    def from_env(cls, env: Mapping[str, str]) -> Tag | None:
        """The tag a process carries, or None if it carries none (or an older diagbench's)."""
        nonce, sep, attempt = env.get(TAG_VAR, "").partition("/")
        owner = Owner.parse(env.get(OWNER_VAR, ""))
        run = env.get(RUN_VAR, "")
        if not sep or owner is None or not run:
            return None
        return cls(nonce, attempt, owner, Path(run), _word(env.get(SCOPE_VAR, "")))


def new_nonce() -> str:
    """A random word no other invocation has: 64 bits."""
    return secrets.token_hex(8)


def current_scope() -> str:
    """This diagbench's DIAGBENCH_SCOPE, as a word a folder name can carry ("" where unset)."""
    return _word(os.environ.get(SCOPE_VAR, ""))


def in_scope(scope: str) -> bool:
    """Whether leftovers of `scope` are this diagbench's to clean up: those of its own scope."""
    return scope == current_scope()


def _word(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]", "_", text)


def scope_mark(scope: str) -> str:
    """A scope as a temporary folder's name carries it: six hex digits of its hash ("" for none).
    Short on purpose: servers put sockets under TMPDIR (vLLM's ZMQ `ipc://$TMPDIR/<uuid4>`), and
    a socket path longer than 107 bytes cannot be bound; a whole scope word pushed it past that."""
    return hashlib.sha256(scope.encode()).hexdigest()[:6] if scope else ""


def caches_prefix(owner: Owner, scope: str = "") -> str:
    """The name prefix of an attempt's temporary folder: its owner (and its scope's mark) can be
    read back from it: diagbench-caches-[<mark>+]<owner>-."""
    mark = scope_mark(scope)
    return f"{CACHES_PREFIX}{mark + '+' if mark else ''}{owner}-"


def caches_owner(name: str) -> tuple[Owner, str] | None:
    """The owner and scope mark (`scope_mark`) of a temporary folder named by `caches_prefix`,
    or None (not one of ours)."""
    if not name.startswith(CACHES_PREFIX):
        return None
    head, sep, _random = name[len(CACHES_PREFIX) :].rpartition("-")
    scope, _plus, owner = head.rpartition("+")
    parsed = Owner.parse(owner) if sep else None
    return None if parsed is None else (parsed, scope)
