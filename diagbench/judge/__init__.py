"""Judging from records alone: hypotheses, expectations, what can still change a verdict, diffs of runs."""

__all__: list[str] = []
