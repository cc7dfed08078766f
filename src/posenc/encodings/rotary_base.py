"""The shared set-up of the rotary encodings (posenc.encodings.rotary): the head dim Dh from
`head_dim`, else `dim // heads`, else `dim`, else from q at the first call; the rotary dim R
(<= Dh, a multiple of 2, or 4 for rope_2d) from `rotary_dim`, else Dh; base and layout."""

from __future__ import annotations

import torch

from posenc import functional as PF
from posenc.base import PositionalEncoding
from posenc.checks import check_float, check_int


def head_dim_of(dim: int | None, heads: int | None, head_dim: int | None) -> int | None:
    """Dh from the standard keywords, or None when none is given."""
    for name, value in (("dim", dim), ("heads", heads), ("head_dim", head_dim)):
        if value is not None:
            check_int(name, value, low=1)
    if head_dim is not None:
        return head_dim
    if dim is None:
        return None
    if heads and dim % heads:
        raise ValueError(f"dim={dim} must be divisible by heads={heads} (Dh = dim // heads)")
    return dim // (heads or 1)


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
    """Shared set-up of the rotary family: head dim, rotary dim, base, layout; and rotate and
    angles derived from one method, `_angles(positions, R, dtype) -> [..., R/2]`, the angle of
    each rotary pair: a new rotary encoding defines _angles alone (rope_2d, mrope, rope_nd do;
    rope, xpos and fope override rotate and angles for their scalings / decay / spectra).
    `signed`: whether negative coordinates are taken (rope_nd's, as rotary-embedding-torch)."""

    family = "rotary"
    provides = frozenset({"rotate", "angles"})
    _multiple = 2  # the rotary dim must be a multiple of this
    signed = False  # negative coordinates allowed (rope_nd's grid in [-1, 1])

    def __init__(self, *, dim, heads, head_dim, base, layout, rotary_dim) -> None:
        super().__init__()
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
        """positions [...] (+ [P]) -> [..., R/2] angles of rotary dim r: float64 for `dtype`
        float64, else float32 reduced mod 2 pi (PF.position_angles). What a subclass defines
        (unless it overrides rotate and angles itself)."""
        raise NotImplementedError

    def rotate(
        self, q: torch.Tensor, k: torch.Tensor, q_pos: torch.Tensor, k_pos: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """q [B, H, Tq, Dh], k [B, Hkv, Tk, Dh], positions [Tq] / [B, Tq] (+ [P]) -> rotated."""
        r = self.rotary_dim(q.shape[-1])
        out = []
        for x, pos, name in ((q, q_pos, "q_pos"), (k, k_pos, "k_pos")):
            pos = self.check_positions(
                pos, name=name, position_dims=self.position_dims, signed=self.signed
            )
            angles = self._angles(pos, r, x.dtype)  # [..., R/2]
            cos, sin = angles.cos(), angles.sin()
            out.append(PF.apply_rope(x, cos=cos, sin=sin, layout=self.layout, engine="reference"))
        return out[0], out[1]

    def angles(self, positions: torch.Tensor) -> torch.Tensor:
        """positions [T] or [B, T] (+ [P]) -> [T, R/2] (or [B, T, R/2]) float64 angles,
        unreduced."""
        positions = self.check_positions(
            positions, position_dims=self.position_dims, signed=self.signed
        )
        return self._angles(positions, self.rotary_dim(), torch.float64)

    def extra_repr(self) -> str:
        return f"head_dim={self.head_dim}, base={self.base}, layout={self.layout!r}"


class MultiAxisRotary(RotaryEncoding):
    """A rotary encoding of P-D positions [..., P] (rope_2d, mrope, rope_nd): each subclass says
    which angle each rotary pair gets (_angles over [..., P]); rotate and angles follow, as for
    every RotaryEncoding."""
