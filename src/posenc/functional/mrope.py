"""Multimodal RoPE (Qwen2-VL): which position axis each rotary pair follows, the angles, and the
(t, h, w) positions of a text + image + video (+ audio) sequence (mrope_positions,
omni_positions), [T, 3] or [B, T, 3]: transformers' position_ids [3, B, T] are
`position_ids.permute(1, 2, 0)` here. Text tokens have t = h = w: plain RoPE.
"""

from __future__ import annotations

import itertools

import torch

from posenc.checks import check_bool, check_choice, check_float, check_int, check_tensor
from posenc.functional.absolute import position_angles

AXES = ("t", "h", "w")
ADVANCES = ("grid", "max")
OMNI_TYPES = ("qwen2_5_omni", "qwen3_omni_moe")
NAMES = {1: "image_grid_thw", 2: "video_grid_thw"}  # token type -> its grids' name
MAX_PAIRS = 2**16  # rotary pairs a section may hold (head dims past 131072: a typo)
MAX_INDEX = 2**62  # positions and factors stay well inside int64


def mrope_default_section(half: int, interleaved: bool = False) -> list[int]:
    """(t, h, w) pair counts summing to `half` = R/2: Qwen2-VL's [16, 24, 24] (h = w = 3/8 of
    the pairs) chunked, Qwen3-VL's [24, 20, 20] (h = w = 5/16) interleaved, at R = 128."""
    half = check_int("half", half, low=0)
    if half > MAX_PAIRS:
        raise ValueError(f"half must be <= {MAX_PAIRS} rotary pairs, got {half}")
    hw = half * 5 // 16 if check_bool("interleaved", interleaved) else half * 3 // 8
    return [half - 2 * hw, hw, hw]


def check_mrope_section(section, half: int | None = None) -> list[int]:
    """section as a list of 3 ints >= 0 (t, h, w); summing to `half` = R/2 when given."""
    if not isinstance(section, list | tuple):
        raise TypeError(f"mrope_section must be a list of 3 ints (t, h, w), got {section!r}")
    if len(section) != 3:
        raise ValueError(f"mrope_section must have 3 entries (t, h, w), got {list(section)}")
    section = [check_int(f"mrope_section[{a}]", s, low=0) for a, s in zip(AXES, section)]
    if sum(section) > MAX_PAIRS:
        raise ValueError(f"mrope_section must hold <= {MAX_PAIRS} rotary pairs, got {section}")
    if half is not None and sum(section) != half:
        raise ValueError(
            f"mrope_section must sum to head_dim // 2 = {half} (one entry per rotary pair), "
            f"got {section} summing to {sum(section)}"
        )
    return section


def mrope_axes(
    section: list[int], interleaved: bool = False, *, hw_pairs: bool = False
) -> list[int]:
    """The axis (0 t, 1 h, 2 w) of each of the sum(section) rotary pairs: chunked (Qwen2-VL)
    t..., h..., w...; interleaved (Qwen3-VL) t, h, w, t, h, w, ..., then t; hw_pairs
    (ERNIE-4.5-VL, section (h, w, t) with h == w) h, w, h, w, ..., then t.
    """
    section = check_mrope_section(section)
    check_bool("interleaved", interleaved)
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
    check_tensor("positions", positions)
    check_tensor("inv_freq", inv_freq)
    if positions.dim() < 1 or positions.shape[-1] < 1 or not _real(positions):
        raise ValueError(f"positions must be a real tensor [..., P], P >= 1, got "
                         f"{positions.dtype} {tuple(positions.shape)}")  # fmt: skip
    if inv_freq.dim() != 1 or not inv_freq.is_floating_point():
        raise ValueError(f"inv_freq must be a floating-point tensor [R/2], got "
                         f"{inv_freq.dtype} {tuple(inv_freq.shape)}")  # fmt: skip
    if not isinstance(axes, list | tuple) or len(axes) != len(inv_freq):
        raise ValueError(f"axes must be a list of {len(inv_freq)} ints (one per pair of "
                         f"inv_freq), got {axes!r}")  # fmt: skip
    for a in axes:
        if check_int("axes[j]", a, low=0) >= positions.shape[-1]:
            raise ValueError(f"axes must be < P = {positions.shape[-1]} (positions' last "
                             f"axis), got {list(axes)}")  # fmt: skip
    if dtype not in (torch.float32, torch.float64):
        raise ValueError(f"dtype must be torch.float32 or torch.float64, got {dtype!r}")
    if positions.is_floating_point() and not bool(positions.isfinite().all()):
        raise ValueError("positions must be finite (no NaN or inf)")
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


