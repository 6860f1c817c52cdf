"""Limit: the largest (or smallest) value of an option or variable at which a command still comes up."""

__all__: list[str] = []
