"""ComRoPE, rotary position embedding of trainable commuting angle matrices (Yu et al. 2025).

Position p (P axes) gets R(p) = exp(sum_a p_a A_a), as LieRE, with A_a that commute pairwise
by construction: scores depend only on the offset, for N-D positions too.
"""

from __future__ import annotations

import torch
from torch import nn

from posenc.base import PositionalEncoding
from posenc.checks import check_choice, check_float, check_int
from posenc.encodings.rotary import head_dim_of, set_per_head
from posenc.encodings.rotary_lie import BlockRotations, position_scale_of
from posenc.functional.rotary_learned import COMROPE_VARIANTS, comrope_generators


class ComRoPE(BlockRotations):
    """ComRoPE, matched to the authors' ComRoPEAPAttention / ComRoPELDAttention (model.py).

    `variant` "ap" (block j turns with axis j mod P, A_a[j] = P_j - P_j^T) or "ld"
    (A_a[j] = theta_{a, j} (P_j - P_j^T), theta [P, G] learned). `block_dim` g (the authors'
    2): Dh a multiple of g (of P * g for "ap"). P_j ~ N(0, init_std^2) [G, g, g] (times heads
    with `per_head`), theta ~ N(0, 1). Positions times `position_scale` (position_scale_of).
    """

    paper = "Yu et al. 2025 (CVPR), arXiv 2506.03737"
    summary = "ComRoPE: exp(sum_a p_a A_a) of trainable pairwise-commuting angle matrices"

    def __init__(
        self,
        *,
        dim: int | None = None,
        heads: int | None = None,
        head_dim: int | None = None,
        max_len: int | None = None,
        train_len: int | None = None,
        axes: int = 1,
        variant: str = "ap",
        block_dim: int = 2,
        per_head: bool = False,
        init_std: float = 1.0,
        position_scale: float | None = None,
    ) -> None:
        self.position_dims = check_int("axes", axes, low=1)
        super().__init__(max_len)
        self.variant = check_choice("variant", variant, COMROPE_VARIANTS)
        self.head_dim = head_dim_of(dim, heads, head_dim, need="comrope")
        g = check_int("block_dim", block_dim, low=2)
        step = g * axes if variant == "ap" else g  # ap: every axis as many blocks
        if self.head_dim % step:
            what = f"block_dim * axes = {g} * {axes}" if variant == "ap" else f"block_dim={g}"
            raise ValueError(
                f"comrope variant={variant!r}: head_dim={self.head_dim} must be a multiple of "
                f"{what}; pass another block_dim"
            )
        set_per_head(self, "comrope", per_head, heads, "generators")
        std = check_float("init_std", init_std, gt=0)
        self.position_scale = position_scale_of(position_scale, train_len)
        G = self.head_dim // g
        copies = heads if self.per_head else 1
        self.weight = nn.Parameter(torch.randn(copies * G, g, g) * std)  # [heads? * G, g, g]
        self.multiplier = nn.Parameter(torch.randn(axes, G)) if variant == "ld" else None

    def generator_tensor(self) -> torch.Tensor:
        """The A_a [P, G * heads?, g, g] in float64 (a float32 P_j - P_j^T is off by 2^-24,
        which large positions would multiply)."""
        mult = None if self.multiplier is None else self.multiplier.double()
        if mult is not None and self.per_head:
            mult = mult.repeat(1, self.heads)  # theta shared by the heads, as the authors'
        return comrope_generators(self.weight.double(), self.position_dims, self.variant, mult)

    def extra_repr(self) -> str:
        G, g, _ = self.weight.shape
        return (f"head_dim={self.head_dim}, axes={self.position_dims}, variant={self.variant!r}, "
                f"blocks={G}x{g}, per_head={self.per_head}")  # fmt: skip


ENCODINGS: dict[str, type[PositionalEncoding]] = {"comrope": ComRoPE}
