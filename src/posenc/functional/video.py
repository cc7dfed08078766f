"""Video RoPE: which rotary pair follows which position axis, and the index layout of a text +
image + video sequence, for VideoRoPE (Wei et al. 2025), HoPE (Li et al. 2025) and VRoPE (Liu
et al. 2025). Token types, grids and angles are as posenc.functional.mrope's.
"""

from __future__ import annotations

import torch

from posenc.checks import check_float, check_int, check_tensor
from posenc.functional.mrope import (
    MAX_PAIRS,
    NAMES,
    _grids,
    _positions,
    _real,
    _row,
    _types,
    check_mrope_section,
)

HOPE_SCALES = (0.5, 0.75, 1.0, 1.25, 1.5)  # HoPE's training choices of the temporal spacing
VROPE_STREAMS = 4  # (h + w, h + w', h' + w, h' + w'), x' = the flipped index


def videorope_axes(section: list[int]) -> list[int]:
    """The axis (0 t, 1 h, 2 w) of each of the sum(section) rotary pairs, section = (t, h, w):
    the first h + w pairs alternate h, w, ...; the last t (the lowest frequencies) follow t."""
    t, h, w = check_mrope_section(section)
    return [1 + j % 2 for j in range(h + w)] + [0] * t


def vrope_axes(half: int) -> list[int]:
    """The stream of each of the `half` rotary pairs: pair j follows stream j % 4 (VRoPE)."""
    if check_int("half", half, low=0) > MAX_PAIRS:
        raise ValueError(f"half must be <= {MAX_PAIRS} rotary pairs, got {half}")
    return [j % VROPE_STREAMS for j in range(half)]


def _scale(value) -> float:
    if check_float("temporal_scale", value, gt=0) > 2**31:
        raise ValueError(f"temporal_scale must be <= 2^31, got {value!r}")
    return float(value)


def _diagonal_block(start: float, thw: tuple[int, int, int], scale: float):
    """[t * h * w, 3] (t, h, w) of one video over its merged grid, and the next text index."""
    t, h, w = thw
    ti = torch.arange(t, dtype=torch.float64) * scale + start  # [t]
    hi = torch.arange(h, dtype=torch.float64) - (h - 1) // 2  # centred: [-(h-1)//2, ...]
    wi = torch.arange(w, dtype=torch.float64) - (w - 1) // 2
    tt, hh, ww = torch.meshgrid(ti, hi, wi, indexing="ij")  # [t, h, w] each
    block = torch.stack([tt, tt + hh, tt + ww], dim=-1).reshape(-1, 3)
    return block, float(ti[-1]) + 1  # text goes on from the last frame's time + 1


def _vrope_block(start: float, thw: tuple[int, int, int], scale: float):
    """[t * h * w, 3] streams (a, b, c) of one video's merged grid, and the next text index."""
    t, h, w = thw
    i, j = torch.arange(h)[:, None], torch.arange(w)[None, :]
    fi, fj = h - 1 - i, w - 1 - j  # flipped row, column
    streams = torch.stack(torch.broadcast_tensors(i + j, i + fj, fi + j, fi + fj), dim=-1)
    span = h + w - 1  # the indices one frame takes: sums of a row and a column index
    frames = (torch.arange(t) * span)[:, None, None, None]  # [t, 1, 1, 1]
    block = (streams[None] + frames + start).reshape(-1, VROPE_STREAMS)
    return block[:, :3].double(), start + t * span  # the fourth is implied: vrope_streams


