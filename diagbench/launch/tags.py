"""Whose a process is: the tag every server's tree inherits, and the diagbench that owns it.

A server and all its descendants carry three variables:

    DIAGBENCH_ATTEMPT=<nonce>/<attempt>   teardown's marker; the nonce is new for every
                                          invocation, so two runs never share a tag, even
                                          with the same run id
    DIAGBENCH_OWNER=<pid>@<start time>    the diagbench process that launched it
    DIAGBENCH_RUN=<run directory>         where its record belongs

so a later diagbench can tell a live run's servers (never touched) from the leftovers of
one that died (stopped and recorded in that run's directory).
"""

from __future__ import annotations

import functools
import os
import secrets
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import psutil

TAG_VAR = "DIAGBENCH_ATTEMPT"
OWNER_VAR = "DIAGBENCH_OWNER"
RUN_VAR = "DIAGBENCH_RUN"
CACHES_PREFIX = "diagbench-caches-"  # + <owner>-<random>: an attempt's fresh compile caches


@dataclass(frozen=True)
class Owner:
    """A diagbench process, by pid and start time (a pid alone may be reused)."""

    pid: int
    started: str  # the process's start time, as the OS reports it, in seconds since the epoch

    @classmethod
    def parse(cls, text: str) -> Owner | None:
        pid, sep, started = text.partition("@")
        if not sep or not pid.isdigit() or not started:
            return None
        return cls(int(pid), started)

    def __str__(self) -> str:
        return f"{self.pid}@{self.started}"

    def alive(self) -> bool:
        """Whether this very process still runs (a new process with its pid is not it)."""
        started = _start_time(self.pid)
        return started is not None and started == self.started


def me() -> Owner:
    """This diagbench process."""
    return _owner(os.getpid())  # by pid: a forked child is another owner


@functools.cache
def _owner(pid: int) -> Owner:
    return Owner(pid, _start_time(pid) or "0")


def _start_time(pid: int) -> str | None:
    try:
        proc = psutil.Process(pid)
        if proc.status() == psutil.STATUS_ZOMBIE:
            return None
        return f"{proc.create_time():.2f}"  # the kernel counts in clock ticks (1/100 s)
    except psutil.Error:
        return None


@dataclass(frozen=True)
class Tag:
    """The tag of one attempt of one invocation."""

    nonce: str  # new for every invocation
    attempt: str
    owner: Owner
    run_dir: Path

    @property
    def value(self) -> str:
        return f"{self.nonce}/{self.attempt}"

    def env(self) -> dict[str, str]:
        return {TAG_VAR: self.value, OWNER_VAR: str(self.owner), RUN_VAR: str(self.run_dir)}

    @classmethod
    def from_env(cls, env: Mapping[str, str]) -> Tag | None:
        """The tag a process carries, or None if it carries none (or an older diagbench's)."""
        nonce, sep, attempt = env.get(TAG_VAR, "").partition("/")
        owner = Owner.parse(env.get(OWNER_VAR, ""))
        run = env.get(RUN_VAR, "")
        if not sep or owner is None or not run:
            return None
        return cls(nonce, attempt, owner, Path(run))


def new_nonce() -> str:
    """A random word no other invocation has: 64 bits."""
    return secrets.token_hex(8)


def caches_prefix(owner: Owner) -> str:
    """The name prefix of an attempt's temporary folder: its owner can be read back from it."""
    return f"{CACHES_PREFIX}{owner}-"


def caches_owner(name: str) -> Owner | None:
    """The owner of a temporary folder named by `caches_prefix`, or None (not one of ours)."""
    if not name.startswith(CACHES_PREFIX):
        return None
    owner, sep, _random = name[len(CACHES_PREFIX) :].rpartition("-")
    return Owner.parse(owner) if sep else None
