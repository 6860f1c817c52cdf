"""Where attempts run: the spec's `executor:` section, and the command line's options over it.

executor: slurm                          # or a mapping:
executor:
  kind: slurm                            # local (the default) | slurm
  partition: gpu                         # sbatch --partition
  args: [--account=ml, --qos=high]       # more sbatch options, as written
  time: 30m                              # walltime; default: timeout + grace + a margin
  setup: [module load diagbench]         # shell lines the job runs before the worker
  python: python3                        # the worker's interpreter; default: this one's path
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields
from enum import Enum
from typing import TYPE_CHECKING, Any

from diagbench.errors import UserError

if TYPE_CHECKING:  # the kinds are read by every command line (--executor), which loads no YAML
    from diagbench.yamlsrc import Src


class ExecutorKind(str, Enum):
    """Where attempts run."""

    LOCAL = "local"  # process trees on this host
    SLURM = "slurm"  # one Slurm batch job per attempt

    def __str__(self) -> str:
        return self.value


_KEYS = ("kind", "partition", "args", "time", "setup", "python")
_SLURM_ONLY = _KEYS[1:]


@dataclass(frozen=True)
class ExecutorSpec:
    """Executor settings; None means "not given here" so that layers can be merged."""

    kind: ExecutorKind | None = None
    partition: str | None = None
    args: tuple[str, ...] = ()
    time: float | None = None  # walltime in seconds
    setup: tuple[str, ...] = ()
    python: str | None = None

    def over(self, base: ExecutorSpec) -> ExecutorSpec:
        """These settings where given, `base`'s elsewhere; `args` add to base's (sbatch takes
        the last of a repeated option, so the later layer still wins)."""
        return ExecutorSpec(
            kind=self.kind or base.kind,
            partition=self.partition or base.partition,
            args=(*base.args, *self.args),
            time=self.time or base.time,
            setup=self.setup or base.setup,
            python=self.python or base.python,
        )

    @property
    def resolved_kind(self) -> ExecutorKind:
        return self.kind or ExecutorKind.LOCAL

    def given_slurm_options(self) -> list[str]:
        """The Slurm-only settings that were given (wrong with kind local)."""
        return [f.name for f in fields(self) if f.name in _SLURM_ONLY and getattr(self, f.name)]

    def to_json(self) -> dict[str, Any]:
        return {
            "kind": str(self.resolved_kind),
            "partition": self.partition,
            "args": list(self.args),
            "time_s": self.time,
            "setup": list(self.setup),
            "python": self.python,
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> ExecutorSpec:
        """Settings recorded in a manifest (to resume a run where it ran)."""
        return cls(
            kind=ExecutorKind(data.get("kind", "local")),
            partition=data.get("partition"),
            args=tuple(data.get("args") or ()),
            time=data.get("time_s"),
            setup=tuple(data.get("setup") or ()),
            python=data.get("python"),
        )


def parse_executor(src: Src) -> ExecutorSpec:
    """`executor: slurm`, or a mapping of the keys above."""
    if not src.is_mapping():
        return ExecutorSpec(kind=_kind(src))
    keys = src.mapping(_KEYS)
    spec = ExecutorSpec(
        kind=_kind(keys["kind"]) if "kind" in keys else ExecutorKind.SLURM,
        partition=keys["partition"].string("a partition name") if "partition" in keys else None,
        args=_words(keys["args"], "an sbatch option") if "args" in keys else (),
        time=keys["time"].duration() if "time" in keys else None,
        setup=_words(keys["setup"], "a shell line") if "setup" in keys else (),
        python=keys["python"].string("an interpreter") if "python" in keys else None,
    )
    if spec.kind is ExecutorKind.LOCAL and spec.given_slurm_options():
        name = spec.given_slurm_options()[0]
        raise keys[name].error(f"'{name}' applies to kind: slurm only", "set kind: slurm, or remove it")
    return spec


def _kind(src: Src) -> ExecutorKind:
    from diagbench.yamlsrc import suggest

    word = src.string("an executor kind")
    try:
        return ExecutorKind(word)
    except ValueError:
        raise src.error(f"unknown executor '{word}'", suggest(word, [k.value for k in ExecutorKind])) from None


def _words(src: Src, what: str) -> tuple[str, ...]:
    return tuple(item.string(what) for item in src.items_or_one())


def command_line_settings(kind: str | None, values: Mapping[str, Any]) -> ExecutorSpec:
    """The command line's executor settings, by the keys the plugins' options set."""
    return command_line_executor(kind, values.get("partition"), values.get("args"), values.get("time"))


def command_line_executor(
    kind: str | None, partition: str | None, args: list[str] | None, time: str | None
) -> ExecutorSpec:
    """`--executor`, `--slurm-partition`, `--slurm-arg`, `--slurm-time` as settings."""
    from diagbench.yamlsrc import parse_duration

    seconds = None
    if time is not None:
        seconds = parse_duration(time)
        if seconds is None:
            raise UserError(f"--slurm-time: expected a positive duration like 90m or 2h, got {time!r}")
    return ExecutorSpec(
        kind=ExecutorKind(kind) if kind else None, partition=partition, args=tuple(args or ()), time=seconds
    )