def _layout(token_types, image_grid_thw, video_grid_thw, merge, attention_mask, block, pad,
            scales):  # fmt: skip
    """[B, T, 3] float64 positions of every row (mrope's _row): text runs count on, each
    vision block is `block(start, merged (t, h, w), scale) -> (positions, next start)`;
    padding at `pad`."""
    types = _types(token_types, (0, 1, 2), "0 (text), 1 (image) or 2 (video)")
    merge = check_int("spatial_merge_size", merge, low=1)
    grids = {1: _grids(NAMES[1], image_grid_thw), 2: _grids(NAMES[2], video_grid_thw)}
    scale = iter(scales(sum(len(g) for g in grids.values())))  # one per vision block, in order
    used = {1: 0, 2: 0}

    def merged(start, kind, i, thw):
        return block(float(start), (thw[0], thw[1] // merge, thw[2] // merge), next(scale))

    def row(kinds):
        return _row(kinds, grids, used, merge, merged, dtype=torch.float64)

    return _positions(token_types, types, grids, used, row, attention_mask, pad, torch.float64)


def diagonal_positions(
    token_types: torch.Tensor,
    image_grid_thw=None,
    video_grid_thw=None,
    *,
    spatial_merge_size: int = 2,
    temporal_scale: float | list[float] = 2.0,
    attention_mask: torch.Tensor | None = None,
    generator: torch.Generator | None = None,
) -> torch.Tensor:
    """(t, h, w) positions [T, 3] or [B, T, 3] of a text + image + video sequence in
    VideoRoPE's diagonal layout (Wei et al. 2025, its get_t_scale_rope_index; HoPE's
    get_dynamic_rope_index).

    A vision block (merged grid (t, h', w')) starting at s puts frame i at time
    s + i * temporal_scale (VideoRoPE's 2) and its row r, column c at (time + r - (h' - 1) // 2,
    time + c - (w' - 1) // 2): the frames run along the diagonal. Text counts on from the last
    frame's time + 1. A list for temporal_scale draws one spacing per block with `generator`
    (HoPE's dynamic temporal scaling, HOPE_SCALES). int64 when every spacing is whole, else
    float32. Padding (attention_mask 0) gets position 1, as the references.
    """
    choices = [_scale(s) for s in _as_list(temporal_scale)]
    if not choices:
        raise ValueError("temporal_scale must be a float > 0 or a non-empty list of them")

    def scales(n: int) -> list[float]:  # one spacing per vision block: the float, or draws
        if isinstance(temporal_scale, int | float):
            return choices * n
        return [choices[i] for i in torch.randint(len(choices), (n,), generator=generator).tolist()]

    out = _layout(token_types, image_grid_thw, video_grid_thw, spatial_merge_size,
                  attention_mask, _diagonal_block, 1, scales)  # fmt: skip
    return out.long() if all(c.is_integer() for c in choices) else out.float()


def vrope_positions(
    token_types: torch.Tensor,
    image_grid_thw=None,
    video_grid_thw=None,
    *,
    spatial_merge_size: int = 2,
    attention_mask: torch.Tensor | None = None,
) -> torch.Tensor:
    """int64 positions [T, 3] or [B, T, 3] of a text + image + video sequence in VRoPE's
    layout (Liu et al. 2025, its VRoPE.generate_nd_positions): its first three index streams
    (vrope_streams gives all four).

    A vision block (merged grid (t, h', w')) starting at s gives the token of frame i, row r,
    column c the streams s + i (h' + w' - 1) + (r + c, r + c', r' + c, r' + c'), r' = h' - 1 - r,
    c' = w' - 1 - c: the grid rotated 45 degrees, read from its four corners. Text continues
    right after the block's last index. Padding (attention_mask 0) gets position 0.
    """
    out = _layout(token_types, image_grid_thw, video_grid_thw, spatial_merge_size,
                  attention_mask, _vrope_block, 0,
                  lambda n: [1.0] * n)  # fmt: skip
    return out.long()


def vrope_streams(positions: torch.Tensor) -> torch.Tensor:
    """positions [..., 3] = streams (a, b, c) -> [..., 4] (a, b, c, b + c - a: a + d = b + c)."""
    check_tensor("positions", positions)
    if positions.dim() < 1 or positions.shape[-1] != 3 or not _real(positions):
        raise ValueError(f"positions must be a real tensor [..., 3] (three streams), got "
                         f"{positions.dtype} {tuple(positions.shape)}")  # fmt: skip
    a, b, c = positions[..., :1], positions[..., 1:2], positions[..., 2:3]
    return torch.cat([positions, b + c - a], dim=-1)


def _as_list(temporal_scale) -> list:
    if isinstance(temporal_scale, int | float):
        return [temporal_scale]
    if not isinstance(temporal_scale, list | tuple):
        raise TypeError(f"temporal_scale must be a float > 0 or a list of them, got "
                        f"{temporal_scale!r}")  # fmt: skip
    return list(temporal_scale)
