"""Running an attempt somewhere else, whatever the scheduler: the files through which the
controller and the worker talk, the worker that runs the attempt with a local run's code,
and following a job to its record. A scheduler's plugin adds its queue."""

__all__: list[str] = []
