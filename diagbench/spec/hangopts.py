"""`--stall D` and `--stacks WHEN` of `run` and `isolate`: the spec's server, overridden."""

from __future__ import annotations

import dataclasses

from diagbench.errors import UserError
from diagbench.spec.load import STACKS_WHEN, Spec
from diagbench.yamlsrc import parse_duration

__all__ = ["with_hang_options"]


def with_hang_options(spec: Spec, stall: str | None, stacks: str | None) -> Spec:
    """The spec with the command line's stall window and stacks rule (each only when given)."""
    changes: dict[str, object] = {}
    if stall is not None:
        seconds = parse_duration(stall)
        if seconds is None or seconds <= 0:
            raise UserError(f"--stall {stall}: expected a duration like 45s, 2m or 1h (fix: --stall 60s)")
        changes["stall"] = seconds
    if stacks is not None:
        if stacks not in STACKS_WHEN:
            raise UserError(f"--stacks {stacks}: expected one of {', '.join(STACKS_WHEN)} (fix: --stacks on-timeout)")
        changes["stacks"] = stacks
    if not changes:
        return spec
    return dataclasses.replace(spec, server=dataclasses.replace(spec.server, **changes))  # type: ignore[arg-type]  # the fields named above
