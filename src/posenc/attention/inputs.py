"""Input validation for posenc.attention: q / k / v shapes, positions (with their defaults)
and the boolean mask."""

from __future__ import annotations

import torch

from posenc.base import PositionalEncoding
from posenc.checks import check_positions, check_reach, grid_positions


def check_qkv(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> tuple[int, ...]:
    """(B, H, Tq, Dh, Hkv, Tk) after checking q [B, H, Tq, Dh] and k, v [B, Hkv, Tk, Dh]."""
    for name, t in (("q", q), ("k", k), ("v", v)):
        if not isinstance(t, torch.Tensor):
            raise TypeError(f"{name} must be a torch.Tensor, got {type(t).__name__}")
        if t.dim() != 4:
            raise ValueError(f"{name} must be 4-D [B, H, T, Dh], got shape {tuple(t.shape)}")
        if not t.is_floating_point():
            raise TypeError(f"{name} must be a floating-point tensor, got {t.dtype}")
    B, H, Tq, Dh = q.shape
    if H < 1 or Dh < 1:
        raise ValueError(
            f"q must have H >= 1 heads and Dh >= 1 channels, got shape {tuple(q.shape)}"
        )
    _, Hkv, Tk, _ = k.shape
    if k.shape != v.shape:
        raise ValueError(
            f"k and v must have the same shape [B, Hkv, Tk, Dh], got k {tuple(k.shape)} "
            f"and v {tuple(v.shape)}"
        )
    if k.shape[0] != B or k.shape[3] != Dh:
        raise ValueError(
            f"k must be [B={B}, Hkv, Tk, Dh={Dh}] to match q {tuple(q.shape)}, got {tuple(k.shape)}"
        )
    if Hkv == 0 or H % Hkv:
        raise ValueError(
            f"q heads H={H} must be a multiple of k/v heads Hkv={Hkv} (grouped-query attention)"
        )
    if not (q.dtype == k.dtype == v.dtype):
        raise TypeError(f"q, k, v must share a dtype, got {q.dtype}, {k.dtype}, {v.dtype}")
    return B, H, Tq, Dh, Hkv, Tk


def prepare_positions(
    positions: torch.Tensor | None,
    name: str,
    T: int,
    B: int,
    offset: int,
    device: torch.device,
    encoding: PositionalEncoding | None,
) -> torch.Tensor:
    """Positions validated once per call by the encoding's rules (position_dims, integer, max_len,
    >= 0), or the default arange(offset, offset + T) checked against max_len without a read."""
    P = encoding.position_dims if encoding is not None else 1
    max_len = encoding.max_len if encoding is not None else None
    if positions is None:
        check_reach(name, offset + T - 1, max_len if T else None)
        return grid_positions(torch.arange(offset, offset + T, device=device), P)
    nd = 1 if P == 1 else 2  # dims of the unbatched form
    want = f"[{T}] or [B={B}, {T}]" if P == 1 else f"[{T}, {P}] or [B={B}, {T}, {P}]"
    if not isinstance(positions, torch.Tensor):
        raise TypeError(f"{name} must be a torch.Tensor of shape {want}")
    shape = tuple(positions.shape)
    ok = positions.dim() in (nd, nd + 1) and shape[positions.dim() - nd] == T
    ok = ok and (positions.dim() == nd or shape[0] in (1, B))
    if not ok or (P > 1 and shape[-1] != P):
        raise ValueError(f"{name} must have shape {want}, got {shape}")
    integer = encoding is not None and encoding.integer_positions
    return check_positions(
        positions.to(device), name=name, position_dims=P, integer=integer, max_len=max_len
    )


def prepare_mask(mask: torch.Tensor | None, B: int, H: int, Tq: int, Tk: int):
    """mask as a 4-D bool view broadcastable to [B, H, Tq, Tk], or None."""
    if mask is None:
        return None
    if not isinstance(mask, torch.Tensor) or mask.dtype != torch.bool:
        what = mask.dtype if isinstance(mask, torch.Tensor) else type(mask).__name__
        raise TypeError(f"mask must be a bool tensor (True = may attend), got {what}")
    want = (B, H, Tq, Tk)
    try:
        ok = mask.dim() <= 4 and torch.broadcast_shapes(mask.shape, want) == want
    except RuntimeError:
        ok = False
    if not ok:
        raise ValueError(
            f"mask must be broadcastable to [B, H, Tq, Tk] = {list(want)}, got {tuple(mask.shape)}"
        )
    return mask.reshape((1,) * (4 - mask.dim()) + tuple(mask.shape))