def _real(x: torch.Tensor) -> bool:
    """An integer or floating-point tensor (not bool, not complex)."""
    return x.dtype != torch.bool and not x.is_complex()


def _integers(x: torch.Tensor) -> bool:
    return _real(x) and not x.is_floating_point()


def _grids(name: str, grid_thw) -> list[tuple[int, int, int]]:
    """[N, 3] (t, h, w) grid sizes as int triples, each in 1..2^31."""
    if grid_thw is None:
        return []
    try:
        rows = torch.as_tensor(grid_thw)
    except (TypeError, ValueError, RuntimeError):
        raise TypeError(f"{name} must be an [N, 3] integer tensor of (t, h, w), got "
                        f"{type(grid_thw).__name__} {grid_thw!r}") from None  # fmt: skip
    if rows.dim() != 2 or rows.shape[-1] != 3 or not _integers(rows):
        raise ValueError(f"{name} must be an [N, 3] integer tensor of (t, h, w), got {grid_thw!r}")
    out = [tuple(int(x) for x in row) for row in rows.tolist()]
    if any(min(row) < 1 or max(row) > 2**31 for row in out):
        raise ValueError(f"{name} must hold sizes in 1..2^31, got {out}")
    return out


def _seconds(name: str, seconds, videos: int) -> list:
    """One seconds-per-grid entry per video (tensor entries stay 0-d tensors: their dtype sets
    the time index's rounding, as in transformers)."""
    try:
        seconds = list(seconds)
    except TypeError:
        raise TypeError(f"{name} must be a list or 1-D tensor of seconds, one per video, got "
                        f"{type(seconds).__name__} {seconds!r}") from None  # fmt: skip
    if len(seconds) != videos:
        raise ValueError(f"{name} must have one entry per video ({videos}), got {len(seconds)}")
    for s in seconds:
        if isinstance(s, torch.Tensor) and (s.numel() != 1 or not _real(s)):
            raise ValueError(f"{name} must hold one real number per video, got {s!r}")
        check_float(name, float(s) if isinstance(s, torch.Tensor) else s, ge=0)
    return seconds


def _video_intervals(tokens_per_second, second_per_grid_ts, videos: int) -> list:
    """Each video's time index factor: 1 (Qwen2-VL), tokens_per_second * seconds (Qwen2.5-VL)."""
    if tokens_per_second is None:
        if second_per_grid_ts is not None:
            raise ValueError("second_per_grid_ts needs tokens_per_second (Qwen2.5-VL's "
                             "vision_config.tokens_per_second)")  # fmt: skip
        return [1] * videos
    if check_float("tokens_per_second", tokens_per_second, gt=0) > MAX_INDEX:
        raise ValueError(f"tokens_per_second must be <= 2^62, got {tokens_per_second!r}")
    if second_per_grid_ts is None:
        return [tokens_per_second] * videos
    seconds = _seconds("second_per_grid_ts", second_per_grid_ts, videos)
    return [tokens_per_second * s for s in seconds]


def _grid(start, t_index: torch.Tensor, h: int, w: int, dtype=torch.int64) -> torch.Tensor:
    """[t * h * w, 3] (t, h, w) ids of a grid, row-major, plus `start`: time ids t_index [t],
    rows and columns counted from 0 (Qwen3-Omni: float32)."""
    rows, cols = torch.arange(h, dtype=dtype), torch.arange(w, dtype=dtype)
    grid = torch.meshgrid(t_index.to(dtype), rows, cols, indexing="ij")
    return torch.stack(grid, dim=-1).reshape(-1, 3) + start


