"""A tiny decoder with random weights: embedding, N layers of attention over a static
KV cache and a gated MLP, and an LM head. Static buffers make a decode step capturable."""

from __future__ import annotations

import torch
from torch import nn

__all__ = ["Layer", "RMSNorm", "TinyDecoder"]


class RMSNorm(nn.Module):
    def __init__(self, dim: int, eps: float = 1e-6):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(dim))
        self.eps = eps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        scale = torch.rsqrt(x.float().pow(2).mean(-1, keepdim=True) + self.eps)
        return (x.float() * scale).to(x.dtype) * self.weight


class Layer(nn.Module):
    def __init__(self, hidden: int, heads: int, custom_kernel: bool):
        super().__init__()
        self.heads, self.head_dim = heads, hidden // heads
        self.norm1, self.norm2 = RMSNorm(hidden), RMSNorm(hidden)
        self.qkv = nn.Linear(hidden, 3 * hidden, bias=False)
        self.out = nn.Linear(hidden, hidden, bias=False)
        self.gate_up = nn.Linear(hidden, 8 * hidden, bias=False)
        self.down = nn.Linear(4 * hidden, hidden, bias=False)
        self.custom_kernel = custom_kernel

    def forward(self, x: torch.Tensor, pos: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor) -> torch.Tensor:
        bs = x.shape[0]
        q, k, v = self.qkv(self.norm1(x)).view(bs, 3, self.heads, self.head_dim).unbind(1)
        rows = torch.arange(bs, device=x.device)
        k_cache[rows, pos] = k
        v_cache[rows, pos] = v
        keys, values = k_cache[:bs], v_cache[:bs]  # [bs, ctx, heads, dim]
        scores = torch.einsum("bhd,bchd->bhc", q.float(), keys.float()) / self.head_dim**0.5
        ctx = torch.arange(keys.shape[1], device=x.device)
        scores = scores.masked_fill(ctx[None, None, :] > pos[:, None, None], float("-inf"))
        attended = torch.einsum("bhc,bchd->bhd", scores.softmax(-1), values.float()).to(x.dtype)
        x = x + self.out(attended.reshape(bs, -1))
        gate, up = self.gate_up(self.norm2(x)).chunk(2, dim=-1)
        if self.custom_kernel:
            act = torch.ops.refserver.silu_mul(gate.contiguous(), up.contiguous())
        else:
            act = torch.nn.functional.silu(gate) * up
        return x + self.down(act)


class TinyDecoder(nn.Module):
    k_cache: torch.Tensor
    v_cache: torch.Tensor

    def __init__(self, vocab: int, hidden: int, layers: int, heads: int, ctx: int, max_bs: int, custom_kernel: bool):
        super().__init__()
        self.embed = nn.Embedding(vocab, hidden)
        self.layers = nn.ModuleList(Layer(hidden, heads, custom_kernel) for _ in range(layers))
        self.norm = RMSNorm(hidden)
        self.lm_head = nn.Linear(hidden, vocab, bias=False)
        shape = (layers, max_bs, ctx, heads, hidden // heads)
        self.register_buffer("k_cache", torch.zeros(shape), persistent=False)
        self.register_buffer("v_cache", torch.zeros(shape), persistent=False)
        self.ctx = ctx

    def forward(self, tokens: torch.Tensor, pos: torch.Tensor) -> torch.Tensor:
        """One decode step: next-token logits for each sequence in the batch."""
        x = self.embed(tokens)
        for i, layer in enumerate(self.layers):
            x = layer(x, pos, self.k_cache[i], self.v_cache[i])
        return self.lm_head(self.norm(x)).float()
