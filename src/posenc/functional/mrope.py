"""Multimodal RoPE (Qwen2-VL): which position axis each rotary pair follows, the angles, and the
(t, h, w) positions of a text + image + video (+ audio) sequence: mrope_positions (Qwen2-VL,
Qwen2.5-VL, Qwen3-VL, Qwen3.5, GLM-4V), omni_positions (Qwen2.5-Omni's time-aligned ids).

Positions carry posenc's trailing axis: [T, 3] or [B, T, 3] = (t, h, w). transformers'
position_ids [3, B, T] are `position_ids.permute(1, 2, 0)` here (and ours `.permute(2, 0, 1)`
there). Text tokens have t = h = w, where multimodal RoPE is plain RoPE.
"""

from __future__ import annotations

import itertools

import torch

from posenc.checks import check_bool, check_float, check_int, check_tensor
from posenc.functional.absolute import position_angles

AXES = ("t", "h", "w")
ADVANCES = ("grid", "max")
NAMES = {1: "image_grid_thw", 2: "video_grid_thw"}  # token type -> its grids' name


def mrope_default_section(half: int, interleaved: bool = False) -> list[int]:
    """(t, h, w) pair counts summing to `half` = R/2: Qwen2-VL's [16, 24, 24] (h = w = 3/8 of
    the pairs) chunked, Qwen3-VL's [24, 20, 20] (h = w = 5/16) interleaved, at R = 128."""
    hw = half * 5 // 16 if interleaved else half * 3 // 8
    return [half - 2 * hw, hw, hw]


def check_mrope_section(section, half: int | None = None) -> list[int]:
    """section as a list of 3 ints >= 0 (t, h, w); summing to `half` = R/2 when given."""
    if not isinstance(section, list | tuple):
        raise TypeError(f"mrope_section must be a list of 3 ints (t, h, w), got {section!r}")
    if len(section) != 3:
        raise ValueError(f"mrope_section must have 3 entries (t, h, w), got {list(section)}")
    section = [check_int(f"mrope_section[{a}]", s, low=0) for a, s in zip(AXES, section)]
    if half is not None and sum(section) != half:
        raise ValueError(
            f"mrope_section must sum to head_dim // 2 = {half} (one entry per rotary pair), "
            f"got {section} summing to {sum(section)}"
        )
    return section


def mrope_axes(
    section: list[int], interleaved: bool = False, *, hw_pairs: bool = False
) -> list[int]:
    """The axis (0 t, 1 h, 2 w) of each of the sum(section) rotary pairs.

    Chunked (Qwen2-VL, Qwen2.5-VL): section[0] pairs follow t, then section[1] h, section[2] w.
    Interleaved (Qwen3-VL): pair j follows h if j % 3 == 1 and j < 3 section[1], w if
    j % 3 == 2 and j < 3 section[2], else t (so t, h, w, t, h, w, ..., then t).
    hw_pairs (ERNIE-4.5-VL, whose section is (h, w, t) with section[0] == section[1]): the first
    section[0] + section[1] pairs alternate h, w (h, w, h, w, ...), the last section[2] follow t.
    """
    if check_bool("hw_pairs", hw_pairs):
        if interleaved or section[0] != section[1]:
            raise ValueError(f"hw_pairs takes a section (h, w, t) with h == w and interleaved="
                             f"False, got {list(section)}, interleaved={interleaved}")  # fmt: skip
        return [1, 2] * section[0] + [0] * section[2]
    if not interleaved:
        return [a for a, n in enumerate(section) for _ in range(n)]
    limits = (0, 3 * section[1], 3 * section[2])
    return [j % 3 if j % 3 and j < limits[j % 3] else 0 for j in range(sum(section))]


