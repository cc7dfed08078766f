"""The dynamic position bias's input feature and the distance-basis bias (x-transformers)."""

from __future__ import annotations

import torch


def signed_log_distance(distance: torch.Tensor) -> torch.Tensor:
    """d -> sign(d) * log(|d| + 1), float32 (the dynamic position bias's log_distance input)."""
    d = distance.float()
    return torch.sign(d) * torch.log1p(d.abs())


def distance_basis_bias(
    weights: torch.Tensor, bank: torch.Tensor, distance: torch.Tensor
) -> torch.Tensor:
    """weights [B, H, Tq, R] (each query's mix of R basis curves), bank [R, M] (the curves over
    distances 0..M-1), distance [b, Tq, Tk] int64 (q_pos - k_pos, b in (1, B)) ->
    bias [B, H, Tq, Tk] float32: sum_r weights[.., i, r] * bank[r, d_ij] where 0 <= d_ij < M,
    else 0 (keys after the query, or too far)."""
    M = bank.shape[-1]
    inside = (distance >= 0) & (distance < M)  # [b, Tq, Tk]
    at = distance.clamp(0, M - 1)
    bias = weights.new_zeros(()).float()
    for r in range(bank.shape[0]):  # one curve at a time: never an [R, .., Tq, Tk] tensor
        curve = bank[r].float()[at][:, None]  # [b, 1, Tq, Tk]
        bias = bias + weights[..., r, None].float() * curve
    return bias * inside[:, None]
