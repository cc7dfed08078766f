"""Rotary encodings: rotate queries and keys so that q.k depends on the position difference.

The head dim Dh comes from `head_dim`, else `dim // heads`, else `dim`, else from q at the first
call; the rotary dim R (<= Dh, even) from `rotary_dim`, else Dh. The math is posenc.functional's.
"""

from __future__ import annotations

import math

import torch

from posenc import functional as PF
from posenc.base import PositionalEncoding
from posenc.checks import check_bool, check_float, check_int, outside_graph
from posenc.functional.rope_scaling import KNOWN_KEYS, rope_type_of


def head_dim_of(
    dim: int | None, heads: int | None, head_dim: int | None, need: str | None = None
) -> int | None:
    """Dh from the standard keywords, or None when none is given (a ValueError naming `need`,
    the encoding, where it needs one)."""
    for name, value in (("dim", dim), ("heads", heads), ("head_dim", head_dim)):
        if value is not None:
            check_int(name, value, low=1)
    if head_dim is None and dim is not None:
        if heads and dim % heads:
            raise ValueError(f"dim={dim} must be divisible by heads={heads} (Dh = dim // heads)")
        head_dim = dim // (heads or 1)
    if head_dim is None and need:
        raise ValueError(f"{need} needs the head dim: pass head_dim= (or dim= and heads=)")
    return head_dim


def set_per_head(enc, name: str, per_head: bool, heads: int | None, what: str) -> None:
    """enc.per_head and enc.heads; per_head=True needs heads (`what` the encoding has per head)."""
    enc.per_head, enc.heads = check_bool("per_head", per_head), heads
    enc.per_head_of = name, what
    if enc.per_head and heads is None:
        raise ValueError(f"{name}: per_head=True needs heads= (the number of query heads)")


def check_per_head(enc, q: torch.Tensor, k: torch.Tensor) -> None:
    """A per_head encoding's (set_per_head) q and k must both have its `heads` heads."""
    if getattr(enc, "per_head", False) and not q.shape[1] == k.shape[1] == enc.heads:
        name, what = enc.per_head_of
        raise ValueError(
            f"{name} per_head=True has {what} for heads={enc.heads}; q and k have "
            f"{q.shape[1]} and {k.shape[1]} heads (grouped keys cannot share them): use "
            "per_head=False or as many kv heads as heads"
        )


def check_head_dim(q: torch.Tensor, k: torch.Tensor, head_dim: int, name: str) -> None:
    if q.shape[-1] != head_dim or k.shape[-1] != head_dim:
        raise ValueError(
            f"q/k have head dim {q.shape[-1]}, but {name} was built with head_dim={head_dim}"
        )


def check_rotary_dim(rotary_dim: int, head_dim: int | None, multiple: int = 2) -> int:
    check_int("rotary_dim", rotary_dim)
    if rotary_dim < multiple or rotary_dim % multiple:
        what = "pairs rotate" if multiple == 2 else "as many pairs for every axis"
        raise ValueError(
            f"rotary_dim must be a positive multiple of {multiple} ({what}), got {rotary_dim}"
        )
    if head_dim is not None and rotary_dim > head_dim:
        raise ValueError(
            f"rotary_dim must be <= head_dim={head_dim} (allowed: multiples of {multiple} "
            f"up to {head_dim}), got {rotary_dim}"
        )
    return rotary_dim


