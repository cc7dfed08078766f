"""ComRoPE's angle matrices (Yu et al., CVPR 2025): skew-symmetric generators A_a, one per
position axis, that commute pairwise, so R(p) = exp(sum_a p_a A_a) gives R(p)^T R(m) = R(m - p).

    comrope_generators(weight, axes, variant, multiplier) -> [P, G, g, g] skew-symmetric

The rotations and their application are LieRE's (posenc.functional.rotary_learned:
liere_rotations, apply_blocks, liere_angles): only the generators differ.
"""

from __future__ import annotations

import torch

VARIANTS = ("ap", "ld")


def comrope_generators(
    weight: torch.Tensor, axes: int, variant: str, multiplier: torch.Tensor | None = None
) -> torch.Tensor:
    """weight [G, g, g] (any real matrices P_j), multiplier [P, G] (ld) -> A [P, G, g, g].

    Each block j has the skew-symmetric S_j = P_j - P_j^T.
    "ap" (axis-partition): block j turns with axis j mod P only: A_a[j] = S_j if j = a (mod P),
    else 0; blocks of different axes act on different channels, so the A_a commute.
    "ld" (linearly dependent): A_a[j] = theta_{a, j} S_j; multiples of one matrix commute.
    """
    s = weight - weight.transpose(-1, -2)  # [G, g, g]
    G = s.shape[0]
    if variant == "ap":
        axis = torch.arange(G, device=s.device) % axes  # block j's axis
        mask = axis == torch.arange(axes, device=s.device)[:, None]  # [P, G]
        return s * mask[..., None, None].to(s.dtype)
    return s * multiplier[..., None, None]  # [P, G, g, g]
