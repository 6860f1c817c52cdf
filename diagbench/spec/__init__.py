"""The spec: YAML read into a checked Spec (each mistake named by file:line and field), its matrix and attempts."""

__all__: list[str] = []
