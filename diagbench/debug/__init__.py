"""Debug: a failing launch launched once more with the debug settings its failure calls for."""

__all__: list[str] = []
