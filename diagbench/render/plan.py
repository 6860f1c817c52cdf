"""`diagbench plan`: a `Plan` (every cell with its exact argv and env changes, without
launching) as text or as JSON, both from the same value."""

from __future__ import annotations

import json
import shlex
from collections.abc import Sequence

from diagbench.jsonvalue import JSON, JSONObject
from diagbench.judge.decide import NOTHING_TO_DECIDE
from diagbench.render.environment import environment_lines
from diagbench.render.fit import fit_lines
from diagbench.render.formats import Rendering, Shown
from diagbench.render.text import visible
from diagbench.sensitive import REDACTED
from diagbench.spec.plan import Plan
from diagbench.spec.stackskeys import spin_words
from diagbench.vocab import TextOrJson, assert_never

__all__ = ["plan_as", "plan_json", "render_plan"]

_NO_STALL = "off (server.stall or --stall D ends a silent, idle attempt early)"


def plan_as(
    plan: Plan, format: TextOrJson, environment: JSONObject | None = None, width: int | None = None
) -> Rendering:
    """`plan`: every cell in words fitted to `width`, or one JSON object (`--json`)."""
    match format:
        case TextOrJson.TEXT:
            return Shown(lines=(fit_lines(visible(render_plan(plan, environment)), width),))
        case TextOrJson.JSON:
            return plan_json(plan, environment)
        case _:
            assert_never(format)


def render_plan(plan: Plan, environment: JSONObject | None = None) -> str:
    port_word = "a free port per cell" if plan.port is None else str(plan.port)
    lines = [
        f"{plan.spec_name}: {len(plan.cells)} of {plan.cells_total} cell(s); port: {port_word}; cwd: {plan.cwd}",
        f"ready when: {_ready(plan)}; timeout {plan.timeout_s:g}s, grace {plan.grace_s:g}s",
        "compile caches: "
        + (
            "fresh for each attempt (" + ", ".join(plan.fresh_caches) + ")"
            if plan.fresh_caches
            else "shared between cells (server.fresh_caches: true isolates them)"
        ),
        f"stall: {plan.stall_rule or _NO_STALL}",
        f"stacks: {_stacks_words(plan.stacks)}",
    ]
    if plan.spin_s:
        lines.append(f"spin: {spin_words(plan.spin_s)}")
    lines += [f"warning: {w}" for w in plan.warnings]
    if plan.slots is not None:
        lines.append(f"slots: {plan.slots}")
        if plan.gpus_in_use:
            lines.append("    each attempt gets its slot's GPUs as CUDA_VISIBLE_DEVICES (the first free slot)")
    lines.append("")
    for cell in plan.cells:
        shown = cell.argv[0] if cell.shell else _joined(cell.argv)
        lines.append(f"[{cell.index}] {cell.cell_id}")
        lines.append(f"    argv: {shown}" + ("   (run by /bin/sh -c)" if cell.shell else ""))
        if cell.env:
            words = [f"{k}={v}" if v is not None else f"unset {k}" for k, v in cell.env.items()]
            lines.append("    env:  " + "  ".join(words))
        if cell.decides:
            lines.append("    decides: " + ", ".join(cell.decides))
    if plan.not_decidable:
        lines += ["", "not decidable with this selection: " + ", ".join(plan.not_decidable)]
    if plan.launch_order is not None:
        lines += ["", "launch order with --stop-when-decided (an attempt is skipped once it can change nothing):"]
        for n, item in enumerate(plan.launch_order, 1):
            what = ", ".join(item.decides) if item.decides else f"skipped ({NOTHING_TO_DECIDE})"
            lines.append(f"  {n:>3}. {item.attempt}: {what}")
    if environment is not None:
        lines += ["", "the server's environment (as `run` records it):", *environment_lines(environment)]
    return "\n".join(lines)


def plan_json(plan: Plan, environment: JSONObject | None = None) -> str:
    """`plan --json`: the same plan as data, one object."""
    data: dict[str, JSON] = {
        "spec": plan.spec_name,
        "path": str(plan.path),
        "cells_selected": len(plan.cells),
        "cells_total": plan.cells_total,
        "port": plan.port if plan.port is not None else "auto",
        "cwd": str(plan.cwd),
        "ready": {
            "log": plan.ready_log,
            "http": plan.ready_http,
            "request": plan.ready_request,
            "packs": list(plan.packs),
        },
        "timeout_s": plan.timeout_s,
        "grace_s": plan.grace_s,
        "fresh_caches": list(plan.fresh_caches),
        "stall_s": plan.stall_s,
        "stall_rule": plan.stall_rule,
        "stacks": plan.stacks,
        **({"spin_s": plan.spin_s} if plan.spin_s else {}),
        "slots": plan.slots,
        "cells": [
            {
                "index": cell.index,
                "cell_id": cell.cell_id,
                "params": dict(cell.params),
                "argv": list(cell.argv),
                "shell": cell.shell,
                "env": dict(cell.env),
                "decides": list(cell.decides),
            }
            for cell in plan.cells
        ],
        "not_decidable": list(plan.not_decidable),
        "warnings": list(plan.warnings),
        "launch_order": None
        if plan.launch_order is None
        else [{"attempt": a.attempt, "decides": list(a.decides)} for a in plan.launch_order],
        **({"environment": environment} if environment is not None else {}),
    }
    return json.dumps(data, indent=2) + "\n"


def _ready(plan: Plan) -> str:
    ready = " and ".join(
        x
        for x in (plan.ready_log and f"log /{plan.ready_log}/", plan.ready_http and f"GET {plan.ready_http} -> 200")
        if x
    )
    ready = ready or "a ready line of the packs " + ", ".join(plan.packs)
    return ready + (f", then {plan.ready_request}" if plan.ready_request else "")


def _stacks_words(stacks: str) -> str:
    words = {
        "on-timeout": "every process of the tree, before teardown, on a timeout or stall",
        "always": "every process of the tree, before teardown, on a timeout, stall or undecided failure",
        "never": "not taken",
        "faulthandler": "every process of the tree, before teardown, on a timeout or stall; "
        "Python servers also dump their own on SIGUSR2 (faulthandler)",
        "flight-recorder": "every process of the tree, before teardown, on a timeout or stall; "
        "PyTorch's flight recorder armed and each rank's last collectives read (flight-recorder)",
    }
    return words.get(stacks, stacks)


def _joined(argv: Sequence[str]) -> str:
    """The argv as a shell would take it; `{port}` and `<redacted>` shown bare (marks, not words)."""
    return " ".join(t if REDACTED in t else shlex.quote(t) for t in argv).replace("'{port}'", "{port}")
