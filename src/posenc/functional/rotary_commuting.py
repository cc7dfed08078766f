"""ComRoPE's angle matrices (Yu et al., CVPR 2025): skew-symmetric generators A_a, one per
position axis, that commute pairwise; the rotations are LieRE's (functional.rotary_learned).
"""

from __future__ import annotations

import torch

VARIANTS = ("ap", "ld")


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
