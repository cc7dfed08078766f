"""Absolute tables: Vaswani et al.'s sinusoids and their 2-D / 3-D (axial) forms.

Angles are float32 (float64 for float64 positions or positions past 2^24); shapes follow the
legend in posenc.base.
"""

from __future__ import annotations

import math

import torch

from posenc.checks import check_tensor

_F32_EXACT = 2**24  # float32 holds every integer up to 2^24 exactly; past it, angles go float64


def _check_table_args(positions: torch.Tensor, dim: int, base: float) -> None:
    check_tensor("positions", positions)
    if isinstance(dim, bool) or not isinstance(dim, int) or dim < 1:
        raise ValueError(f"dim must be a positive integer, got {dim!r}")
    if not base > 0:
        raise ValueError(f"base must be > 0, got {base!r}")


def _angle_dtype(positions: torch.Tensor) -> torch.dtype:
    """float64 for float64 positions or positions past 2^24, else float32."""
    if positions.dtype == torch.float64:
        return torch.float64
    if positions.numel() and positions.detach().abs().max().item() > _F32_EXACT:
        return torch.float64
    return torch.float32


def sinusoidal_inv_freq(
    dim: int, base: float = 10000.0, *, dtype: torch.dtype = torch.float32, device=None
) -> torch.Tensor:
    """[ceil(dim/2)] frequencies w_i = 1 / base^(2i/dim), computed in `dtype`.

    The one place of this formula: sinusoidal tables (float64, then cast), RoPE's default
    frequencies (float32, as transformers computes them) and Transformer-XL's relative sinusoid.
    """
    two_i = torch.arange(0, dim, 2, dtype=torch.int64, device=device).to(dtype)
    return 1.0 / (float(base) ** (two_i / dim))


def sinusoidal_table(positions: torch.Tensor, dim: int, base: float = 10000.0) -> torch.Tensor:
    """Vaswani et al.'s table: positions [...] -> [..., dim].

    Column 2i = sin(p * w_i), column 2i+1 = cos(p * w_i), with w_i = base^(-2i/dim). An odd
    `dim` keeps the last sin column (its cos is dropped). Positions may be floats
    (interpolation). Angles are float32, float64 for float64 positions or positions > 2^24;
    the result is float32 (float64 for float64 positions).
    """
    _check_table_args(positions, dim, base)
    dtype = _angle_dtype(positions)
    inv_freq = sinusoidal_inv_freq(dim, base, dtype=torch.float64, device=positions.device)
    inv_freq = inv_freq.to(dtype)
    angles = positions.to(dtype)[..., None] * inv_freq  # [..., ceil(dim/2)]
    table = torch.stack((angles.sin(), angles.cos()), dim=-1).flatten(-2)[..., :dim]
    return table if positions.dtype == torch.float64 else table.float()


def _axial_table(positions: torch.Tensor, dim: int, axes: int, base: float) -> torch.Tensor:
    """One sinusoidal table of c = 2*ceil(dim / (2*axes)) channels per axis, concatenated
    [axis 0 | axis 1 | ...] and cut to `dim` (so the last axes lose channels when dim is not
    divisible by 2*axes), as positional-encodings' PositionalEncoding2D/3D lay them out."""
    _check_table_args(positions, dim, base)
    if positions.dim() == 0 or positions.shape[-1] != axes:
        raise ValueError(
            f"positions must have a trailing axis of size {axes}, got {tuple(positions.shape)}"
        )
    c = 2 * math.ceil(dim / (2 * axes))
    parts = [sinusoidal_table(positions[..., a], c, base) for a in range(axes)]
    return torch.cat(parts, dim=-1)[..., :dim]


def sinusoidal_table_2d(positions: torch.Tensor, dim: int, base: float = 10000.0) -> torch.Tensor:
    """Images: positions [..., 2] (row, col) -> [..., dim].

    Channels [0, c) encode the row and [c, 2c) the column, c = 2*ceil(dim/4), each an
    interleaved sin/cos table with w_i = base^(-2i/c); cut to `dim`. Equals
    positional-encodings' PositionalEncoding2D at the same grid coordinates.
    """
    return _axial_table(positions, dim, 2, base)


def sinusoidal_table_3d(positions: torch.Tensor, dim: int, base: float = 10000.0) -> torch.Tensor:
    """Video: positions [..., 3] (time, row, col) -> [..., dim].

    c = 2*ceil(dim/6) channels per axis, [time | row | col], each as in sinusoidal_table_2d;
    cut to `dim`. Equals positional-encodings' PositionalEncoding3D.
    """
    return _axial_table(positions, dim, 3, base)
