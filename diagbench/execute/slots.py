"""Slots: how many attempts may run at once, and what each holds while it runs."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Slot:
    """One place an attempt can run: its index and the GPUs it owns while it runs."""

    index: int
    gpus: tuple[str, ...] = ()


def plain_slots(count: int) -> list[Slot]:
    """`count` slots that hold no GPU (a host without GPUs, or servers that need none)."""
    return [Slot(i) for i in range(max(1, count))]
