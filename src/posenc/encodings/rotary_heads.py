"""RoPE that treats the heads differently: rope_heads rotates the last `rotate_heads` query heads
and leaves the rest without positional encoding; rope_pp (RoPE++, Liu et al. 2025) scores half
the heads by the imaginary part of RoPE's complex q.k, Re(z * -i): an imaginary head's query is
the RoPE-rotated query turned a further quarter turn back."""

from __future__ import annotations

import torch

from posenc.base import PositionalEncoding
from posenc.checks import check_choice, check_int
from posenc.encodings.rotary import RoPE
from posenc.functional.rotary import rope_pairs

MODES = ("split", "eh", "half")  # rope_pp's


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


def quarter_turn(x: torch.Tensor, rotary_dim: int, layout: str) -> torch.Tensor:
    """x [..., Dh] -> each rotary pair (a, b) of the first R channels turned to (b, -a)."""
    a, b = rope_pairs(x[..., :rotary_dim], layout)
    turned = torch.cat((b, -a), -1) if layout == "half" else torch.stack((b, -a), -1).flatten(-2)
    return torch.cat((turned, x[..., rotary_dim:]), -1) if rotary_dim < x.shape[-1] else turned


class RoPEPP(RoPE):
    """RoPE++, matched to the authors' LlamaAttention.apply_rotary_pos_emb (OpenMOSS/rope_pp).

    Half of the H query heads are real (RoPE's), half imaginary; keys and values are shared.
    `mode`: "split" (imag_mode "imagx": odd heads imaginary), "eh" (RoPE++_EH, "imag1": heads
    2h and 2h + 1 the real and imaginary head of head 2h's query; their scores, not their
    halved projection), "half" ("imagh": heads H // 2 .. H - 1 imaginary). RoPE++_EC (2 H
    outputs) needs more output heads than queries: not here. The other keywords are RoPE's.
    """

    paper = "Liu et al. 2025, arXiv 2512.07525"
    summary = "RoPE++: half the heads score by the imaginary part of RoPE's complex q.k"

    def __init__(
        self,
        *,
        dim: int | None = None,
        heads: int | None = None,
        head_dim: int | None = None,
        max_len: int | None = None,
        train_len: int | None = None,
        mode: str = "split",
        base: float = 10000.0,
        layout: str = "half",
        rotary_dim: int | None = None,
        scaling: dict | None = None,
    ) -> None:
        self.mode = check_choice("mode", mode, MODES)
        if heads is not None:
            self.check_heads(heads)  # eh pairs the heads
        super().__init__(dim=dim, heads=heads, head_dim=head_dim, max_len=max_len,
                         train_len=train_len, base=base, layout=layout, rotary_dim=rotary_dim,
                         scaling=scaling)  # fmt: skip

    def check_heads(self, heads: int) -> None:
        if self.mode == "eh" and heads % 2:
            raise ValueError(
                f"rope_pp mode='eh' needs an even number of heads (pairs of a real and an "
                f"imaginary head), got {heads}"
            )

    def imaginary(self, heads: int, device) -> torch.Tensor:
        """[H] bool: which heads score by the imaginary part."""
        h = torch.arange(heads, device=device)
        return h % 2 == 1 if self.mode != "half" else h >= heads // 2

    def rotate(self, q, k, q_pos, k_pos):
        """Real heads RoPE-rotated, imaginary heads' queries a quarter turn further."""
        H = q.shape[1]
        self.check_heads(H)
        q, k = super().rotate(q, k, q_pos, k_pos)
        if self.mode == "eh":  # head 2h + 1 reads head 2h's query
            q = q[:, 0::2].repeat_interleave(2, dim=1)
        turned = quarter_turn(q, self.rotary_dim(q.shape[-1]), self.layout)
        imag = self.imaginary(H, q.device)[:, None, None]  # [H, 1, 1]
        return torch.where(imag, turned, q), k

    def extra_repr(self) -> str:
        return super().extra_repr() + f", mode={self.mode!r}"


ENCODINGS: dict[str, type[PositionalEncoding]] = {"rope_heads": PartialHeadsRoPE, "rope_pp": RoPEPP}
