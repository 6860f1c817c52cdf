"""`python -m diagbench`: the command line."""

from diagbench.cli import main

__all__: list[str] = []

main()
