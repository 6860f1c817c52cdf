"""Attempts as Ray jobs: the controller's side (plugin, executor, queue, probe), the node's side
(worker, watchdog, and span: one attempt over several nodes), and the one module that talks to
Ray's job server (client). docs/executors.md and docs/how-to/ray.md say how it fits."""

__all__: list[str] = []
