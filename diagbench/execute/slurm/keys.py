"""Slurm's keys under the spec's `executor:` (each command-line option sets one of them)."""

from __future__ import annotations

from diagbench.spec.executor import ExecutorKey, KeyType

__all__ = ["ARGS", "KIND", "PARTITION", "PYTHON", "SETUP", "TIME"]

KIND = "slurm"
PARTITION = ExecutorKey("partition", KeyType.STRING, "a partition name")
ARGS = ExecutorKey("args", KeyType.WORDS, "an sbatch option", adds=True)  # sbatch takes the last of a repeat
TIME = ExecutorKey("time", KeyType.DURATION, "a walltime")
SETUP = ExecutorKey("setup", KeyType.WORDS, "a shell line")
PYTHON = ExecutorKey("python", KeyType.STRING, "an interpreter")
