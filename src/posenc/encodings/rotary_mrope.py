"""Multimodal RoPE (Qwen2-VL; interleaved as in Qwen3-VL) and the video RoPEs made from it
(videorope, hope, vrope: their frequency allocation and index layout made for video; the whole
head rotates). Positions are (t, h, w) on a trailing axis, [T, 3] or [B, T, 3] (transformers'
position_ids.permute(1, 2, 0)); posenc.functional.mrope_positions builds them (video's:
posenc.functional.video). The math is posenc.functional.mrope's and .video's.
"""

from __future__ import annotations

import torch

from posenc import functional as PF
from posenc.base import PositionalEncoding
from posenc.checks import check_bool
from posenc.encodings.rotary import MultiAxisRotary
from posenc.functional.mrope import check_mrope_section, mrope_default_section
from posenc.functional.video import videorope_axes, vrope_axes, vrope_streams


class MRoPE(MultiAxisRotary):
    """Multimodal rotary position embedding (Wang et al. 2024, Qwen2-VL).

    Pair j of the Dh/2 rotary pairs (RoPE's frequencies) turns with the axis mrope_axes gives
    it: `mrope_section` = (t, h, w) pair counts summing to Dh/2, chunked (Qwen2-VL) or, with
    `mrope_interleaved=True`, interleaved t, h, w, t, h, w, ... (Qwen3-VL). Default: Qwen2-VL's
    [16, 24, 24] chunked, Qwen3-VL's [24, 20, 20] interleaved at Dh = 128, scaled.
    """

    paper = "Wang et al. 2024"
    summary = "multimodal RoPE (Qwen2-VL): rotary pairs split into time / height / width"
    position_dims = 3

    def __init__(
        self,
        *,
        dim: int | None = None,
        heads: int | None = None,
        head_dim: int | None = None,
        max_len: int | None = None,
        base: float = 10000.0,
        mrope_section: list[int] | None = None,
        mrope_interleaved: bool = False,
        layout: str = "half",
    ) -> None:
        super().__init__(dim=dim, heads=heads, head_dim=head_dim, max_len=max_len, base=base,
                         layout=layout)  # fmt: skip
        self.interleaved = check_bool("mrope_interleaved", mrope_interleaved)
        self.mrope_section = None
        if mrope_section is not None:
            self.mrope_section = check_mrope_section(mrope_section)
        if self.head_dim is not None:
            self.section(self.rotary_dim())  # fail now on a section that does not fit

    def section(self, rotary_dim: int) -> list[int]:
        """The (t, h, w) pair counts for rotary dim R (mrope_section, else the default)."""
        if self.mrope_section is None:
            return mrope_default_section(rotary_dim // 2, self.interleaved)
        return check_mrope_section(self.mrope_section, rotary_dim // 2)

    def pair_axes(self, rotary_dim: int) -> list[int]:
        return PF.mrope_axes(self.section(rotary_dim), self.interleaved)

    def extra_repr(self) -> str:
        section = self.mrope_section or "default"
        return super().extra_repr() + f", mrope_section={section}, interleaved={self.interleaved}"


class VideoRoPE(MRoPE):
    """VideoRoPE (Wei et al. 2025): multimodal RoPE with low-frequency temporal allocation.

    Positions [..., 3] = (t, h, w), as mrope's (diagonal_positions builds VideoRoPE's layout).
    `mrope_section` = (t, h, w) pair counts as mrope's: the first h + w pairs turn with h, w,
    h, w, ... and the last t, the lowest frequencies, with t (videorope_axes).
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
        return videorope_axes(self.section(rotary_dim))

    def inv_freq(self, rotary_dim: int) -> torch.Tensor:
        """[R/2]: RoPE's; HoPE's temporal pairs (the last t) at zero."""
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
    """HoPE (Li et al. 2025): VideoRoPE's allocation with the temporal pairs at frequency zero
    (hybrid frequency allocation); dynamic temporal scaling is the layout's
    (diagonal_positions with temporal_scale=HOPE_SCALES in training).
    """

    paper = "Li et al. 2025 (HoPE, NeurIPS 2025, arXiv 2505.20444)"
    summary = "video RoPE: temporal pairs at frequency zero (NoPE), h / w on the rest"
    zero_temporal = True


class VRoPE(MultiAxisRotary):
    """VRoPE (Liu et al. 2025): RoPE over four symmetric spatial index streams.

    Positions [..., 3] = streams (a, b, c) of vrope_positions' layout; the fourth is b + c - a
    (vrope_streams). Pair j turns with stream j % 4. Text: all streams equal, RoPE.
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
        return vrope_streams(positions)  # [..., 4]

    def pair_axes(self, rotary_dim: int) -> list[int]:
        return vrope_axes(rotary_dim // 2)


ENCODINGS: dict[str, type[PositionalEncoding]] = {
    "mrope": MRoPE,
    "videorope": VideoRoPE,
    "hope": HoPE,
    "vrope": VRoPE,
}
