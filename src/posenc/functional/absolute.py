"""Absolute tables: Vaswani et al.'s sinusoids and their 2-D / 3-D (axial) forms, and the
angles every sinusoid and rotation of posenc is built from (position_angles).
"""

from __future__ import annotations

import math

import torch

from posenc.checks import check_float, check_int, check_tensor
from posenc.functional.content import run_ends

TWO_PI = 2 * math.pi
BLOCK = 2**18  # angles per block of a table: its float64 intermediates (2 MiB) stay in cache


def _check_table_args(positions: torch.Tensor, dim: int, base: float) -> None:
    check_tensor("positions", positions)
    check_int("dim", dim, low=1)
    check_float("base", base, gt=0)


def position_angles(
    positions: torch.Tensor, inv_freq: torch.Tensor, dtype: torch.dtype = torch.float32
) -> torch.Tensor:
    """positions [...] times inv_freq [F] -> angles [..., F], in float64 for `dtype` float64,
    else float32 in (-2 pi, 2 pi): the product taken in float64 and its whole turns dropped, so
    cos and sin are within ~1e-6 of float64's at any position below 2^31 (a float32 product is
    off by up to p * w * 2^-24 rad).
    """
    if dtype == torch.float64:
        return positions.double()[..., None] * inv_freq.double()
    turns = positions.double()[..., None] * (inv_freq.double() / TWO_PI)  # [..., F]
    return turns.frac_().float().mul_(TWO_PI)


def sinusoidal_inv_freq(
    dim: int, base: float = 10000.0, *, dtype: torch.dtype = torch.float32, device=None
) -> torch.Tensor:
    """[ceil(dim/2)] frequencies w_i = 1 / base^(2i/dim), computed in `dtype` (RoPE's default
    frequencies in float32, as transformers computes them)."""
    two_i = torch.arange(0, dim, 2, dtype=torch.int64, device=device).to(dtype)
    return 1.0 / (float(base) ** (two_i / dim))


def sinusoidal_table(positions: torch.Tensor, dim: int, base: float = 10000.0) -> torch.Tensor:
    """Vaswani et al.'s table: positions [...] -> [..., dim], column 2i = sin(p * w_i),
    2i+1 = cos(p * w_i), w_i = base^(-2i/dim) (an odd `dim` keeps the last sin). float32
    (float64 for float64 positions).
    """
    _check_table_args(positions, dim, base)
    dtype = torch.float64 if positions.dtype == torch.float64 else torch.float32
    inv_freq = sinusoidal_inv_freq(dim, base, dtype=torch.float64, device=positions.device)
    if torch.compiler.is_compiling() or (torch.is_grad_enabled() and positions.requires_grad):
        angles = position_angles(positions, inv_freq, dtype)  # [..., ceil(dim/2)]
        return torch.stack((angles.sin(), angles.cos()), -1).flatten(-2)[..., :dim]
    flat, half = positions.reshape(-1), inv_freq.numel()
    table = torch.empty(flat.numel(), 2 * half, dtype=dtype, device=positions.device)
    rows = max(1, BLOCK // half)
    for start in range(0, flat.numel(), rows):  # memory-bound: blocks that stay in cache
        angles = position_angles(flat[start : start + rows], inv_freq, dtype)  # [rows, half]
        block = table[start : start + rows]
        torch.sin(angles, out=block[:, 0::2])  # written interleaved, no stack
        torch.cos(angles, out=block[:, 1::2])
    return table.view(*positions.shape, 2 * half)[..., :dim]


def _axial_table(positions: torch.Tensor, dim: int, axes: int, base: float) -> torch.Tensor:
    """One sinusoidal table of c = 2*ceil(dim / (2*axes)) channels per axis, concatenated
    [axis 0 | axis 1 | ...] and cut to `dim`, as positional-encodings' PositionalEncoding2D/3D."""
    _check_table_args(positions, dim, base)
    if positions.dim() == 0 or positions.shape[-1] != axes:
        raise ValueError(
            f"positions must have a trailing axis of size {axes}, got {tuple(positions.shape)}"
        )
    c = 2 * math.ceil(dim / (2 * axes))
    parts = [sinusoidal_table(positions[..., a], c, base) for a in range(axes)]
    return torch.cat(parts, dim=-1)[..., :dim]


def sinusoidal_table_2d(positions: torch.Tensor, dim: int, base: float = 10000.0) -> torch.Tensor:
    """Images: positions [..., 2] (row, col) -> [..., dim], as PositionalEncoding2D's."""
    return _axial_table(positions, dim, 2, base)


def sinusoidal_table_3d(positions: torch.Tensor, dim: int, base: float = 10000.0) -> torch.Tensor:
    """Video: positions [..., 3] (time, row, col) -> [..., dim], as PositionalEncoding3D's."""
    return _axial_table(positions, dim, 3, base)


def document_last(positions: torch.Tensor) -> torch.Tensor:
    """positions [T] or [B, T] -> the same shape: each token's last position in its document,
    a run of increasing positions (run_ends: packed documents restart). arange(T): all T - 1."""
    pos = positions if positions.dim() == 2 else positions[None]  # [B or 1, T]
    return pos.gather(-1, run_ends(pos) - 1).view_as(positions)
