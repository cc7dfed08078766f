"""Content-relative helpers: DeBERTa's log buckets, Transformer-XL's shift and sinusoid."""

from __future__ import annotations

import torch

from posenc.functional.absolute import position_angles, sinusoidal_inv_freq


def deberta_bucket(
    relative_position: torch.Tensor, num_buckets: int, max_distance: int
) -> torch.Tensor:
    """DeBERTa-v2's log buckets of relative_position = query - key -> int64, same shape.

    Distances with |r| <= num_buckets // 2 (= mid) keep their value; beyond, the bucket is
    sign(r) * (mid + ceil(log(|r| / mid) / log((max_distance - 1) / mid) * (mid - 1))), so
    |bucket| reaches num_buckets - 1 at |r| = max_distance - 1 and keeps growing past it
    (callers clamp). Computed in float32 like transformers' `make_log_bucket_position`,
    whose integers it reproduces exactly.
    """
    mid = num_buckets // 2
    if mid < 1 or max_distance - 1 <= mid:
        raise ValueError(
            f"deberta_bucket needs num_buckets >= 2 and max_distance > num_buckets // 2 + 1, "
            f"got num_buckets={num_buckets}, max_distance={max_distance}"
        )
    rel = relative_position.long()
    inner = rel.abs() < mid  # |r| < mid: log of a placeholder, never used
    abs_pos = torch.where(inner, torch.full_like(rel, mid - 1), rel.abs()).float()
    ratio = torch.tensor((max_distance - 1) / mid, dtype=torch.float32).log()
    log_pos = torch.ceil(torch.log(abs_pos / mid) / ratio * (mid - 1)) + mid
    bucket = torch.where(abs_pos <= mid, rel.float(), log_pos * rel.sign())
    return bucket.long()


def rel_shift(x: torch.Tensor) -> torch.Tensor:
    """Transformer-XL's relative shift: [..., Tq, Tk_rel] -> [..., Tq, Tk_rel].

    Input column c of row i holds a score against relative encoding number c, ordered by
    DEcreasing distance (column 0 = the largest distance, as Transformer-XL's
    pos_seq = klen-1 .. 0). Pad a zero column on the left, view the rows as
    [..., Tk_rel + 1, Tq], drop the first row and view back: out[..., i, j] =
    x[..., i, j + Tq - 1 - i]. Entries with j > Tk_rel - Tq + i wrap around and are not
    meaningful; with Tk_rel >= Tq + Tk - 1 the first Tk columns are all valid, column j of
    row i then holding distance (dmax - (Tq - 1)) + i - j where dmax is column 0's.
    """
    *lead, tq, kr = x.shape
    padded = torch.nn.functional.pad(x, (1, 0))  # [..., Tq, Tk_rel + 1]
    padded = padded.reshape(*lead, kr + 1, tq)[..., 1:, :]  # [..., Tk_rel, Tq]
    return padded.reshape(*lead, tq, kr)


def relative_sinusoid(distances: torch.Tensor, dim: int, base: float = 10000.0) -> torch.Tensor:
    """Transformer-XL's relative encoding R: distances [...] -> [..., dim] float32.

    The first dim/2 columns are sin(d * f_k), the last dim/2 cos(d * f_k), f_k = base^(-2k/dim)
    (Transformer-XL concatenates the halves; it does not interleave them).
    """
    if dim % 2:
        raise ValueError(f"relative_sinusoid needs an even dim, got dim={dim}")
    inv_freq = sinusoidal_inv_freq(dim, base, dtype=torch.float64, device=distances.device)
    ang = position_angles(distances, inv_freq)  # [..., dim/2] float32, reduced
    return torch.cat([ang.sin(), ang.cos()], dim=-1)
