"""Ray's keys under the spec's `executor:` (each command-line option sets one of them)."""

from __future__ import annotations

from diagbench.spec.executor import ExecutorKey, KeyType

__all__ = ["ADDRESS", "ADDRESS_VAR", "ENV", "KIND", "PYTHON"]

KIND = "ray"
ADDRESS_VAR = "RAY_ADDRESS"  # Ray's own: `ray job submit` reads it too
ADDRESS = ExecutorKey("address", KeyType.STRING, "the Ray dashboard's address (http://head:8265)")
# names of this environment's variables the job gets (their values are never recorded)
ENV = ExecutorKey("env", KeyType.WORDS, "a variable's name", adds=True)
PYTHON = ExecutorKey("python", KeyType.STRING, "the nodes' interpreter with diagbench")
