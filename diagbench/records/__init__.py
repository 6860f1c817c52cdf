"""Records: what a run writes, read back with a version check; the one door secrets are blanked through."""

__all__: list[str] = []
