"""rope_heads: RoPE on the last `rotate_heads` query heads, no positional encoding on the rest."""

from __future__ import annotations

import torch

from posenc.base import PositionalEncoding
from posenc.checks import check_int
from posenc.encodings.rotary import RoPE


class PartialHeadsRoPE(PositionalEncoding):
    """RoPE on the last `rotate_heads` query heads (default H // 2), no positional encoding on
    the others (x-transformers' `rotate_num_heads`). The RoPE keywords apply to the rotated
    heads (`self.rope`). Under grouped-query attention rotate_heads must fill whole groups (a
    multiple of H / Hkv): the last rotate_heads / (H / Hkv) kv heads rotate.
    """

    family = "rotary"
    provides = frozenset({"rotate", "angles"})
    paper = "x-transformers rotate_num_heads (per-head NoPE)"
    summary = "RoPE on the last rotate_heads heads, no positional encoding on the rest"

    def __init__(
        self,
        *,
        dim: int | None = None,
        heads: int | None = None,
        head_dim: int | None = None,
        max_len: int | None = None,
        train_len: int | None = None,
        rotate_heads: int | None = None,
        base: float = 10000.0,
        layout: str = "half",
        rotary_dim: int | None = None,
        scaling: dict | None = None,
    ) -> None:
        if heads is None:
            raise ValueError("rope_heads needs heads= (the number of query heads H, >= 1)")
        self_heads = check_int("heads", heads, low=1)
        if rotate_heads is None:
            rotate_heads = self_heads // 2
        check_int("rotate_heads", rotate_heads, low=0)
        if rotate_heads > self_heads:
            raise ValueError(f"rotate_heads must be in 0..heads={self_heads}, got {rotate_heads}")
        super().__init__()
        self.rope = RoPE(
            dim=dim, heads=heads, head_dim=head_dim, max_len=max_len, train_len=train_len,
            base=base, layout=layout, rotary_dim=rotary_dim, scaling=scaling,
        )  # fmt: skip
        self.max_len, self.per_document = self.rope.max_len, self.rope.per_document
        self.heads, self.rotate_heads = self_heads, rotate_heads

    def rotate(self, q, k, q_pos, k_pos):
        if q.dim() != 4 or k.dim() != 4:
            raise ValueError(
                f"q and k must be [B, H, T, Dh], got {tuple(q.shape)} and {tuple(k.shape)}"
            )
        H, Hkv, n = q.shape[1], k.shape[1], self.rotate_heads
        if H == Hkv == 1 and self.heads > 1:  # a one-head probe (posenc explain): a rotated head
            n = min(n, 1)
        elif self.heads != H or H % Hkv:
            raise ValueError(
                f"rope_heads was built for heads={self.heads}; q has {H} heads and k {Hkv} "
                f"(H must equal heads and be a multiple of Hkv)"
            )
        group = H // Hkv
        if n % group:
            raise ValueError(
                f"rotate_heads={n} must be a multiple of the query heads per kv head "
                f"(H / Hkv = {group}) under grouped-query attention: a kv head serves its "
                f"whole group, rotated or not"
            )
        if n == 0:  # nope: positions are still checked (max_len), nothing rotates
            return self.each(lambda x, pos, name: x, q, k, q_pos, k_pos)
        nk = n // group
        qr, kr = self.rope.rotate(q[:, H - n :], k[:, Hkv - nk :], q_pos, k_pos)
        return torch.cat([q[:, : H - n], qr], dim=1), torch.cat([k[:, : Hkv - nk], kr], dim=1)

    def angles(self, positions):
        return self.rope.angles(positions)  # the rotated heads' angles

    def extra_repr(self) -> str:
        return f"rotate_heads={self.rotate_heads}, heads={self.heads}"


ENCODINGS: dict[str, type[PositionalEncoding]] = {"rope_heads": PartialHeadsRoPE}
