"""Reading a server's log: signature packs, the scanner, the watch that decides, the offline classifier."""

__all__: list[str] = []
