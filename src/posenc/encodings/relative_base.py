"""Helpers shared by the relative encodings (relative, relative_deberta, relative_cope):
keyword resolution, q / k checks and the [B or 1, 1, Tq, Tk] grid of position differences."""

from __future__ import annotations

import torch

from posenc.checks import check_int


def resolve_dims(
    name: str, dim, heads, head_dim, need_heads: bool
) -> tuple[int | None, int | None, int]:
    """Resolve (D, H, Dh) from the standard keywords; ValueError naming what is missing."""
    for key, val in (("dim", dim), ("heads", heads), ("head_dim", head_dim)):
        if val is not None:
            check_int(f"{name}: {key}", val, low=1)
    if head_dim is None:
        if dim is None or heads is None:
            raise ValueError(
                f"{name} needs head_dim, or dim and heads (head_dim = dim // heads); "
                f"got dim={dim}, heads={heads}, head_dim=None"
            )
        if dim % heads:
            raise ValueError(f"{name}: dim={dim} is not divisible by heads={heads}; pass head_dim")
        head_dim = dim // heads
    if need_heads and heads is None:
        raise ValueError(f"{name} needs heads (the number of query heads H), got heads=None")
    if dim is None and heads is not None:
        dim = heads * head_dim
    return dim, heads, head_dim


def check_qk(enc, q: torch.Tensor, k: torch.Tensor) -> None:
    name = type(enc).__name__
    if q.dim() != 4 or k.dim() != 4:
        raise ValueError(
            f"{name}: q and k must be [B, H, T, Dh], got {tuple(q.shape)} and {tuple(k.shape)}"
        )
    if q.shape[-1] != enc.head_dim:
        raise ValueError(
            f"{name} was built for head_dim={enc.head_dim}, but q has last dim {q.shape[-1]}"
        )
    if getattr(enc, "heads", None) is not None and q.shape[1] != enc.heads:
        raise ValueError(f"{name} was built for heads={enc.heads}, but q has {q.shape[1]} heads")
    if k.shape[:2] != q.shape[:2] or k.shape[-1] != q.shape[-1]:
        raise ValueError(
            f"{name}: k must be [B, H, Tk, Dh] matching q {tuple(q.shape)} (kv heads repeated), "
            f"got {tuple(k.shape)}"
        )


def relative_positions(
    enc, q_pos: torch.Tensor, k_pos: torch.Tensor, tq: int, tk: int, batch: int, integer: bool
) -> torch.Tensor:
    """Validate positions ([T] or [B, T]; enc.check_positions: its max_len) and return
    q_pos - k_pos as [B or 1, 1, Tq, Tk]."""
    out = []
    for name, pos, t in (("q_pos", q_pos, tq), ("k_pos", k_pos, tk)):
        pos = enc.check_positions(pos, name=name, integer=integer)
        bad_batch = pos.dim() == 2 and pos.shape[0] not in (1, batch)
        if pos.dim() not in (1, 2) or pos.shape[-1] != t or bad_batch:
            raise ValueError(
                f"{name} must be [{t}] or [B, {t}] with B in (1, {batch}), got {tuple(pos.shape)}"
            )
        pos = pos.long() if integer else pos
        out.append(pos if pos.dim() == 2 else pos[None])
    qp, kp = out
    return (qp[:, :, None] - kp[:, None, :]).unsqueeze(1)


def expand_heads(idx: torch.Tensor, b: int, h: int) -> torch.Tensor:
    """[B or 1, 1, X, Y] index -> [B, H, X, Y] (a view)."""
    return idx.expand(b, h, idx.shape[-2], idx.shape[-1])
