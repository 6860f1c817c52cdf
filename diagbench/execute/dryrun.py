"""`diagbench plan`: the plan of a run computed once, as a `spec.plan.Plan` value (render/plan.py
shows it as text or JSON)."""

from __future__ import annotations

from collections.abc import Sequence

from diagbench.execute.lint import command_warnings
from diagbench.execute.slots import SlotPlan
from diagbench.judge.decide import decision_order
from diagbench.launch.command import build_command
from diagbench.launch.stall import rule_words
from diagbench.logs.signatures import Kind, Signature
from diagbench.records.redact import spec_redactor
from diagbench.spec.load import Spec
from diagbench.spec.matrix import Cell, parse_only, select_cells
from diagbench.spec.plan import CellPlan, OrderedAttempt, Plan, plan_attempts

__all__ = ["plan_of", "ready_warning"]


def plan_of(
    spec: Spec, only: Sequence[str], slots: SlotPlan | None = None, stop_when_decided: bool = False, repeat: int = 1
) -> Plan:
    """The run `run SPEC` would make of these options, secrets blanked as its records show them."""
    cells = select_cells(spec.cells, parse_only(only, spec.axes))
    s = spec.server
    secrets = spec_redactor(spec)
    request = s.ready_request
    return Plan(
        spec_name=spec.name,
        path=spec.path,
        cells_total=len(spec.cells),
        port=s.port,
        cwd=s.cwd,
        ready_log=s.ready_log and secrets.text(s.ready_log),
        ready_http=s.ready_http and secrets.text(s.ready_http),
        ready_request=secrets.text(f"{request.label} -> {request.status}") if request else None,
        packs=tuple(s.packs),
        timeout_s=s.timeout,
        grace_s=s.grace,
        fresh_caches=tuple(s.fresh_caches),
        stall_s=s.stall,
        stall_rule=rule_words(s.stall) if s.stall else None,
        spin_s=s.spin,
        stacks=s.stacks_word,
        cells=tuple(
            CellPlan(
                index=cell.index,
                cell_id=cell.id,
                params=dict(cell.params),
                argv=tuple(secrets.argv(build_command(s, cell, s.port if s.port is not None else "{port}"))),
                shell=s.shell,
                env=secrets.env({**s.env, **cell.env}),
                decides=tuple(h.id for h in spec.hypotheses if cell.matches(h.when)),
            )
            for cell in cells
        ),
        not_decidable=tuple(h.id for h in spec.hypotheses if not any(c.matches(h.when) for c in cells)),
        slots=slots.describe() if slots is not None else None,
        gpus_in_use=slots is not None and slots.gpus_in_use,
        launch_order=_launch_order(spec, cells, repeat) if stop_when_decided else None,
        warnings=(*ready_warning(spec), *command_warnings(spec)),
    )


def ready_warning(spec: Spec) -> list[str]:
    """A spec with no ready rule of its own and no server.kind: a server the packs do not know
    (your own, a plain HTTP app) prints none of their ready lines and waits for its timeout."""
    s = spec.server
    if s.ready_log or s.ready_http or s.kind:
        return []
    return [
        "no ready rule of the spec's own (server.ready) and no server.kind: only the ready lines "
        f"of the servers the packs know ({', '.join(_ready_servers(s.signatures))}) mark a launch ready; "
        f"a server of another kind runs until its timeout ({s.timeout:g}s). Add `ready: {{log: '<the line "
        "it prints when ready>'}` or `ready: {http: /health}` (or set server.kind)"
    ]


def _ready_servers(signatures: Sequence[Signature]) -> list[str]:
    names = {sig.server or sig.id.split(".", 1)[0] for sig in signatures if sig.kind is Kind.READY and not sig.weak}
    return sorted(names) or ["none"]


def _launch_order(spec: Spec, cells: Sequence[Cell], repeat: int) -> tuple[OrderedAttempt, ...]:
    """The order --stop-when-decided launches in, and what each decides (nothing: it is skipped)."""
    order = decision_order(plan_attempts(cells, repeat), spec.hypotheses, spec.expectations)
    return tuple(
        OrderedAttempt(
            item.name,
            (
                *(h.id for h in spec.hypotheses if item.cell.matches(h.when)),
                *(f"expect #{e.index + 1}" for e in spec.expectations if item.cell.matches(e.when)),
            ),
        )
        for item in order
    )