def mrope_angles(
    positions: torch.Tensor,
    inv_freq: torch.Tensor,
    axes: list[int],
    dtype: torch.dtype = torch.float32,
) -> torch.Tensor:
    """positions [..., P], inv_freq [R/2], axes [R/2] (each < P: mrope_axes; video's
    videorope_axes, vrope_axes) -> angles [..., R/2]: pair j turns by
    positions[..., axes[j]] * inv_freq[j], through position_angles (float32 reduced, float64
    for `dtype` float64)."""
    groups = [[j for j, a in enumerate(axes) if a == axis] for axis in range(positions.shape[-1])]
    parts = [
        position_angles(positions[..., axis], inv_freq[idx], dtype)  # [..., len(idx)]
        for axis, idx in enumerate(groups)
        if idx
    ]
    angles = torch.cat(parts, dim=-1)  # pairs grouped by axis
    order = [j for idx in groups for j in idx]
    if order == sorted(order):
        return angles
    inverse = sorted(range(len(order)), key=order.__getitem__)  # back to pair order
    return angles[..., inverse]


def _grids(name: str, grid_thw) -> list[tuple[int, int, int]]:
    """[N, 3] (t, h, w) grid sizes as int triples, each >= 1."""
    if grid_thw is None:
        return []
    rows = torch.as_tensor(grid_thw)
    if rows.dim() != 2 or rows.shape[-1] != 3 or rows.is_floating_point():
        raise ValueError(f"{name} must be an [N, 3] integer tensor of (t, h, w), got {grid_thw!r}")
    out = [tuple(int(x) for x in row) for row in rows.tolist()]
    if any(min(row) < 1 for row in out):
        raise ValueError(f"{name} must hold sizes >= 1, got {out}")
    return out


def _seconds(name: str, seconds, videos: int) -> list:
    """One seconds-per-grid entry per video (a tensor's entries stay 0-d tensors, as in
    transformers: their dtype sets the rounding of the time index)."""
    seconds = list(seconds)
    if len(seconds) != videos:
        raise ValueError(f"{name} must have one entry per video ({videos}), got {len(seconds)}")
    for s in seconds:
        check_float(name, float(s), ge=0)
    return seconds


def _video_intervals(tokens_per_second, second_per_grid_ts, videos: int) -> list:
    """Each video's time index factors: (1,) (Qwen2-VL), (tokens_per_second * seconds,)
    (Qwen2.5-VL)."""
    if tokens_per_second is None:
        if second_per_grid_ts is not None:
            raise ValueError("second_per_grid_ts needs tokens_per_second (Qwen2.5-VL's "
                             "vision_config.tokens_per_second)")  # fmt: skip
        return [(1,)] * videos
    check_float("tokens_per_second", tokens_per_second, gt=0)
    if second_per_grid_ts is None:
        return [(tokens_per_second,)] * videos
    seconds = _seconds("second_per_grid_ts", second_per_grid_ts, videos)
    return [(tokens_per_second * s,) for s in seconds]


def _vision_block(start: int, thw, merge: int, factors) -> torch.Tensor:
    """[t * h * w, 3] (t, h, w) indices of one image / video over its merged grid, row-major,
    offset by `start`; the time index is int(i * factors[0] * factors[1] ...), multiplied in
    that order (as the model's own float32 rounding does)."""
    t, h, w = thw[0], thw[1] // merge, thw[2] // merge
    ti = torch.arange(t)
    for factor in factors:
        ti = ti * factor
    ti = ti.long() + start
    grid = torch.meshgrid(ti, torch.arange(h) + start, torch.arange(w) + start, indexing="ij")
    return torch.stack(grid, dim=-1).reshape(-1, 3)


def _row(kinds: list[int], grids: dict, used: dict, intervals: dict, merge: int, advance: str):
    """[n, 3] positions of one unpadded row of token types; `used` counts the grids taken,
    intervals {kind: [time index factors per grid]}."""
    start, at, pieces = 0, 0, []  # at: the token index in the row
    for kind, run in itertools.groupby(kinds):
        n = len(list(run))
        if kind in (0, 3):  # text (and audio): one index on all three axes
            pieces.append(torch.arange(start, start + n)[:, None].expand(n, 3))
            start, at = start + n, at + n
            continue
        i, name = used[kind], NAMES[kind]
        if i == len(grids[kind]):
            raise ValueError(f"{name} has {i} rows, fewer than token_types' blocks of type {kind}")
        thw = grids[kind][i]
        block = _vision_block(start, thw, merge, intervals[kind][i])
        if len(block) != n:
            raise ValueError(
                f"{name}[{i}] = {list(thw)} gives {len(block)} tokens (t * (h // {merge}) * "
                f"(w // {merge}), spatial_merge_size={merge}), but its block at token {at} has "
                f"{n}; separate consecutive blocks by a text token"
            )
        used[kind] += 1
        pieces.append(block)
        grid_end = start + max(thw[1], thw[2]) // merge
        start, at = grid_end if advance == "grid" else int(block.max()) + 1, at + n
    return torch.cat(pieces) if pieces else torch.zeros(0, 3, dtype=torch.int64)


