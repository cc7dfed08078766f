"""Axial RoPE over any number of position axes: 1-D text, 2-D images, 3-D video, ..."""

from __future__ import annotations

from posenc.base import PositionalEncoding
from posenc.checks import check_choice, check_float, check_int
from posenc.encodings.rotary import MultiAxisRotary
from posenc.functional.rotary_learned import AXIAL_FREQS, axial_angles, axial_inv_freq


class RoPEND(MultiAxisRotary):
    """Axial rotary embedding over `axes` position axes (Heo et al. 2024's RoPE-Axial,
    rotary-embedding-torch's axial mode): positions [T] / [B, T] (+ [P]).

    Axis a turns rotary pairs a * n .. (a + 1) * n - 1, n = R / (2 axes), by p_a * f_j with
    `freqs` "lang": f_j = base^(-2j / (R / axes)) (RoPE's) or "pixel":
    f_j = linspace(1, max_freq / 2, n)_j * pi (for coordinates in [-1, 1]; negative ones are
    taken). R must be a multiple of 2 * axes. axes=1 is `rope`.
    """

    paper = "Heo et al. 2024"
    summary = "axial RoPE over any number of axes: each axis turns its own share of the pairs"
    signed = True

    def __init__(
        self,
        *,
        dim: int | None = None,
        heads: int | None = None,
        head_dim: int | None = None,
        max_len: int | None = None,
        axes: int = 1,
        base: float = 10000.0,
        freqs: str = "lang",
        max_freq: float = 10.0,
        layout: str = "half",
        rotary_dim: int | None = None,
    ) -> None:
        self.position_dims = check_int("axes", axes, low=1)
        self._multiple = 2 * axes
        super().__init__(dim=dim, heads=heads, head_dim=head_dim, max_len=max_len, base=base,
                         layout=layout, rotary_dim=rotary_dim)  # fmt: skip
        self.freqs = check_choice("freqs", freqs, AXIAL_FREQS)
        self.max_freq = check_float("max_freq", max_freq, gt=0)

    def _angles(self, positions, r, dtype):
        inv_freq = axial_inv_freq(r, self.position_dims, self.base, self.freqs, self.max_freq)
        return axial_angles(positions, inv_freq, self.position_dims, dtype)

    def extra_repr(self) -> str:
        return super().extra_repr() + f", axes={self.position_dims}, freqs={self.freqs!r}"


ENCODINGS: dict[str, type[PositionalEncoding]] = {"rope_nd": RoPEND}
