"""Executing a run: select, plan, open the run and pre-register, schedule the attempts on an executor, judge."""

__all__: list[str] = []
