"""A custom `@triton.autotune` kernel for the MLP's SiLU-and-multiply: the analogue of the
seed's MMA kernel. Its autotune key includes the row count, so every new batch size
benchmarks configurations again, which is exactly the work that must not happen inside
a CUDA graph capture."""

from __future__ import annotations

import torch

__all__ = ["available", "silu_mul", "triton"]

try:
    import triton
    import triton.language as tl
except ImportError:  # CPU hosts: the kernel is simply unavailable
    triton = None


def available() -> bool:
    return triton is not None and torch.cuda.is_available()


if triton is not None:

    @triton.autotune(
        configs=[triton.Config({"BLOCK": b}, num_warps=w) for b in (128, 256, 512, 1024) for w in (2, 4, 8)],
        key=["n_rows", "n_cols"],
    )
    @triton.jit
    def _silu_mul(g_ptr, u_ptr, out_ptr, n_rows, n_cols, stride_in, BLOCK: tl.constexpr):
        row = tl.program_id(0)
        cols = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
        mask = cols < n_cols
        g = tl.load(g_ptr + row * stride_in + cols, mask=mask, other=0.0).to(tl.float32)
        u = tl.load(u_ptr + row * stride_in + cols, mask=mask, other=0.0).to(tl.float32)
        out = g * tl.sigmoid(g) * u
        tl.store(out_ptr + row * n_cols + cols, out.to(out_ptr.dtype.element_ty), mask=mask)

    @torch.library.custom_op("refserver::silu_mul", mutates_args=())
    def silu_mul(gate: torch.Tensor, up: torch.Tensor) -> torch.Tensor:
        n_rows, n_cols = gate.shape
        out = torch.empty((n_rows, n_cols), device=gate.device, dtype=gate.dtype)

        def grid(meta: dict) -> tuple[int, int]:
            return (n_rows, triton.cdiv(n_cols, meta["BLOCK"]))

        _silu_mul[grid](gate, up, out, n_rows, n_cols, gate.stride(0))
        return out

    @silu_mul.register_fake
    def _(gate: torch.Tensor, up: torch.Tensor) -> torch.Tensor:
        return torch.empty(gate.shape, device=gate.device, dtype=gate.dtype)