class RotaryEncoding(PositionalEncoding):
    """Shared set-up of the rotary family (head dim, rotary dim, base, layout, max_len), and
    rotate and angles derived from `_angles(positions, R, dtype) -> [..., R/2]`, the angle of
    each rotary pair: a new rotary encoding defines _angles alone (rope_2d, mrope, rope_nd,
    grape_m do; fope its _cos_sin too; rope and xpos override rotate and angles)."""

    family = "rotary"
    provides = frozenset({"rotate", "angles"})
    _multiple = 2  # the rotary dim must be a multiple of this
    signed = False  # negative coordinates allowed (rope_nd's grid in [-1, 1])

    def __init__(self, dim, heads, head_dim, base, layout, rotary_dim, max_len=None) -> None:
        super().__init__(max_len)
        self.head_dim = head_dim_of(dim, heads, head_dim)
        check_float("base", base, gt=1)
        if layout not in PF.ROPE_LAYOUTS:
            raise ValueError(f"layout must be one of {PF.ROPE_LAYOUTS}, got {layout!r}")
        self.base, self.layout = float(base), layout
        if rotary_dim is not None:
            rotary_dim = check_rotary_dim(rotary_dim, self.head_dim, self._multiple)
        self._rotary_dim = rotary_dim

    def rotary_dim(self, head_dim: int | None = None) -> int:
        """R for inputs of head dim `head_dim` (default: the constructed one)."""
        dh = self.head_dim if head_dim is None else head_dim
        if self.head_dim is not None and head_dim is not None and head_dim != self.head_dim:
            raise ValueError(
                f"q/k have head dim {head_dim}, but this encoding was built with "
                f"head_dim={self.head_dim}"
            )
        if self._rotary_dim is not None:
            return check_rotary_dim(self._rotary_dim, dh, self._multiple)
        if dh is None:
            raise ValueError("head_dim is needed: pass head_dim= (or dim= and heads=)")
        if dh % self._multiple:
            raise ValueError(
                f"head_dim={dh} is not a multiple of {self._multiple}: pass rotary_dim= "
                f"(a multiple of {self._multiple}, <= {dh}) to rotate part of each head"
            )
        return dh

    def _angles(self, positions: torch.Tensor, r: int, dtype: torch.dtype) -> torch.Tensor:
        """positions [...] (+ [P]) -> [..., R/2] angles, as PF.position_angles(dtype) gives."""
        raise NotImplementedError

    def _cos_sin(self, positions: torch.Tensor, r: int, dtype: torch.dtype):
        """positions -> cos, sin [..., R/2] rotate() turns the pairs by (FoPE: its series)."""
        angles = self._angles(positions, r, dtype)
        return angles.cos(), angles.sin()

    def rotate(self, q, k, q_pos, k_pos):
        r = self.rotary_dim(q.shape[-1])
        check_per_head(self, q, k)

        def turn(x, pos, name):
            cos, sin = self._cos_sin(pos, r, x.dtype)  # [..., R/2]
            return PF.apply_rope(x, cos=cos, sin=sin, layout=self.layout, engine="reference")

        return self.each(
            turn, q, k, q_pos, k_pos, position_dims=self.position_dims, signed=self.signed
        )

    def angles(self, positions):
        positions = self.check_positions(
            positions, position_dims=self.position_dims, signed=self.signed
        )
        return self._angles(positions, self.rotary_dim(), torch.float64)  # unreduced

    def extra_repr(self) -> str:
        return f"head_dim={self.head_dim}, base={self.base}, layout={self.layout!r}"


class MultiAxisRotary(RotaryEncoding):
    """A rotary encoding of positions [..., P] (mrope, rope_nd, the video RoPEs): pair j turns
    with stream pair_axes(R)[j] of streams(positions) at frequency inv_freq(R)[j] (RoPE's)."""

    def __init__(self, *, dim=None, heads=None, head_dim=None, max_len=None, base=10000.0,
                 layout="half", rotary_dim=None) -> None:  # fmt: skip
        super().__init__(dim, heads, head_dim, base, layout, rotary_dim, max_len)
        if self.head_dim is not None or rotary_dim is not None:
            self.rotary_dim()  # fail now on a head dim that does not split into the axes

    def streams(self, positions: torch.Tensor) -> torch.Tensor:
        """positions [..., P] -> the index streams the pairs turn with (the positions here)."""
        return positions

    def pair_axes(self, rotary_dim: int) -> list[int]:
        """The stream of each of the R/2 pairs."""
        raise NotImplementedError

    def inv_freq(self, rotary_dim: int) -> torch.Tensor:
        return PF.rope_inv_freq(rotary_dim, self.base)[0]  # [R/2]

    def _angles(self, positions, r, dtype):
        inv_freq = self.inv_freq(r).to(positions.device)  # [R/2]
        dtype = torch.float64 if dtype == torch.float64 else torch.float32
        return PF.mrope_angles(self.streams(positions), inv_freq, self.pair_axes(r), dtype)


