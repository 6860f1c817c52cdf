"""`diagbench plan`: every cell with its exact argv and env changes, without launching."""

from __future__ import annotations

import json
import shlex
from collections.abc import Sequence

from diagbench.execute.slots import SlotPlan
from diagbench.judge.decide import NOTHING_TO_DECIDE, decision_order
from diagbench.launch.command import build_command
from diagbench.logs.signatures import Kind, Signature
from diagbench.records.redact import spec_redactor
from diagbench.sensitive import REDACTED
from diagbench.spec.load import Spec
from diagbench.spec.matrix import Cell, parse_only, select_cells
from diagbench.spec.plan import plan_attempts


def render_plan(
    spec: Spec, only: Sequence[str], slots: SlotPlan | None = None, stop_when_decided: bool = False, repeat: int = 1
) -> str:
    cells = select_cells(spec.cells, parse_only(only, spec.axes))
    s = spec.server
    secrets = spec_redactor(spec)
    port_word = "a free port per cell" if s.port is None else str(s.port)
    ready = " and ".join(
        x for x in (s.ready_log and f"log /{s.ready_log}/", s.ready_http and f"GET {s.ready_http} -> 200") if x
    )
    ready = ready or "a ready line of the packs " + ", ".join(s.packs)
    if s.ready_request:
        ready += f", then {s.ready_request.label} -> {s.ready_request.status}"
    lines = [
        f"{spec.name}: {len(cells)} of {len(spec.cells)} cell(s); port: {port_word}; cwd: {s.cwd}",
        f"ready when: {secrets.text(ready)}; timeout {s.timeout:g}s, grace {s.grace:g}s",
        "compile caches: "
        + (
            "fresh for each attempt (" + ", ".join(s.fresh_caches) + ")"
            if s.fresh_caches
            else "shared between cells (server.fresh_caches: true isolates them)"
        ),
    ]
    lines += ready_warning(spec)
    if slots is not None:
        lines.append(f"slots: {slots.describe()}")
        if slots.gpus_in_use:
            lines.append("    each attempt gets its slot's GPUs as CUDA_VISIBLE_DEVICES (the first free slot)")
    lines.append("")
    for cell in cells:
        argv = secrets.argv(build_command(s, cell, s.port if s.port is not None else "{port}"))
        shown = argv[0] if s.shell else _joined(argv)
        lines.append(f"[{cell.index}] {cell.id}")
        lines.append(f"    argv: {shown}" + ("   (run by /bin/sh -c)" if s.shell else ""))
        changes = secrets.env({**s.env, **cell.env})
        if changes:
            words = [f"{k}={v}" if v is not None else f"unset {k}" for k, v in changes.items()]
            lines.append("    env:  " + "  ".join(words))
        decides = [h.id for h in spec.hypotheses if cell.matches(h.when)]
        if decides:
            lines.append("    decides: " + ", ".join(decides))
    undecided = [h.id for h in spec.hypotheses if not any(c.matches(h.when) for c in cells)]
    if undecided:
        lines += ["", "not decidable with this selection: " + ", ".join(undecided)]
    if stop_when_decided:
        lines += ["", *_launch_order(spec, cells, repeat)]
    return "\n".join(lines)


def ready_warning(spec: Spec) -> list[str]:
    """A spec with no ready rule of its own and no server.kind: a server the packs do not know
    (your own, a plain HTTP app) prints none of their ready lines and waits for its timeout."""
    s = spec.server
    if s.ready_log or s.ready_http or s.kind:
        return []
    return [
        "warning: no ready rule of the spec's own (server.ready) and no server.kind: only the ready lines "
        f"of the servers the packs know ({', '.join(_ready_servers(s.signatures))}) mark a launch ready; "
        f"a server of another kind runs until its timeout ({s.timeout:g}s). Add `ready: {{log: '<the line "
        "it prints when ready>'}}` or `ready: {http: /health}` (or set server.kind)"
    ]


def _ready_servers(signatures: Sequence[Signature]) -> list[str]:
    names = {sig.server or sig.id.split(".", 1)[0] for sig in signatures if sig.kind is Kind.READY and not sig.weak}
    return sorted(names) or ["none"]


def plan_json(spec: Spec, only: Sequence[str], slots: SlotPlan | None = None) -> str:
    """`plan --json`: the same plan as data, one object."""
    cells = select_cells(spec.cells, parse_only(only, spec.axes))
    s = spec.server
    secrets = spec_redactor(spec)  # as the text plan and the records show them
    data = {
        "spec": spec.name,
        "path": str(spec.path),
        "cells_selected": len(cells),
        "cells_total": len(spec.cells),
        "port": s.port if s.port is not None else "auto",
        "cwd": str(s.cwd),
        "ready": {"log": s.ready_log, "http": s.ready_http and secrets.text(s.ready_http), "packs": list(s.packs)},
        "timeout_s": s.timeout,
        "grace_s": s.grace,
        "fresh_caches": list(s.fresh_caches),
        "slots": slots.describe() if slots is not None else None,
        "cells": [
            {
                "index": cell.index,
                "cell_id": cell.id,
                "params": dict(cell.params),
                "argv": list(secrets.argv(build_command(s, cell, s.port if s.port is not None else "{port}"))),
                "shell": s.shell,
                "env": secrets.env({**s.env, **cell.env}),
                "decides": [h.id for h in spec.hypotheses if cell.matches(h.when)],
            }
            for cell in cells
        ],
        "not_decidable": [h.id for h in spec.hypotheses if not any(c.matches(h.when) for c in cells)],
    }
    return json.dumps(data, indent=2) + "\n"


def _joined(argv: Sequence[str]) -> str:
    """The argv as a shell would take it; `{port}` and `<redacted>` shown bare (marks, not words)."""
    return " ".join(t if REDACTED in t else shlex.quote(t) for t in argv).replace("'{port}'", "{port}")


def _launch_order(spec: Spec, cells: Sequence[Cell], repeat: int) -> list[str]:
    """The order --stop-when-decided launches in, and what it skips before launching anything."""
    order = decision_order(plan_attempts(cells, repeat), spec.hypotheses, spec.expectations)
    lines = ["launch order with --stop-when-decided (an attempt is skipped once it can change nothing):"]
    for n, item in enumerate(order, 1):
        decides = [h.id for h in spec.hypotheses if item.cell.matches(h.when)]
        decides += [f"expect #{e.index + 1}" for e in spec.expectations if item.cell.matches(e.when)]
        lines.append(f"  {n:>3}. {item.name}: " + (", ".join(decides) if decides else f"skipped ({NOTHING_TO_DECIDE})"))
    return lines
