"""PoPE, polar-coordinate position embedding (Gopalakrishnan et al. 2025): each channel c of q
and k becomes a 2-D vector of length softplus(x_c) at angle p * w_c, so q.k = sum_c
softplus(q_c) softplus(k_c) cos((i - j) w_c - delta_c): q and k twice as wide as the head."""

from __future__ import annotations

import math

import torch
from torch import nn

from posenc.base import PositionalEncoding
from posenc.checks import check_choice, check_float
from posenc.encodings.rotary import check_head_dim, head_dim_of
from posenc.functional.absolute import position_angles
from posenc.functional.rotary import rope_align
from posenc.functional.rotary_learned import apply_pope, pope_inv_freq

BIAS_INITS = ("zeros", "uniform")


class PoPE(PositionalEncoding):
    """Polar position embedding, matched to x-transformers' PolarEmbedding + its Attention.

    Frequencies w_c = base^(-c / Dh). A learned phase delta [H, Dh] (clamped to [-2 pi, 0];
    `bias_init` "zeros" or "uniform") shifts the angle per head and channel: on the queries'
    angles (-delta) where x-transformers puts it on the keys', the same scores, so grouped
    keys need no per-head copy.
    """

    family = "rotary"
    provides = frozenset({"rotate", "angles"})
    paper = "Gopalakrishnan et al. 2025"
    summary = "PoPE: softplus magnitudes from content, angles from position only (2 Dh wide)"
    trainable = True

    def __init__(
        self,
        *,
        dim: int | None = None,
        heads: int | None = None,
        head_dim: int | None = None,
        max_len: int | None = None,
        base: float = 10000.0,
        bias_init: str = "zeros",
    ) -> None:
        super().__init__(max_len)
        self.head_dim = head_dim_of(dim, heads, head_dim, need="pope")
        self.base = check_float("base", base, gt=1)
        check_choice("bias_init", bias_init, BIAS_INITS)
        self.heads = heads
        self.phase = nn.Parameter(torch.zeros(heads or 1, 1, self.head_dim))  # delta [H, 1, Dh]
        if bias_init == "uniform":
            with torch.no_grad():
                self.phase.uniform_(-2 * math.pi, 0.0)
        # a plain attribute, not a buffer: model.to(bfloat16) must not round the frequencies
        with torch.device("cpu"):  # moved to the positions' device per call (not meta)
            self.inv_freq = pope_inv_freq(self.head_dim, base)

    def delta(self) -> torch.Tensor:
        """The phase [H, 1, Dh] in use, clamped to [-2 pi, 0]."""
        return self.phase.clamp(-2 * math.pi, 0.0)

    def rotate(self, q, k, q_pos, k_pos):
        """q [B, H, Tq, Dh], k [B, Hkv, Tk, Dh] -> q, k [..., 2 Dh]."""
        check_head_dim(q, k, self.head_dim, "pope")
        if self.phase.shape[0] not in (1, q.shape[1]) and q.shape[1] != 1:
            raise ValueError(
                f"q has {q.shape[1]} heads, but pope was built with heads={self.heads}"
            )

        def turn(x, pos, name):
            angles = position_angles(pos, self.inv_freq.to(pos.device), x.dtype)  # [(B,) T, Dh]
            phase = self.delta() if name == "q_pos" else None  # on the queries' angles
            return apply_pope(x, rope_align(angles, x, name), phase)

        return self.each(turn, q, k, q_pos, k_pos)

    def angles(self, positions):
        """positions [T] or [B, T] -> [(B,) T, Dh] float64 (the phase, an offset, not shown)."""
        positions = self.check_positions(positions)
        return position_angles(positions, self.inv_freq.to(positions.device), torch.float64)

    def extra_repr(self) -> str:
        return f"head_dim={self.head_dim}, heads={self.heads}, base={self.base}"


ENCODINGS: dict[str, type[PositionalEncoding]] = {"pope": PoPE}