class RoPE(RotaryEncoding):
    """Rotary position embedding (Su et al. 2021), with Hugging Face rope scaling.

    `scaling` is a `rope_scaling` dict (posenc.functional.rope_scaling); its
    partial_rotary_factor sets the rotary dim (for proportional, the pairs that turn); a
    missing `max_position_embeddings` is taken from `train_len`. The length-dependent scalings
    (dynamic, longrope) use seq_len = max key position + 1 for q and k alike at each call, so
    keys cached unrotated never carry a stale base.
    """

    paper = "Su et al. 2021"
    summary = "rotary position embedding: rotate q, k pairs by position * frequency"

    def __init__(
        self,
        *,
        dim: int | None = None,
        heads: int | None = None,
        head_dim: int | None = None,
        max_len: int | None = None,
        train_len: int | None = None,
        base: float = 10000.0,
        layout: str = "half",
        rotary_dim: int | None = None,
        scaling: dict | None = None,
    ) -> None:
        super().__init__(dim, heads, head_dim, base, layout, rotary_dim, max_len)
        self.rope_type = rope_type_of(scaling)  # warns once about unrecognized keys, dropped here
        self.scaling = {k: v for k, v in (scaling or {}).items() if k in KNOWN_KEYS}
        if self.scaling.get("rope_theta"):  # a ported v5 rope_parameters dict names its base
            self.base = float(self.scaling["rope_theta"])
        hint = self.rope_type != "default" and "max_position_embeddings" not in self.scaling
        if hint and train_len is not None:
            self.scaling["max_position_embeddings"] = check_int("train_len", train_len, low=1)
        prf = self.scaling.get("partial_rotary_factor")
        partial = prf is not None and self.rope_type != "proportional"  # p-RoPE: the whole head
        if rotary_dim is None and partial and self.head_dim is not None:
            self._rotary_dim = check_rotary_dim(int(self.head_dim * prf), self.head_dim)
        self.per_call = self.rope_type in ("dynamic", "dynamic_yarn", "longrope")
        self.per_document = not self.per_call  # seq_len is the batch's longest: not per doc
        self.reset_buffers()

    def reset_buffers(self) -> None:
        known = self._rotary_dim or self.head_dim
        # a rotary dim is needed to check the scaling keys now; 64 stands in when none is known
        inv_freq, self.attention_factor = PF.rope_inv_freq(
            self.rotary_dim() if known else 64, self.base, self.scaling
        )
        self.set_buffer("inv_freq", inv_freq if known else None)  # [R/2]

    def frequencies(
        self, positions: torch.Tensor, head_dim: int | None = None
    ) -> tuple[torch.Tensor, float]:
        """(inv_freq [R/2] on positions' device, attention_factor) for keys at `positions`."""
        r = self.rotary_dim(head_dim)
        if not self.per_call and self.inv_freq is not None and 2 * self.inv_freq.numel() == r:
            return self.inv_freq.to(positions.device), self.attention_factor
        known = self.per_call and positions.numel() and not positions.is_meta  # meta: no length
        seq_len = math.floor(positions.max().item()) + 1 if known else None
        inv_freq, af = PF.rope_inv_freq(r, self.base, self.scaling, seq_len)
        return inv_freq.to(positions.device), af

    def rotate(self, q, k, q_pos, k_pos):
        inv_freq, af = self.frequencies(k_pos, q.shape[-1])
        same = q_pos is k_pos  # cos/sin built once for both (same compute dtype)
        k_pos = self.check_positions(k_pos, name="k_pos")
        q_pos = k_pos if same else self.check_positions(q_pos, name="q_pos")
        k_cs = PF.rope_cos_sin(k_pos, inv_freq, af, k.dtype)
        fp64 = (q.dtype == torch.float64) != (k.dtype == torch.float64)
        q_cs = k_cs if same and not fp64 else PF.rope_cos_sin(q_pos, inv_freq, af, q.dtype)
        q = PF.apply_rope(q, cos=q_cs[0], sin=q_cs[1], layout=self.layout)
        return q, PF.apply_rope(k, cos=k_cs[0], sin=k_cs[1], layout=self.layout)

    def angles(self, positions):
        positions = self.check_positions(positions)
        inv_freq, _ = self.frequencies(positions)
        return PF.position_angles(positions, inv_freq, torch.float64)

    def extra_repr(self) -> str:
        return super().extra_repr() + (f", scaling={self.scaling}" if self.scaling else "")


