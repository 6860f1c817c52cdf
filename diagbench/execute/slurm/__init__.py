"""Attempts as Slurm batch jobs: the controller's side (executor, follow, board, probe), the
node's side (worker), what a job asks for (jobs), and the one module that runs Slurm's
commands (commands). docs/executors.md says what any such executor must provide."""

__all__: list[str] = []
