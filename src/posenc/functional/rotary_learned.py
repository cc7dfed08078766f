"""The math of the rotary schemes beyond RoPE's fixed pairs: axial frequencies (rope_nd), PoPE's
polar form, FoPE's Fourier series per pair, LieRE's matrix exponentials and ComRoPE's commuting
generators.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F

from posenc.functional.absolute import position_angles
from posenc.functional.rotary import rope_inv_freq

AXIAL_FREQS = ("lang", "pixel")


def axial_inv_freq(
    rotary_dim: int, axes: int, base: float = 10000.0, freqs: str = "lang", max_freq: float = 10.0
) -> torch.Tensor:
    """[R / (2 axes)] float32 frequencies each axis turns its R / axes channels with: "lang"
    RoPE's base^(-2j / (R / axes)), "pixel" linspace(1, max_freq / 2, R / (2 axes)) * pi
    (rotary-embedding-torch's freqs_for)."""
    per_axis = rotary_dim // axes
    if freqs == "lang":
        return rope_inv_freq(per_axis, base)[0]
    return (torch.linspace(1.0, max_freq / 2, per_axis // 2, dtype=torch.float64) * math.pi).float()


def axial_angles(positions: torch.Tensor, inv_freq: torch.Tensor, axes: int, dtype) -> torch.Tensor:
    """positions [...] (axes = 1) or [..., P] -> [..., R/2]: axis a turns pairs
    a * n .. (a + 1) * n - 1 (n = R / (2P)) by p_a * inv_freq."""
    angles = position_angles(positions, inv_freq.to(positions.device), dtype)
    return angles if axes == 1 else angles.flatten(-2)


def _compute_dtype(dtype: torch.dtype) -> torch.dtype:
    return torch.float64 if dtype == torch.float64 else torch.float32


def pope_inv_freq(head_dim: int, base: float = 10000.0) -> torch.Tensor:
    """[Dh] float32 frequencies base^(-j / Dh), j = 0..Dh-1: one per channel."""
    j = torch.arange(head_dim, dtype=torch.float64)
    return (1.0 / float(base) ** (j / head_dim)).float()


def apply_pope(
    x: torch.Tensor, angles: torch.Tensor, phase: torch.Tensor | None = None
) -> torch.Tensor:
    """x [B, H, T, Dh], angles [B or 1, 1, T, Dh] (float32 / float64), phase [H or 1, 1, Dh]
    or None -> [B, H, T, 2 Dh] = softplus(x) * [cos(angles - phase) | sin(angles - phase)]."""
    work = _compute_dtype(x.dtype)
    mag = F.softplus(x.to(work))
    a = angles.to(work)
    if phase is not None:
        a = a - phase.to(work)
    return torch.cat((mag * a.cos(), mag * a.sin()), -1).to(x.dtype)


def fope_inv_freq(rotary_dim: int, base: float, train_len: int) -> torch.Tensor:
    """[K] float32: RoPE's frequencies of rotary dim R with w >= 2 pi / train_len."""
    inv_freq = rope_inv_freq(rotary_dim, base)[0]
    return inv_freq[inv_freq.double() >= 2 * math.pi / train_len]


def fope_cos_sin(
    positions: torch.Tensor,
    inv_freq: torch.Tensor,
    cos_coef: torch.Tensor,
    sin_coef: torch.Tensor,
    pairs: int,
    dtype: torch.dtype,
) -> tuple[torch.Tensor, torch.Tensor]:
    """FoPE's cos and sin of each rotary pair: a Fourier series over the K kept frequencies.

    positions [T] or [B, T], inv_freq [K], coef [K, M] (shared) or [H, K, M] (per head) ->
    C, S [(B,) T, R/2] (shared) or [1 or B, H, T, R/2] (per head), R/2 = pairs:
    C_d(t) = sum_k cos(t w_k) cos_coef[k, d], S_d(t) likewise for the first M pairs; the pairs
    past M get C = S = 1 (as the authors' code and vLLM pad them).
    """
    work = _compute_dtype(dtype)
    angles = position_angles(positions, inv_freq.to(positions.device), work)  # [..., T, K]
    spec = "...tk,kd->...td" if cos_coef.dim() == 2 else "...tk,hkd->...htd"
    cos = torch.einsum(spec, angles.cos(), cos_coef.to(work))
    sin = torch.einsum(spec, angles.sin(), sin_coef.to(work))
    if cos_coef.dim() == 3 and cos.dim() == 3:
        cos, sin = cos[None], sin[None]  # [H, T, M] -> [1, H, T, M]
    pad = (0, pairs - cos.shape[-1])
    return F.pad(cos, pad, value=1.0), F.pad(sin, pad, value=1.0)


def skew(raw: torch.Tensor) -> torch.Tensor:
    """[..., g, g] -> the skew-symmetric A = U - U^T of raw's strict upper triangle U."""
    upper = raw.triu(1)
    return upper - upper.transpose(-1, -2)


def liere_rotations(positions: torch.Tensor, raw: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """positions [..., P] (floats), raw generators [P, G, g, g] -> R(p) = exp(sum_a p_a A_a)
    [..., G, g, g], taken in float64 and rounded once to float32 (float64 for `dtype` float64).
    """
    gens = skew(raw.double())  # [P, G, g, g]
    arg = torch.einsum("...p,pgij->...gij", positions.double(), gens)
    return torch.linalg.matrix_exp(arg).to(_compute_dtype(dtype))


def apply_blocks(x: torch.Tensor, rotations: torch.Tensor) -> torch.Tensor:
    """x [B, H, T, Dh], rotations [B or 1, H or 1, T, G, g, g] -> x with channels
    b*g .. (b+1)*g - 1 (b < G) multiplied by rotation b; the channels past G*g pass through."""
    G, g = rotations.shape[-3], rotations.shape[-1]
    r = G * g
    work = x[..., :r].to(rotations.dtype).unflatten(-1, (G, g))  # [B, H, T, G, g]
    out = (rotations @ work[..., None])[..., 0].flatten(-2).to(x.dtype)
    return torch.cat((out, x[..., r:]), -1) if r < x.shape[-1] else out


def liere_angles(positions: torch.Tensor, raw: torch.Tensor) -> torch.Tensor:
    """positions [..., P], raw [P, G, g, g] -> [..., G * (g // 2)] float64: the angles R(p)
    turns its invariant planes by (the eigenvalues +-i*phi of sum_a p_a A_a), ascending per
    block. For one axis phi = p * theta: a RoPE whose frequencies theta are learned."""
    arg = torch.einsum("...p,pgij->...gij", positions.double(), skew(raw.double()))
    phi = torch.linalg.eigvalsh(1j * arg.to(torch.complex128))  # [..., G, g] real, ascending
    g = raw.shape[-1]
    return phi[..., g - g // 2 :].flatten(-2)


COMROPE_VARIANTS = ("ap", "ld")  # ComRoPE (Yu et al., CVPR 2025): generators that commute


def comrope_generators(
    weight: torch.Tensor, axes: int, variant: str, multiplier: torch.Tensor | None = None
) -> torch.Tensor:
    """weight [G, g, g] (any real P_j), multiplier theta [P, G] (ld) -> A [P, G, g, g], with
    S_j = P_j - P_j^T: "ap" A_a[j] = S_j if j = a (mod P), else 0 (disjoint channels);
    "ld" A_a[j] = theta_{a, j} S_j (multiples of one matrix). Either way the A_a commute.
    """
    s = weight - weight.transpose(-1, -2)  # [G, g, g]
    G = s.shape[0]
    if variant == "ap":
        axis = torch.arange(G, device=s.device) % axes  # block j's axis
        mask = axis == torch.arange(axes, device=s.device)[:, None]  # [P, G]
        return s * mask[..., None, None].to(s.dtype)
    return s * multiplier[..., None, None]  # [P, G, g, g]
