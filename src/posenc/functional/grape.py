"""GRAPE's math (Zhang et al. 2026, arXiv 2512.07805): positions as group actions exp(n w L),
rotations of commuting rank-2 generators (GRAPE-M) or the unipotent I + n w A of a nilpotent
generator on lifted q and k, a logit bias linear in the offset (GRAPE-A)."""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F

from posenc.functional.absolute import position_angles


def grape_m_angles(
    positions: torch.Tensor, freq: torch.Tensor, sign: float, dtype: torch.dtype
) -> torch.Tensor:
    """positions [T] / [B, T], frequencies freq [R/2] (shared) or [H, R/2] (per head) ->
    sign * p * w: [(B,) T, R/2] shared, [B or 1, H, T, R/2] per head. sign -1 is GRAPE's
    orientation (x_i cos + x_j sin), +1 RoPE's; differentiable in freq.
    """
    if freq.dim() == 1:
        return sign * position_angles(positions, freq.to(positions.device), dtype)
    pos = positions if positions.dim() == 2 else positions[None]  # [b, T]
    angles = position_angles(pos[:, None, :], freq.to(pos.device)[:, None, :], dtype)
    return sign * angles  # [b, 1, T] x [H, 1, R/2] -> [b, H, T, R/2]


def rank2_exp(a: torch.Tensor, b: torch.Tensor, eta: float | torch.Tensor) -> torch.Tensor:
    """exp(eta L) [d, d] for L = a b^T - b a^T (a, b [d]) by GRAPE's closed form (section 2):
    I + sin(eta s) / s L + (1 - cos(eta s)) / s^2 L^2, s^2 = |a|^2 |b|^2 - (a . b)^2; the
    identity where a and b are parallel (L = 0)."""
    L = torch.outer(a, b) - torch.outer(b, a)
    s2 = (a @ a) * (b @ b) - (a @ b) ** 2
    eye = torch.eye(a.shape[0], dtype=a.dtype, device=a.device)
    if s2 <= 0:
        return eye
    s = s2.sqrt()
    z = torch.as_tensor(eta, dtype=a.dtype) * s
    return eye + (z.sin() / s) * L + ((1 - z.cos()) / s2) * (L @ L)


def grape_a_gates(x: torch.Tensor, probe: torch.Tensor) -> torch.Tensor:
    """x [B, H, T, Dh], probe [H, Dh] (unit rows) -> softplus(probe_h . x / sqrt(Dh)) [B, H, T]
    float32: GRAPE-A's non-negative rate of a query (probe v) or a key (probe u), eq. 4.6."""
    logits = torch.einsum("bhtd,hd->bht", x.float(), probe.float())
    return F.softplus(logits / math.sqrt(x.shape[-1]))
