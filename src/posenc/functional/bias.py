"""Score biases: ALiBi slopes, T5 buckets, Sandwich's curve, FIRE's MLP pieces, the dynamic
position bias's input feature and the distance-basis bias (x-transformers)."""

from __future__ import annotations

import math

import torch

from posenc.checks import check_bool, check_int


def alibi_slopes(heads: int) -> torch.Tensor:
    """ALiBi head slopes m [H] float32 (Press et al. 2022), equal to BLOOM's for every H:
    m_h = 2^(-8h/n), h = 1..n, n = 2^floor(log2 H), then every other slope of the series for
    2n heads."""
    check_int("heads", heads, low=1)

    def series(count: int, powers: torch.Tensor) -> torch.Tensor:
        # (2^(-8/count))^h in float32: the ratio is rounded once, as in BLOOM
        ratio = torch.tensor(2.0 ** (-8.0 / count), dtype=torch.float32)
        return torch.pow(ratio, powers)

    n = 1 << (heads.bit_length() - 1)  # largest power of two <= heads
    slopes = series(n, torch.arange(1, n + 1, dtype=torch.float32))
    if n < heads:
        odd = torch.arange(1, 2 * (heads - n), 2, dtype=torch.float32)
        slopes = torch.cat([slopes, series(2 * n, odd)])
    return slopes


def check_t5_buckets(bidirectional: bool, num_buckets: int, max_distance: int) -> None:
    """Raise TypeError / ValueError unless the arguments give well-defined T5 buckets."""
    check_bool("bidirectional", bidirectional)
    check_int("num_buckets", num_buckets)
    check_int("max_distance", max_distance)
    if bidirectional and (num_buckets < 4 or num_buckets % 2):
        raise ValueError(
            "num_buckets must be an even int >= 4 when bidirectional (half the buckets per "
            f"direction, each half with >= 1 exact bucket), got {num_buckets}"
        )
    if num_buckets < 2:
        raise ValueError(f"num_buckets must be >= 2, got {num_buckets}")
    max_exact = (num_buckets // 2 if bidirectional else num_buckets) // 2
    if max_distance <= max_exact:
        raise ValueError(
            f"max_distance must be > {max_exact} (where the log-spaced buckets start: half the "
            f"buckets of one direction), got {max_distance}"
        )


def t5_bucket(
    relative_position: torch.Tensor,
    bidirectional: bool = True,
    num_buckets: int = 32,
    max_distance: int = 128,
) -> torch.Tensor:
    """T5's relative-position buckets (Raffel et al. 2020) of relative_position = key - query
    (integers): int64 in [0, num_buckets), same shape. Bidirectional: half the buckets per
    direction; otherwise keys after the query share bucket 0. Distances below n/2 (n buckets
    per direction) get a bucket each, larger ones log-spaced up to max_distance (in float32,
    as T5).
    """
    check_t5_buckets(bidirectional, num_buckets, max_distance)
    if not isinstance(relative_position, torch.Tensor):
        raise TypeError(
            f"relative_position must be a torch.Tensor, got {type(relative_position).__name__}"
        )
    if relative_position.is_floating_point() or relative_position.is_complex():
        raise TypeError(
            f"relative_position must be an integer tensor, got {relative_position.dtype}"
        )
    rel = relative_position.long()
    n = num_buckets
    if bidirectional:
        n //= 2
        offset = (rel > 0).long() * n
        dist = rel.abs()
    else:
        offset = torch.zeros_like(rel)
        dist = (-rel).clamp(min=0)
    max_exact = n // 2
    # clamp(min=max_exact) only avoids log(0) where the exact bucket is taken anyway
    scaled = (
        torch.log(dist.clamp(min=max_exact).float() / max_exact)
        / math.log(max_distance / max_exact)
        * (n - max_exact)
    )
    far = (max_exact + scaled.long()).clamp(max=n - 1)
    return offset + torch.where(dist < max_exact, dist, far)


def sandwich_curve(distance: torch.Tensor, dim: int = 128) -> torch.Tensor:
    """Sandwich's bias before per-head scaling (Chi et al. 2023), float64, same shape:
    sum_{i=1..dim/2} cos(d / 10000^(2i/dim)) - dim/2, summed frequency by frequency (no
    [..., dim/2] tensor)."""
    check_int("dim", dim, low=2, even=True)  # Sandwich's d-prime
    d = distance.double()
    half = dim // 2
    total = torch.zeros_like(d)
    for i in range(1, half + 1):
        total = total + torch.cos(d * 10000.0 ** (-2.0 * i / dim))
    return total - half


def relu_mlp_pieces(
    w1: torch.Tensor, b1: torch.Tensor, w2: torch.Tensor, b2: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Linear(1, U) - ReLU - Linear(U, H) of a scalar x as its linear pieces: w1, b1 [U],
    w2 [H, U], b2 [H] -> z [K] sorted (where a unit turns on or off), A, B [H, K + 1] float32
    with MLP(x)[h] = A[h, k] * x + B[h, k], k = #{z < x}; A and B carry the gradients.
    """
    turns = w1 != 0
    z, order = torch.sort((-b1[turns] / w1[turns]).detach().float())  # [K]
    K = z.shape[0]
    rank = torch.empty_like(order)
    rank[order] = torch.arange(K, device=order.device)
    k = torch.arange(K + 1, device=z.device)  # piece k: x above k of the z, below the rest
    up = (w1[turns] > 0)[:, None]
    act = torch.zeros(w1.shape[0], K + 1, dtype=torch.bool, device=z.device)  # [U, K + 1]
    act[turns] = torch.where(up, rank[:, None] < k, rank[:, None] >= k)
    act[~turns] = (b1[~turns] > 0)[:, None]  # a constant unit: on everywhere or nowhere
    act = act.double()
    A = (w2.double() * w1.double()) @ act  # [H, K + 1]
    B = b2.double()[:, None] + (w2.double() * b1.double()) @ act
    return z, A.float(), B.float()


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
