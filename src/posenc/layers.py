"""The layers of posenc.TransformerLM: Context, Attention, MLP, Block. Each attention gets its
encoding (None: absolute encodings act at the input) and the Context all layers share."""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from posenc.attention import attention
from posenc.attention.window import window_mask
from posenc.kv_cache import KVCache


@dataclass
class Context:
    """What every layer's attention needs besides x and its encoding: q_pos, k_pos [T] / [B, T]
    (+ [..., P]) or None (attention's defaults); mask bool [B or 1, 1, Tq, Tk] or None."""

    q_pos: torch.Tensor | None
    k_pos: torch.Tensor | None
    mask: torch.Tensor | None
    causal: bool
    backend: str
    cache: KVCache | None = None


class Attention(nn.Module):
    """Multi-head (grouped-query when kv_heads < heads) self-attention through posenc.attention;
    `window`: a sliding window (posenc.attention.window), None for full attention."""

    def __init__(self, dim: int, heads: int, kv_heads: int, window: int | None = None) -> None:
        super().__init__()
        self.heads, self.kv_heads, self.head_dim = heads, kv_heads, dim // heads
        self.window = window
        self.qkv_proj = nn.Linear(dim, (heads + 2 * kv_heads) * self.head_dim, bias=False)
        self.out_proj = nn.Linear(heads * self.head_dim, dim, bias=False)

    def forward(self, x: torch.Tensor, encoding, ctx: Context, layer: int) -> torch.Tensor:
        """x [B, T, D] -> [B, T, D]."""
        B, T, _ = x.shape
        H, Hkv, Dh = self.heads, self.kv_heads, self.head_dim
        qkv = self.qkv_proj(x).view(B, T, H + 2 * Hkv, Dh).transpose(1, 2)  # [B, H+2Hkv, T, Dh]
        q, k, v = qkv.split([H, Hkv, Hkv], dim=1)  # k, v [B, Hkv, T, Dh], not yet encoded
        if ctx.cache is not None:
            k, v = ctx.cache.update(layer, k, v)  # all cached tokens, still unencoded
        mask = ctx.mask
        if self.window is not None:  # [B or 1, 1, T, Tk], ANDed with the document mask
            P = encoding.position_dims if encoding is not None else 1
            w = window_mask(ctx.q_pos, ctx.k_pos, self.window, T, k.shape[2], causal=ctx.causal,
                            position_dims=P, device=x.device)  # fmt: skip
            mask = w if mask is None else mask & w
        y = attention(
            q, k, v, encoding, ctx.q_pos, ctx.k_pos,
            causal=ctx.causal, backend=ctx.backend, mask=mask,
        )  # fmt: skip
        return self.out_proj(y.transpose(1, 2).reshape(B, T, -1))


class MLP(nn.Module):
    def __init__(self, dim: int, hidden: int) -> None:
        super().__init__()
        self.fc1, self.fc2 = nn.Linear(dim, hidden), nn.Linear(hidden, dim)

    def forward(self, x):
        return self.fc2(F.gelu(self.fc1(x)))


class Block(nn.Module):
    """Pre-norm: x + attn(norm(x)), then x + mlp(norm(x))."""

    def __init__(self, dim, heads, kv_heads, mlp_ratio, dropout, window=None) -> None:
        super().__init__()
        self.norm1, self.norm2 = nn.LayerNorm(dim), nn.LayerNorm(dim)
        self.attn = Attention(dim, heads, kv_heads, window)
        self.mlp = MLP(dim, int(mlp_ratio * dim))
        self.drop = nn.Dropout(dropout)

    def forward(self, x: torch.Tensor, encoding, ctx: Context, layer: int) -> torch.Tensor:
        h = self.attn(self.norm1(x), encoding, ctx, layer)
        x = x + self.drop(h)
        return x + self.drop(self.mlp(self.norm2(x)))
