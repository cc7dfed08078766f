"""Video RoPE: multimodal RoPE whose frequency allocation and index layout are made for video.

    rotate(q [B, H, Tq, Dh], k [B, Hkv, Tk, Dh], q_pos, k_pos) -> (q, k)
    angles(positions) -> [T, Dh/2] float64, the rotation angle of each pair

videorope  VideoRoPE (Wei et al. 2025): (t, h, w) positions [..., 3]; h and w alternate over
           the highest-frequency pairs, t takes the lowest (LTA). Its layout: diagonal_positions
           (diagonal layout, temporal spacing 2).
hope       HoPE (Li et al. 2025): VideoRoPE's allocation with the temporal pairs at frequency
           zero (hybrid frequency allocation); its layout: diagonal_positions with a drawn
           temporal spacing (dynamic temporal scaling).
vrope      VRoPE (Liu et al. 2025): positions [..., 3], three of its four index streams (the
           fourth implied), pair j on stream j % 4; its layout: vrope_positions (symmetric
           rotated grid, continuous with the text).

The layouts are posenc.functional.video's. Text tokens have one index on every axis, where
videorope and vrope are plain RoPE and hope is RoPE with its temporal pairs unrotated. The whole
head rotates (R = Dh), layout "half" as the references' rotate_half.
"""

from __future__ import annotations

import torch

from posenc.base import PositionalEncoding
from posenc.encodings.rotary import MultiAxisRotary
from posenc.encodings.rotary_mrope import MRoPE
from posenc.functional.video import videorope_axes, vrope_axes, vrope_streams


class VideoRoPE(MRoPE):
    """VideoRoPE (Wei et al. 2025): multimodal RoPE with low-frequency temporal allocation.

    Positions [..., 3] = (t, h, w), as mrope's (posenc.functional.video.diagonal_positions
    builds VideoRoPE's diagonal layout; h, w may be negative there). `mrope_section` = (t, h, w)
    pair counts summing to Dh/2 (default Qwen2-VL's [16, 24, 24] at Dh = 128, scaled): of the
    Dh/2 pairs (frequency base^(-2j / Dh)), the first h + w turn with h, w, h, w, ...
    alternately and the last t, the lowest frequencies, with t (videorope_axes), so the
    temporal angle barely turns within a context and does not alias. mrope's angles with
    another allocation (pair_axes) and, for HoPE, other frequencies (inv_freq).
    """

    paper = "Wei et al. 2025 (VideoRoPE, ICML 2025, arXiv 2502.05173)"
    summary = "video RoPE: time on the lowest frequencies, h / w interleaved, diagonal layout"
    signed = True  # the diagonal layout centres the grid: h, w below the frame's time
    zero_temporal = False  # HoPE: the temporal pairs do not turn

    def __init__(
        self,
        *,
        dim: int | None = None,
        heads: int | None = None,
        head_dim: int | None = None,
        max_len: int | None = None,
        base: float = 10000.0,
        mrope_section: list[int] | None = None,
        layout: str = "half",
    ) -> None:
        super().__init__(dim=dim, heads=heads, head_dim=head_dim, max_len=max_len, base=base,
                         mrope_section=mrope_section, layout=layout)  # fmt: skip

    def pair_axes(self, rotary_dim: int) -> list[int]:
        """The axis (0 t, 1 h, 2 w) of each of the R/2 pairs: videorope_axes (LTA)."""
        return videorope_axes(self.section(rotary_dim))

    def inv_freq(self, rotary_dim: int) -> torch.Tensor:
        """[R/2] frequencies: RoPE's; HoPE's temporal pairs (the last t) at zero."""
        inv_freq = super().inv_freq(rotary_dim)  # [R/2]
        if self.zero_temporal:
            spatial = sum(self.section(rotary_dim)[1:])
            inv_freq = torch.cat([inv_freq[:spatial], inv_freq.new_zeros(len(inv_freq) - spatial)])
        return inv_freq

    def extra_repr(self) -> str:
        return MultiAxisRotary.extra_repr(self) + (
            f", mrope_section={self.mrope_section or 'default'}"
        )


class HoPE(VideoRoPE):
    """HoPE (Li et al. 2025): VideoRoPE's allocation with the temporal pairs at frequency zero.

    Hybrid frequency allocation: the last t pairs of `mrope_section` (VideoRoPE's temporal,
    lowest-frequency pairs) do not rotate at all (cos 1, sin 0), for reliable long-range
    semantic matching; h and w alternate over the others. Positions [..., 3] as videorope's;
    dynamic temporal scaling lives in the layout (posenc.functional.video.diagonal_positions
    with temporal_scale=HOPE_SCALES drawn per video in training, one float at inference).
    """

    paper = "Li et al. 2025 (HoPE, NeurIPS 2025, arXiv 2505.20444)"
    summary = "video RoPE: temporal pairs at frequency zero (NoPE), h / w on the rest"
    zero_temporal = True


class VRoPE(MultiAxisRotary):
    """VRoPE (Liu et al. 2025): RoPE over four symmetric spatial index streams.

    Positions [..., 3] = streams (a, b, c) (posenc.functional.video.vrope_positions builds
    VRoPE's layout: a frame's grid rotated 45 degrees and read from its four corners, frames
    and text one continuous index); the fourth stream is b + c - a, as it is in that layout
    (vrope_streams). Pair j (frequency base^(-2j / Dh)) turns with stream j % 4, as the
    reference allocates every channel to the spatial streams. Text: all streams equal, RoPE.
    """

    paper = "Liu et al. 2025 (VRoPE, EMNLP 2025)"
    summary = "video RoPE: four symmetric rotated-grid index streams, continuous with text"
    position_dims = 3

    def __init__(
        self,
        *,
        dim: int | None = None,
        heads: int | None = None,
        head_dim: int | None = None,
        max_len: int | None = None,
        base: float = 10000.0,
        layout: str = "half",
    ) -> None:
        super().__init__(dim=dim, heads=heads, head_dim=head_dim, max_len=max_len, base=base,
                         layout=layout)  # fmt: skip

    def streams(self, positions: torch.Tensor) -> torch.Tensor:
        """positions [..., 3] -> the four streams [..., 4] (vrope_streams)."""
        return vrope_streams(positions)

    def pair_axes(self, rotary_dim: int) -> list[int]:
        """Pair j on stream j % 4 (vrope_axes)."""
        return vrope_axes(rotary_dim // 2)


ENCODINGS: dict[str, type[PositionalEncoding]] = {
    "videorope": VideoRoPE,
    "hope": HoPE,
    "vrope": VRoPE,
}
