"""Everything a person reads: one function per view, each taking a format word, from records alone."""

__all__: list[str] = []
