"""A small, real inference server on PyTorch (+ Triton) whose CUDA graph capture can fail
for real: the reference target for diagbench's GPU experiments.

Install with `pip install 'diagbench[refserver]'`; run with `python -m diagbench.refserver`.
The diagbench core never imports this package (it needs torch).
"""

__all__: list[str] = []