def _vision_block(start: int, thw, merge: int, factor=1) -> torch.Tensor:
    """The ids of one image / video over its merged grid: time index int(i * factor)."""
    return _grid(start, (torch.arange(thw[0]) * factor).long(), thw[1] // merge, thw[2] // merge)


def _newline_block(start: int, thw, merge: int) -> torch.Tensor:
    """[t * h * (w + 1), 3] (t, h, w) indices of one image / video whose merged rows each end
    with a newline token (HY-V4-VL): frame f is an (h, w + 1) grid starting at
    start + f * max(h, w + 1) on all three axes."""
    t, h, w = thw[0], thw[1] // merge, thw[2] // merge + 1
    size = max(h, w)
    frames = [_vision_block(start + f * size, (1, h, w), 1) for f in range(t)]
    return torch.cat(frames)


def _row(kinds: list[int], grids: dict, used: dict, merge: int, block, newline: bool = False,
         dtype=torch.int64) -> torch.Tensor:  # fmt: skip
    """[n, 3] positions of one unpadded row of token types: text (and audio) runs count on,
    one index on all three axes; the i-th image / video block (kind 1 / 2, its grid `thw`)
    gets block(start, kind, i, thw) -> (ids, next start); `used` counts the grids taken.
    newline: its merged rows end with a newline token (_newline_block)."""
    start, at, pieces = 0, 0, []  # at: the token index in the row
    for kind, run in itertools.groupby(kinds):
        n = len(list(run))
        if kind in (0, 3):  # text (and audio): one index on all three axes
            pieces.append(_line(n, start, dtype))
            start, at = start + n, at + n
            continue
        i, name = used[kind], NAMES[kind]
        if i == len(grids[kind]):
            raise ValueError(f"{name} has {i} rows, fewer than token_types' blocks of type {kind}")
        thw = grids[kind][i]
        size = thw[0] * (thw[1] // merge) * (thw[2] // merge + newline)
        if size != n:
            w = f"(w // {merge}{' + 1' if newline else ''})"
            raise ValueError(
                f"{name}[{i}] = {list(thw)} gives {size} tokens (t * (h // {merge}) * "
                f"{w}, spatial_merge_size={merge}), but its block at token {at} has {n}; "
                "separate consecutive blocks by a text token"
            )
        used[kind] += 1
        ids, start = block(start, kind, i, thw)
        pieces.append(ids)
        at += n
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
    newline_columns: bool = False,
    padding: int = 0,
) -> torch.Tensor:
    """(t, h, w) int64 positions [T, 3] or [B, T, 3] of a text + image + video sequence, as
    transformers' `get_rope_index` of Qwen2-VL, Qwen2.5-VL, Qwen3-VL, Qwen3.5, GLM-4V, GLM-OCR,
    PaddleOCR-VL, ERNIE-4.5-VL, Cohere Compass, Cosmos3, Qwen4-Exp, HY-V4-VL and GLM-Image
    (spatial_merge_size=1, padding=1, its prompt's source grids) build them.

    token_types [T] or [B, T]: 0 text, 1 image, 2 video. Each run of image (video) tokens takes
    the next row (t, h, w) of image_grid_thw (video_grid_thw) and has t * (h // m) * (w // m)
    tokens, m = spatial_merge_size. Text counts on from the block before, one index on all
    three axes. A block starting at s gets (s + t_i, s + h_i, s + w_i) over its merged grid;
    the next starts at s + max(h, w) // m (advance="grid", transformers 5) or after the
    block's largest index ("max", transformers 4). Video time index t_i = i, or
    int(i * tokens_per_second * second_per_grid_ts[v]) (Qwen2.5-VL). split_frames (Qwen3-VL):
    each video row is t blocks of one frame. temporal_merge_size (ERNIE-4.5-VL): a video row
    has t // temporal_merge_size frames. newline_columns (HY-V4-VL): every merged row ends
    with a newline token; frame f starts at s + f * max(h // m, w // m + 1) on all axes.
    Padding (attention_mask 0) gets position `padding`.
    """
    types = _types(token_types, (0, 1, 2), "0 (text), 1 (image) or 2 (video)")
    merge = check_int("spatial_merge_size", spatial_merge_size, low=1)
    check_choice("advance", advance, ADVANCES)
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
    if check_bool("newline_columns", newline_columns) and (split_frames or tokens_per_second):
        raise ValueError("newline_columns spaces frames by their block (HY-V4-VL): "
                         "split_frames and tokens_per_second do not apply")  # fmt: skip
    if check_int("padding", padding, low=0) > MAX_INDEX:
        raise ValueError(f"padding must be <= 2^62, got {padding}")
    videos = _video_intervals(tokens_per_second, second_per_grid_ts, len(grids[2]))
    intervals = {1: [1] * len(grids[1]), 2: videos}
    used = {1: 0, 2: 0}

    def block(start, kind, i, thw):
        if newline_columns:  # the next block starts after the last frame's
            ids = _newline_block(start, thw, merge)
        else:
            ids = _vision_block(start, thw, merge, intervals[kind][i])
            if advance == "grid":
                return ids, start + max(thw[1], thw[2]) // merge
        return ids, int(ids.max()) + 1

    def row(kinds):
        return _row(kinds, grids, used, merge, block, newline_columns)

    return _positions(token_types, types, grids, used, row, attention_mask, padding)


def omni_positions(
    token_types: torch.Tensor,
    image_grid_thw=None,
    video_grid_thw=None,
    *,
    spatial_merge_size: int = 2,
    position_id_per_seconds: float = 25,
    second_per_grids=None,
    attention_mask: torch.Tensor | None = None,
    seconds_per_chunk: float = 2.0,
    model_type: str = "qwen2_5_omni",
) -> torch.Tensor:
    """(t, h, w) positions [T, 3] or [B, T, 3] of a text + image + video + audio sequence, as
    the `get_rope_index` of transformers' Qwen2.5-Omni thinker (model_type "qwen2_5_omni": int64)
    or Qwen3-Omni-MoE thinker ("qwen3_omni_moe": float32, fractional time ids kept) builds them.

    token_types [T] or [B, T]: 0 text, 1 image, 2 video, 3 audio. A run of non-text tokens is
    one block: an image, a video, an audio clip, or a video holding its audio's tokens
    (use_audio_in_video=True). A video's time index is i * second_per_grids[v] *
    position_id_per_seconds (an image's i * position_id_per_seconds), int() for Qwen2.5-Omni;
    height / width as in mrope_positions. Text and audio get one index on all three axes; the
    tokens after a block start after its last piece's largest index. A video with audio
    interleaves its video ids and its audio's (start, start + 1, ...) as the model does:
    Qwen2.5-Omni by chunks of int(position_id_per_seconds * seconds_per_chunk) time ids,
    Qwen3-Omni by time; the run's types must follow that order. Qwen2.5-Omni's two tokens
    before and after such a block share one id; Qwen3-Omni needs each block between its start
    and end tokens (text: 1 each, 2 for a video with audio). Padding (attention_mask 0) gets
    position 1 (Qwen2.5-Omni) or 0 (Qwen3-Omni), as in transformers.
    """
    types = _types(token_types, (0, 1, 2, 3), "0 (text), 1 (image), 2 (video) or 3 (audio)")
    merge = check_int("spatial_merge_size", spatial_merge_size, low=1)
    if check_float("position_id_per_seconds", position_id_per_seconds, gt=0) > MAX_INDEX:
        raise ValueError(f"position_id_per_seconds must be <= 2^62, got {position_id_per_seconds}")
    pps = position_id_per_seconds  # as given (transformers multiplies by the config's value)
    check_choice("model_type", model_type, OMNI_TYPES)
    chunk = None  # Qwen3-Omni interleaves by time
    if model_type == "qwen2_5_omni":
        check_float("seconds_per_chunk", seconds_per_chunk, gt=0)
        chunk = int(pps * seconds_per_chunk)
        if chunk < 1:
            raise ValueError(f"position_id_per_seconds * seconds_per_chunk must be >= 1 (time ids "
                             f"per chunk), got {pps} * {seconds_per_chunk}")  # fmt: skip
    grids = {1: _grids(NAMES[1], image_grid_thw), 2: _grids(NAMES[2], video_grid_thw)}
    seconds = [1.0] * len(grids[2])
    if second_per_grids is not None:
        seconds = _seconds("second_per_grids", second_per_grids, len(grids[2]))
    seconds = [torch.as_tensor(s).float() for s in seconds]  # float32, as transformers
    used = {1: 0, 2: 0}

    def row(kinds):
        return _omni_row(kinds, grids, used, merge, pps, seconds, chunk)

    qwen3 = chunk is None
    pad, dtype = (0, torch.float32) if qwen3 else (1, torch.int64)
    return _positions(token_types, types, grids, used, row, attention_mask, pad, dtype)


AV = 4  # a block kind: a video holding its audio's tokens


def _omni_blocks(kinds: list[int]) -> list[tuple[int, int, int]]:
    """(begin, end, kind) of each run of non-text tokens (AV: a video with its audio)."""
    out, i = [], 0
    for block, run in itertools.groupby(kinds, key=bool):
        run = list(run)
        found = set(run)
        if block and len(found) > 1 and found != {2, 3}:
            raise ValueError(f"token_types: the block at token {i} mixes types {sorted(found)}; "
                             "only a video and its audio (2, 3) share a block, separate the "
                             "others by a text token")  # fmt: skip
        if block:
            out.append((i, i + len(run), AV if len(found) > 1 else run[0]))
        i += len(run)
    return out


def _line(n: int, start, dtype=torch.int64) -> torch.Tensor:
    """[n, 3] ids start, start + 1, ... on all three axes (start a number or a 0-d tensor)."""
    return (torch.arange(n, dtype=dtype) + start)[:, None].expand(n, 3)


def _chunks(times: list, size: int) -> list[tuple[int, int]]:
    """(begin, end) index ranges of a nondecreasing list of time ids: a range ends where
    times[i] reaches the next multiple of `size`, one step per index (as Qwen2.5-Omni's
    get_chunked_index: a time jump over several chunks splits its frame)."""
    out, begin, k = [], 0, 1
    for i, x in enumerate(times):
        if x >= k * size:
            out.append((begin, i))
            begin, k = i, k + 1
    return out + [(begin, len(times))]


def _omni_block(kind, run, at, start, grids, used, merge, pps, seconds, chunk):
    """(ids [n, 3], its last piece) of one block of `run` (its token types) at token `at`."""
    qwen3 = chunk is None
    if kind == 3:
        ids = _line(len(run), start)
        return ids, ids
    grid_kind = 1 if kind == 1 else 2
    i, name = used[grid_kind], NAMES[grid_kind]
    if i == len(grids[grid_kind]):
        raise ValueError(f"{name} has {i} rows, fewer than token_types' blocks of type "
                         f"{grid_kind}")  # fmt: skip
    thw = grids[grid_kind][i]
    scale = 1 if kind == 1 else seconds[i]
    t_index = torch.arange(thw[0]) * scale * pps  # transformers' product order
    dtype = torch.float32 if qwen3 else torch.int64
    video = _grid(start, t_index, thw[1] // merge, thw[2] // merge, dtype)
    n = sum(k == grid_kind for k in run)
    if len(video) != n:
        raise ValueError(
            f"{name}[{i}] = {list(thw)} gives {len(video)} tokens (t * (h // {merge}) * "
            f"(w // {merge}), spatial_merge_size={merge}), but its block at token {at} has {n}"
        )
    used[grid_kind] += 1
    if kind != AV:
        return video, video
    audio = _line(len(run) - n, start)  # [m, 3]
    both = torch.cat([video.double(), audio.double()])  # order only
    if qwen3:  # by time: a video token first where its time id <= the audio token's
        order = torch.sort(both[:, 0], stable=True).indices
        is_audio = order >= n
        changes = (is_audio[1:] != is_audio[:-1]).nonzero()
        tail = order[int(changes[-1]) + 1 if len(changes) else 0 :]  # the last run of one kind
    else:  # by chunks of `chunk` time ids: video chunk j, then audio chunk j
        vc = _chunks((video[:, 0] - start).tolist(), chunk)
        ac = _chunks(list(range(len(audio))), chunk)
        parts = []
        for j in range(max(len(vc), len(ac))):
            parts += [torch.arange(*vc[j])] if j < len(vc) else []
            parts += [torch.arange(*ac[j]) + n] if j < len(ac) else []
        order, tail = torch.cat(parts), parts[-1]
        is_audio = order >= n
    got = [3 if a else 2 for a in is_audio.tolist()]
    if got != list(run):
        how = "by time" if qwen3 else f"by chunks of {chunk} time ids"
        raise ValueError(
            f"token_types: the video + audio block at token {at} ({n} video, {len(run) - n} "
            f"audio tokens) does not interleave as the model does ({how}): expected "
            f"{_runs(got)}, got {_runs(list(run))}"
        )
    ids = torch.cat([video, audio.to(video.dtype)])
    last = audio[tail - n] if bool(is_audio[-1]) else ids[tail]  # audio keeps its dtype
    return ids[order], last


def _runs(kinds: list[int]) -> str:
    """'2 x 4, 3 x 2, ...': the runs of a type list."""
    return ", ".join(f"{k} x {len(list(g))}" for k, g in itertools.groupby(kinds))


def _omni_row(kinds, grids, used, merge, pps, seconds, chunk):
    """[n, 3] positions of one unpadded row, in the model's steps: each piece (text, start
    tokens, block, end tokens) starts after the largest id of the piece before it."""
    qwen3 = chunk is None
    pieces, top = [], None  # top: the largest id of the last piece

    def put(ids, last=None):
        nonlocal top
        pieces.append(ids)
        top = (ids if last is None else last).max()

    def after():
        return 0 if top is None else top + 1

    def text(n: int, shared_after: bool, shared_before: bool):
        """Qwen2.5-Omni's text run (the 2 tokens after / before a video with audio share one)."""
        need = 2 * shared_after + 2 * shared_before
        if n < need:
            raise ValueError(f"token_types: a video with audio needs 2 text tokens before and "
                             f"after it (start / end tokens), got a text run of {n}")  # fmt: skip
        step = torch.ones(n, dtype=torch.int64)
        step[0] = 0
        if shared_after:
            step[1] = 0
        if shared_before:
            step[-1] = 0
        put((torch.cumsum(step, 0) + after())[:, None].expand(n, 3))

    at, edge_before = 0, 0  # edge_before: the end tokens the block before has (Qwen3-Omni)
    for begin, end, kind in _omni_blocks(kinds):
        edge = 2 if kind == AV else 1
        if qwen3:
            n = begin - at - edge_before - edge
            if n < 0:
                raise ValueError(
                    f"token_types: the block at token {begin} needs {edge_before} end token(s) "
                    f"of the block before and {edge} start token(s) before it (text), got "
                    f"{begin - at}"
                )
            if edge_before:
                put(_line(edge_before, after()))
            start = after()
            if n:
                put(_line(n, start))
                start = start + n
            put(_line(edge, start))
            start = start + edge
        else:
            if begin > at:
                text(begin - at, edge_before == 2, kind == AV)
            elif kind == AV:
                raise ValueError(f"token_types: the video with audio at token {begin} needs 2 "
                                 "text tokens before it (start tokens)")  # fmt: skip
            start = after()
        ids, last = _omni_block(kind, kinds[begin:end], begin, start, grids, used, merge, pps,
                                seconds, chunk)  # fmt: skip
        put(ids, last)
        at, edge_before = end, edge
    rest = len(kinds) - at
    if qwen3:
        if rest < edge_before:
            raise ValueError(f"token_types: the block before token {at} needs {edge_before} "
                             f"end token(s) after it (text), got {rest}")  # fmt: skip
        if edge_before:
            put(_line(edge_before, after()))
            rest -= edge_before
        if rest:
            put(_line(rest, after()))
    elif rest or edge_before == 2:
        text(rest, edge_before == 2, False)
    if not pieces:
        return torch.zeros(0, 3)
    return torch.cat([p.float() for p in pieces]) if qwen3 else torch.cat(pieces)


def _types(token_types, allowed: tuple, names: str) -> torch.Tensor:
    """token_types [T] or [B, T] checked, as [B, T] on the CPU."""
    check_tensor("token_types", token_types)
    if token_types.dim() not in (1, 2) or not _integers(token_types):
        raise ValueError(f"token_types must be a [T] or [B, T] integer tensor, got "
                         f"{token_types.dtype} {tuple(token_types.shape)}")  # fmt: skip
    types = (token_types[None] if token_types.dim() == 1 else token_types).cpu()  # [B, T]
    if not torch.isin(types, torch.tensor(allowed)).all():
        raise ValueError(f"token_types must hold {names}")
    return types


def _keep(attention_mask, token_types, types) -> torch.Tensor:
    """[B, T] bool: the tokens attention_mask (shaped as token_types, 0 / 1) keeps."""
    if attention_mask is None:
        return torch.ones_like(types, dtype=torch.bool)
    check_tensor("attention_mask", attention_mask)
    if attention_mask.shape != token_types.shape:
        want, got = tuple(token_types.shape), tuple(attention_mask.shape)
        raise ValueError(f"attention_mask must have token_types' shape {want}, got {got}")
    mask = attention_mask.reshape(types.shape).cpu()
    ok = mask.dtype == torch.bool or (_integers(mask) and bool(((mask == 0) | (mask == 1)).all()))
    if not ok:
        raise ValueError(f"attention_mask must be a bool or integer tensor of 0 (padding) and 1, "
                         f"got {attention_mask.dtype}")  # fmt: skip
    return mask.bool()


def _positions(token_types, types, grids, used, row, attention_mask, pad, dtype=torch.int64):
    """[B, T, 3] positions of every row (row(kinds) -> [n, 3]; padding at `pad`), shaped as
    token_types; `used` counts the grids the rows took."""
    keep = _keep(attention_mask, token_types, types)
    out = torch.full((*types.shape, 3), pad, dtype=dtype)  # padding stays at `pad`
    for b in range(types.shape[0]):
        out[b, keep[b]] = row(types[b][keep[b]].tolist()).to(dtype)
    for kind, name in NAMES.items():
        if used[kind] != len(grids[kind]):
            raise ValueError(f"{name} has {len(grids[kind])} rows, but token_types has "
                             f"{used[kind]} blocks of type {kind}")  # fmt: skip
    return out.reshape(*token_types.shape, 3).to(token_types.device)
