"""The room that may spawn and signal: processes, ports, GPU leases, probes, one attempt to its record."""

__all__: list[str] = []
