"""Content-relative helpers: DeBERTa's log buckets, Transformer-XL's shift and sinusoid."""

from __future__ import annotations

import torch

from posenc.functional.absolute import position_angles, sinusoidal_inv_freq


def deberta_bucket(
    relative_position: torch.Tensor, num_buckets: int, max_distance: int
) -> torch.Tensor:
    """DeBERTa-v2's log buckets of relative_position = query - key -> int64, same shape:
    |r| <= mid = num_buckets // 2 kept, beyond sign(r) * (mid + ceil(log(|r| / mid) /
    log((max_distance - 1) / mid) * (mid - 1))), growing past max_distance (callers clamp).
    In float32, as transformers' `make_log_bucket_position`.
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
    """Transformer-XL's relative shift: [..., Tq, Tk_rel] -> [..., Tq, Tk_rel],
    out[..., i, j] = x[..., i, j + Tq - 1 - i], columns of x by decreasing distance. With
    Tk_rel >= Tq + Tk - 1 the first Tk columns are valid (the rest wrap around).
    """
    *lead, tq, kr = x.shape
    padded = torch.nn.functional.pad(x, (1, 0))  # [..., Tq, Tk_rel + 1]
    padded = padded.reshape(*lead, kr + 1, tq)[..., 1:, :]  # [..., Tk_rel, Tq]
    return padded.reshape(*lead, tq, kr)


def relative_sinusoid(distances: torch.Tensor, dim: int, base: float = 10000.0) -> torch.Tensor:
    """Transformer-XL's relative encoding R: distances [...] -> [..., dim] float32,
    [sin(d * f_k) | cos(d * f_k)], f_k = base^(-2k/dim) (halves concatenated, not interleaved).
    """
    if dim % 2:
        raise ValueError(f"relative_sinusoid needs an even dim, got dim={dim}")
    inv_freq = sinusoidal_inv_freq(dim, base, dtype=torch.float64, device=distances.device)
    ang = position_angles(distances, inv_freq)  # [..., dim/2] float32, reduced
    return torch.cat([ang.sin(), ang.cos()], dim=-1)