def mrope_positions(
    token_types: torch.Tensor,
    image_grid_thw=None,
    video_grid_thw=None,
    *,
    spatial_merge_size: int = 2,
    tokens_per_second: float | None = None,
    second_per_grid_ts=None,
    attention_mask: torch.Tensor | None = None,
    advance: str = "grid",
    split_frames: bool = False,
    temporal_merge_size: int = 1,
) -> torch.Tensor:
    """(t, h, w) int64 positions [T, 3] or [B, T, 3] of a text + image + video sequence, as
    transformers' `get_rope_index` of Qwen2-VL, Qwen2.5-VL, Qwen3-VL, Qwen3.5, GLM-4V, GLM-OCR,
    PaddleOCR-VL and ERNIE-4.5-VL builds them.

    token_types [T] or [B, T]: 0 text, 1 image, 2 video (transformers' mm_token_type_ids). Each
    run of image (video) tokens is one image (video): it takes the next row (t, h, w) of
    image_grid_thw (video_grid_thw) [N, 3], in order over the batch, and has t * (h // m) *
    (w // m) tokens, m = spatial_merge_size. Text tokens get one index on all three axes,
    counting on from the block before. A block starting at s gets (s + t_i, s + h_i, s + w_i)
    over its merged grid; the next block starts at s + max(h, w) // m (advance="grid",
    transformers 5) or after the block's largest index (advance="max", transformers 4 and
    Qwen's code; they differ where a video's time index outruns its grid). Video time index
    t_i = i (Qwen2-VL) or int(i * tokens_per_second * second_per_grid_ts[v]) when
    tokens_per_second is given (Qwen2.5-VL; seconds default to 1). split_frames (Qwen3-VL,
    Qwen3.5, GLM-4V): each video row (t, h, w) is t frames (1, h, w), each its own block (the
    timestamp text between frames separates them). temporal_merge_size (ERNIE-4.5-VL's
    vision_config.temporal_merge_size): a video row (t, h, w) has t // temporal_merge_size
    merged frames (its tokens and time indices); images are not merged in time.
    attention_mask [B, T] (0: padding): padding is skipped and gets position 0.
    """
    types = _types(token_types, (0, 1, 2), "0 (text), 1 (image) or 2 (video)")
    merge = check_int("spatial_merge_size", spatial_merge_size, low=1)
    if advance not in ADVANCES:
        raise ValueError(f"advance must be one of {ADVANCES}, got {advance!r}")
    grids = {1: _grids(NAMES[1], image_grid_thw), 2: _grids(NAMES[2], video_grid_thw)}
    if check_bool("split_frames", split_frames):
        if tokens_per_second is not None:
            raise ValueError("split_frames gives every frame its own block at time 0: "
                             "tokens_per_second does not apply")  # fmt: skip
        grids[2] = [(1, h, w) for t, h, w in grids[2] for _ in range(t)]
    tm = check_int("temporal_merge_size", temporal_merge_size, low=1)
    if tm > 1:
        if split_frames:
            raise ValueError("temporal_merge_size and split_frames do not combine (no model "
                             "has both)")  # fmt: skip
        if any(t < tm for t, _, _ in grids[2]):
            raise ValueError(f"video_grid_thw must have t >= temporal_merge_size = {tm}, got "
                             f"{[list(g) for g in grids[2]]}")  # fmt: skip
        grids[2] = [(t // tm, h, w) for t, h, w in grids[2]]
    videos = _video_intervals(tokens_per_second, second_per_grid_ts, len(grids[2]))
    intervals = {1: [(1,)] * len(grids[1]), 2: videos}
    return _positions(token_types, types, grids, intervals, merge, advance, attention_mask, 0)


def omni_positions(
    token_types: torch.Tensor,
    image_grid_thw=None,
    video_grid_thw=None,
    *,
    spatial_merge_size: int = 2,
    position_id_per_seconds: float = 25,
    second_per_grids=None,
    attention_mask: torch.Tensor | None = None,
) -> torch.Tensor:
    """(t, h, w) int64 positions [T, 3] or [B, T, 3] of a text + image + video + audio sequence,
    as transformers' Qwen2.5-Omni thinker `get_rope_index` builds them (audio not interleaved
    into a video: use_audio_in_video=False).

    token_types [T] or [B, T]: 0 text, 1 image, 2 video, 3 audio. The time axis counts
    position_id_per_seconds ids per second: a video's time index is int(i *
    second_per_grids[v] * position_id_per_seconds) (seconds default to 1; an image's int(i *
    position_id_per_seconds)); its height / width indices as in mrope_positions. Text and
    audio tokens get one index on all three axes, and every token after a block starts after
    the block's largest index (mrope_positions' advance="max"). attention_mask [B, T] (0:
    padding): padding is skipped and gets position 1, as in transformers.
    """
    types = _types(token_types, (0, 1, 2, 3), "0 (text), 1 (image), 2 (video) or 3 (audio)")
    merge = check_int("spatial_merge_size", spatial_merge_size, low=1)
    check_float("position_id_per_seconds", position_id_per_seconds, gt=0)
    grids = {1: _grids(NAMES[1], image_grid_thw), 2: _grids(NAMES[2], video_grid_thw)}
    seconds = [1.0] * len(grids[2])
    if second_per_grids is not None:
        seconds = _seconds("second_per_grids", second_per_grids, len(grids[2]))
    pps = position_id_per_seconds
    intervals = {1: [(1, pps)] * len(grids[1]),  # as transformers multiplies: i * s * pps
                 2: [(torch.as_tensor(s).float(), pps) for s in seconds]}  # fmt: skip
    return _positions(token_types, types, grids, intervals, merge, "max", attention_mask, 1)


def _types(token_types, allowed: tuple, names: str) -> torch.Tensor:
    """token_types [T] or [B, T] checked, as [B, T] on the CPU."""
    check_tensor("token_types", token_types)
    if token_types.dim() not in (1, 2) or token_types.is_floating_point():
        raise ValueError(f"token_types must be a [T] or [B, T] integer tensor, got "
                         f"{token_types.dtype} {tuple(token_types.shape)}")  # fmt: skip
    types = (token_types[None] if token_types.dim() == 1 else token_types).cpu()  # [B, T]
    if not torch.isin(types, torch.tensor(allowed)).all():
        raise ValueError(f"token_types must hold {names}")
    return types


def _positions(token_types, types, grids, intervals, merge, advance, attention_mask, pad):
    """[B, T, 3] positions of every row (padding at `pad`), shaped as token_types."""
    keep = torch.ones_like(types, dtype=torch.bool)
    if attention_mask is not None:
        check_tensor("attention_mask", attention_mask)
        if attention_mask.shape != token_types.shape:
            want, got = tuple(token_types.shape), tuple(attention_mask.shape)
            raise ValueError(f"attention_mask must have token_types' shape {want}, got {got}")
        keep = attention_mask.reshape(types.shape).cpu().bool()
    out = torch.full((*types.shape, 3), pad, dtype=torch.int64)  # padding stays at `pad`
    used = {1: 0, 2: 0}
    for b in range(types.shape[0]):
        out[b, keep[b]] = _row(types[b][keep[b]].tolist(), grids, used, intervals, merge, advance)
    for kind, name in NAMES.items():
        if used[kind] != len(grids[kind]):
            raise ValueError(f"{name} has {len(grids[kind])} rows, but token_types has "
                             f"{used[kind]} blocks of type {kind}")  # fmt: skip
    return out.reshape(*token_types.shape, 3).to(token_types.device)