class XPos(RotaryEncoding):
    """xPos (Sun et al. 2022): RoPE whose pairs also decay with distance.

    Pair i has zeta_i = (2i + 0.4 R) / (1.4 R); queries at n are scaled by
    zeta^((n - c) / scale_base), keys at m by zeta^(-(m - c) / scale_base), c = ceil((min k_pos
    + max k_pos) / 2) (rotary-embedding-torch's T // 2): past ~17k tokens from c in float32
    (~1.3k in float16) rotate() raises a ValueError. Cache keys unrotated.
    """

    paper = "Sun et al. 2022"
    summary = "xPos: RoPE plus a per-pair exponential decay with distance"
    bidirectional = False  # keys after the query would grow with distance instead of decay

    def __init__(
        self,
        *,
        dim: int | None = None,
        heads: int | None = None,
        head_dim: int | None = None,
        max_len: int | None = None,
        base: float = 10000.0,
        scale_base: float = 512,
        layout: str = "half",
        rotary_dim: int | None = None,
    ) -> None:
        super().__init__(dim, heads, head_dim, base, layout, rotary_dim, max_len)
        self.scale_base = check_float("scale_base", scale_base, gt=0)

    def zeta(self, rotary_dim: int) -> torch.Tensor:
        """[R/2] float64 decay bases zeta_i = (2i + 0.4 R) / (1.4 R)."""
        two_i = torch.arange(0, rotary_dim, 2, dtype=torch.float64)
        return (two_i + 0.4 * rotary_dim) / (1.4 * rotary_dim)

    def rotate(self, q, k, q_pos, k_pos):
        q_pos = self.check_positions(q_pos, name="q_pos")
        k_pos = self.check_positions(k_pos, name="k_pos")
        r = self.rotary_dim(q.shape[-1])
        log_zeta = self.zeta(r).log().to(k_pos.device)
        center = 0  # ceil((min + max) / 2) as a float64 tensor: no .item(), no graph break
        if k_pos.numel():
            center = ((k_pos.min().double() + k_pos.max().double()) / 2).ceil()
        if k_pos.numel() and not k_pos.is_meta:  # meta tensors have no values to check
            self._check_reach(q_pos, k_pos, center, log_zeta, q.dtype)
        out = []
        for x, pos, sign in ((q, q_pos, 1.0), (k, k_pos, -1.0)):
            cos, sin = self._cos_sin(pos, r, x.dtype)
            power = (pos.double() - center)[..., None] * (sign / self.scale_base)
            scale = (power * log_zeta).exp().to(cos.dtype)  # zeta^(+-(n - c) / scale_base)
            out.append(PF.apply_rope(x, cos=cos * scale, sin=sin * scale, layout=self.layout,
                                     engine="reference"))  # fmt: skip
        return out[0], out[1]

    @outside_graph  # reads two numbers: outside a compiled graph
    def _check_reach(self, q_pos, k_pos, center, log_zeta, dtype) -> None:
        """ValueError where a scale zeta^(+-(n - c) / scale_base) would overflow `dtype`."""
        far = max((q_pos.double() - center).abs().max().item(),
                  (k_pos.double() - center).abs().max().item())  # fmt: skip
        # a query before the centre and a key after it both grow: each may use half the range
        # (a masked future pair's q.k must stay finite too), less a factor 100 for |q| |k| Dh
        room = (math.log(torch.finfo(dtype).max) - math.log(100.0)) / 2
        reach = room * self.scale_base / float(-log_zeta.min())
        if far > reach:
            raise ValueError(
                f"xpos: positions reach {far:.0f} tokens from the keys' centre, past xPos's "
                f"reach of {reach:.0f} in {dtype} (scale_base={self.scale_base:g}); use a larger "
                "scale_base, float64 inputs, or rope"
            )

    def _angles(self, positions, r, dtype):  # RoPE's (angles() shows no decay)
        inv_freq, _ = PF.rope_inv_freq(r, self.base)
        return PF.position_angles(positions, inv_freq.to(positions.device), dtype)

    def extra_repr(self) -> str:
        return super().extra_repr() + f", scale_base={self.scale_base}"


class RoPE2D(MultiAxisRotary):
    """Axial 2-D RoPE for images (Heo et al. 2024; as rotary-embedding-torch's axial freqs).

    Positions [..., 2] = (row, col). The first R/4 rotary pairs turn with the row, the last R/4
    with the column, each axis with the frequencies of a 1-D RoPE of rotary dim R/2:
    angles = [row * f | col * f], f_j = base^(-4j / R). R must be a multiple of 4.
    """

    paper = "Heo et al. 2024"
    summary = "axial 2-D RoPE: half the rotary pairs follow the row, half the column"
    position_dims = 2
    _multiple = 4

    def _angles(self, positions, r, dtype):
        inv_freq, _ = PF.rope_inv_freq(r // 2, self.base)  # [R/4] per axis
        return PF.position_angles(positions, inv_freq.to(positions.device), dtype).flatten(-2)


ENCODINGS: dict[str, type[PositionalEncoding]] = {"rope": RoPE, "xpos": XPos, "rope_2d": RoPE2D}
