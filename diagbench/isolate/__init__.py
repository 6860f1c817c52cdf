"""Isolation: delta debugging from a launch that comes up to one that fails, over factors, axes or package versions."""

__all__: list[str] = []
