"""What `report` reads from a run directory: the run, and the isolation or triage it holds."""

__all__: list[str] = []
