"""Multimodal RoPE (Qwen2-VL; interleaved as in Qwen3-VL). Positions are (t, h, w) on a
trailing axis, [T, 3] or [B, T, 3] (transformers' position_ids.permute(1, 2, 0));
posenc.functional.mrope_positions builds them. The math is posenc.functional.mrope's.
"""

from __future__ import annotations

from posenc import functional as PF
from posenc.base import PositionalEncoding
from posenc.checks import check_bool
from posenc.encodings.rotary import MultiAxisRotary
from posenc.functional.mrope import check_mrope_section, mrope_default_section


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


ENCODINGS: dict[str, type[PositionalEncoding]] = {"mrope": MRoPE}
