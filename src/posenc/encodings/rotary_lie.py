"""Rotations R(p) = exp(sum_a p_a A_a) of learned block-diagonal skew-symmetric generators A_a
(blocks of g channels) for positions p of P axes: LieRE (Ostmeier et al. 2024), relative for
one axis, not strictly for several non-commuting ones; ComRoPE (Yu et al. 2025), whose A_a
commute pairwise by construction, so scores depend only on the offset for N-D positions too.
"""

from __future__ import annotations

import math

import torch
from torch import nn

from posenc.base import PositionalEncoding
from posenc.checks import check_choice, check_float, check_int
from posenc.encodings.rotary import check_head_dim, check_per_head, head_dim_of, set_per_head
from posenc.functional.rotary_learned import (
    COMROPE_VARIANTS,
    apply_blocks,
    comrope_generators,
    liere_angles,
    liere_rotations,
)


def position_scale_of(position_scale: float | None, train_len: int | None) -> float:
    """The factor on positions: position_scale, default 1 / train_len (the authors map the
    trained grid to [0, 1]), else 1."""
    if train_len is not None:
        check_int("train_len", train_len, low=1)
    if position_scale is None:
        position_scale = 1.0 if train_len is None else 1.0 / train_len
    return check_float("position_scale", position_scale, gt=0)


class BlockRotations(PositionalEncoding):
    """R(p) = exp(sum_a p_a A_a) of block-diagonal skew-symmetric generators on q and k (LieRE,
    ComRoPE): a subclass sets position_dims, head_dim, heads, per_head, position_scale and
    `generator_tensor()` [P, G * heads?, g, g] (head-major blocks)."""

    family = "rotary"
    provides = frozenset({"rotate", "angles"})
    trainable = True

    def generator_tensor(self) -> torch.Tensor:
        raise NotImplementedError  # [P, G * heads?, g, g]

    def _scaled(self, positions: torch.Tensor) -> torch.Tensor:
        """positions [T] / [B, T] (or [..., P]) -> [..., P] float64 times position_scale."""
        pos = positions.double() * self.position_scale
        return pos[..., None] if self.position_dims == 1 else pos

    def rotations(self, positions: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
        """positions [T] / [B, T] (or [..., P]) -> [B or 1, H or 1, T, G, g, g]."""
        rot = liere_rotations(self._scaled(positions), self.generator_tensor(), dtype)
        heads = self.heads if self.per_head else 1  # rot [(B,) T, G * heads?, g, g]
        rot = rot.unflatten(-3, (heads, -1)).movedim(-4, -5)  # [(B,) heads, T, G, g, g]
        return rot if rot.dim() == 6 else rot[None]

    def rotate(self, q, k, q_pos, k_pos):
        check_head_dim(q, k, self.head_dim, type(self).__name__)
        check_per_head(self, q, k)

        def turn(x, pos, name):
            return apply_blocks(x, self.rotations(pos, x.dtype))

        return self.each(turn, q, k, q_pos, k_pos, position_dims=self.position_dims)

    def angles(self, positions):
        """[T, G * (g // 2)] float64: the angles R(p) turns its invariant planes by (head 0's)."""
        positions = self.check_positions(positions, position_dims=self.position_dims)
        gens = self.generator_tensor().detach()
        G = gens.shape[1] // (self.heads if self.per_head else 1)
        return liere_angles(self._scaled(positions), gens[:, :G])


class LieRE(BlockRotations):
    """LieRE, matched to the authors' LierePositionEncoder + FlexibleAttention.

    `axes` position axes; `block_dim` g (default: the whole head, the authors'): the first
    (Dh // g) * g channels turn in blocks of g, the rest pass through. Generators: raw
    parameters U(0, 2 pi) [P, G, g, g] (times heads with `per_head`), A = U - U^T of their
    strict upper triangle. Positions times `position_scale` (position_scale_of).
    """

    paper = "Ostmeier et al. 2024"
    summary = "LieRE: rotations exp(sum_a p_a A_a) of learned skew-symmetric generators"

    def __init__(
        self,
        *,
        dim: int | None = None,
        heads: int | None = None,
        head_dim: int | None = None,
        max_len: int | None = None,
        train_len: int | None = None,
        axes: int = 1,
        block_dim: int | None = None,
        per_head: bool = False,
        position_scale: float | None = None,
    ) -> None:
        self.position_dims = check_int("axes", axes, low=1)
        super().__init__(max_len)
        self.head_dim = head_dim_of(dim, heads, head_dim, need="liere")
        g = self.head_dim if block_dim is None else check_int("block_dim", block_dim, low=2)
        if g > self.head_dim:
            raise ValueError(f"block_dim must be 2..head_dim={self.head_dim}, got {g}")
        set_per_head(self, "liere", per_head, heads, "generators")
        self.position_scale = position_scale_of(position_scale, train_len)
        G = (self.head_dim // g) * (heads if self.per_head else 1)
        self.generators = nn.Parameter(torch.rand(axes, G, g, g) * (2 * math.pi))

    def generator_tensor(self) -> torch.Tensor:
        return self.generators

    def extra_repr(self) -> str:
        P, G, g, _ = self.generators.shape
        return f"head_dim={self.head_dim}, axes={P}, blocks={G}x{g}, per_head={self.per_head}"


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


ENCODINGS: dict[str, type[PositionalEncoding]] = {"liere": LieRE, "comrope": ComRoPE}
