"""Pure tensor math of positional encodings: no state, no modules.

Every function computes angles and tables in float32 (float64 where large positions need it)
and casts to the caller's dtype at the end. Shapes follow the legend in posenc.base.
"""

from __future__ import annotations

import math

import torch

# ============================================================================ absolute tables
# (sinusoidal_table and the 2-D / 3-D tables)

_F32_EXACT = 2**24  # float32 holds every integer up to 2^24 exactly; past it, angles go float64


def _check_table_args(positions: torch.Tensor, dim: int, base: float) -> None:
    if not isinstance(positions, torch.Tensor):
        raise TypeError(f"positions must be a torch.Tensor, got {type(positions).__name__}")
    if isinstance(dim, bool) or not isinstance(dim, int) or dim < 1:
        raise ValueError(f"dim must be a positive integer, got {dim!r}")
    if not base > 0:
        raise ValueError(f"base must be > 0, got {base!r}")


def _angle_dtype(positions: torch.Tensor) -> torch.dtype:
    """float64 for float64 positions or positions past 2^24, else float32."""
    if positions.dtype == torch.float64:
        return torch.float64
    if positions.numel() and positions.detach().abs().max().item() > _F32_EXACT:
        return torch.float64
    return torch.float32


def sinusoidal_inv_freq(
    dim: int, base: float = 10000.0, *, dtype: torch.dtype = torch.float32, device=None
) -> torch.Tensor:
    """[ceil(dim/2)] frequencies w_i = base^(-2i/dim) (computed in float64, then cast)."""
    two_i = torch.arange(0, dim, 2, dtype=torch.float64, device=device)
    return (float(base) ** (-two_i / dim)).to(dtype)


def sinusoidal_table(positions: torch.Tensor, dim: int, base: float = 10000.0) -> torch.Tensor:
    """Vaswani et al.'s table: positions [...] -> [..., dim].

    Column 2i = sin(p * w_i), column 2i+1 = cos(p * w_i), with w_i = base^(-2i/dim). An odd
    `dim` keeps the last sin column (its cos is dropped). Positions may be floats
    (interpolation). Angles are float32, float64 for float64 positions or positions > 2^24;
    the result is float32 (float64 for float64 positions).
    """
    _check_table_args(positions, dim, base)
    dtype = _angle_dtype(positions)
    inv_freq = sinusoidal_inv_freq(dim, base, dtype=dtype, device=positions.device)
    angles = positions.to(dtype)[..., None] * inv_freq  # [..., ceil(dim/2)]
    table = torch.stack((angles.sin(), angles.cos()), dim=-1).flatten(-2)[..., :dim]
    return table if positions.dtype == torch.float64 else table.float()


def _axial_table(positions: torch.Tensor, dim: int, axes: int, base: float) -> torch.Tensor:
    """One sinusoidal table of c = 2*ceil(dim / (2*axes)) channels per axis, concatenated
    [axis 0 | axis 1 | ...] and cut to `dim` (so the last axes lose channels when dim is not
    divisible by 2*axes), as positional-encodings' PositionalEncoding2D/3D lay them out."""
    _check_table_args(positions, dim, base)
    if positions.dim() == 0 or positions.shape[-1] != axes:
        raise ValueError(
            f"positions must have a trailing axis of size {axes}, got {tuple(positions.shape)}"
        )
    c = 2 * math.ceil(dim / (2 * axes))
    parts = [sinusoidal_table(positions[..., a], c, base) for a in range(axes)]
    return torch.cat(parts, dim=-1)[..., :dim]


def sinusoidal_table_2d(positions: torch.Tensor, dim: int, base: float = 10000.0) -> torch.Tensor:
    """Images: positions [..., 2] (row, col) -> [..., dim].

    Channels [0, c) encode the row and [c, 2c) the column, c = 2*ceil(dim/4), each an
    interleaved sin/cos table with w_i = base^(-2i/c); cut to `dim`. Equals
    positional-encodings' PositionalEncoding2D at the same grid coordinates.
    """
    return _axial_table(positions, dim, 2, base)


def sinusoidal_table_3d(positions: torch.Tensor, dim: int, base: float = 10000.0) -> torch.Tensor:
    """Video: positions [..., 3] (time, row, col) -> [..., dim].

    c = 2*ceil(dim/6) channels per axis, [time | row | col], each as in sinusoidal_table_2d;
    cut to `dim`. Equals positional-encodings' PositionalEncoding3D.
    """
    return _axial_table(positions, dim, 3, base)


# ============================================================================ rotary
# (rope_inv_freq, apply_rope and their helpers; scaling variants live in posenc.rope_scaling)

ROPE_LAYOUTS = ("half", "interleaved")
# Angles are float32, like transformers' (whose numbers the parity tests match), except float64
# when the largest position is >= 2^24 (float32 no longer holds every integer), or >= 2^12 for
# float16/bfloat16 inputs (float32 angle rounding, up to p * 2^-24 rad, would otherwise reach
# float16's half-ulp 2^-11), or for float64 inputs or positions. Under torch.compile the
# largest position is not read (that would need .item(), a graph break): angles stay float32
# there unless the input or the positions are float64.
ROPE_F64_FROM = 2**24
ROPE_F64_FROM_HALF = 2**12


def rope_inv_freq(
    dim: int, base: float = 10000.0, scaling: dict | None = None, seq_len: int | None = None
) -> tuple[torch.Tensor, float]:
    """Inverse frequencies [dim // 2] float32 of a rotary dim `dim`, and the attention factor.

    `scaling` is a Hugging Face `rope_scaling` dict (rope_type default, linear, ntk, dynamic,
    yarn, llama3, longrope; see posenc.rope_scaling); a `rope_theta` key in it overrides `base`.
    `seq_len` (the current length) matters for dynamic and longrope only. The attention factor
    multiplies cos and sin (yarn's temperature, longrope's scale; 1.0 otherwise).
    """
    from posenc.rope_scaling import ROPE_SCALING, rope_type_of

    if isinstance(dim, bool) or not isinstance(dim, int) or dim < 2 or dim % 2:
        raise ValueError(f"dim (the rotary dim) must be an even int >= 2, got {dim!r}")
    rope_type = rope_type_of(scaling)
    params = dict(scaling or {})
    base = float(params.get("rope_theta") or base)
    if not base > 1:
        raise ValueError(f"base (rope_theta) must be > 1, got {base!r}")
    if rope_type in ("ntk", "dynamic") and dim == 2:
        raise ValueError(f"rope_type={rope_type!r} needs dim > 2 (it uses dim / (dim - 2))")
    inv_freq, attention_factor = ROPE_SCALING[rope_type](dim, base, params, seq_len)
    return inv_freq.float(), float(attention_factor)


def _rope_compute_dtype(dtype: torch.dtype) -> torch.dtype:
    """The dtype rotations are computed in: float64 for float64 inputs, else float32."""
    return torch.float64 if dtype == torch.float64 else torch.float32


def rope_angle_dtype(positions: torch.Tensor, dtype: torch.dtype = torch.float32) -> torch.dtype:
    """float32 or float64 angles for these positions and an input of `dtype` (see ROPE_F64_FROM)."""
    if dtype == torch.float64 or positions.dtype == torch.float64:
        return torch.float64
    if positions.numel() == 0 or torch.compiler.is_compiling():
        return torch.float32
    limit = ROPE_F64_FROM_HALF if dtype in (torch.float16, torch.bfloat16) else ROPE_F64_FROM
    return torch.float64 if positions.detach().max().item() >= limit else torch.float32


def rope_cos_sin(
    positions: torch.Tensor,
    inv_freq: torch.Tensor,
    attention_factor: float = 1.0,
    dtype: torch.dtype = torch.float32,
) -> tuple[torch.Tensor, torch.Tensor]:
    """cos and sin of the angles positions * inv_freq, times attention_factor.

    positions [...] (ints or floats), inv_freq [R/2] -> cos, sin [..., R/2] in the dtype the
    rotation of an input of `dtype` is computed in (float32; float64 for float64 inputs).
    Build them once and pass them to apply_rope_cos_sin for q and k.
    """
    angle_dtype = rope_angle_dtype(positions, dtype)
    angles = positions.to(angle_dtype)[..., None] * inv_freq.to(positions.device, angle_dtype)
    cos, sin = angles.cos(), angles.sin()
    if attention_factor != 1.0:
        cos, sin = cos * attention_factor, sin * attention_factor
    compute = _rope_compute_dtype(dtype)
    return cos.to(compute), sin.to(compute)


def _rope_pairs(x: torch.Tensor, layout: str) -> tuple[torch.Tensor, torch.Tensor]:
    """Views of the two members of each rotary pair of x [..., R]: [..., R/2] each."""
    if layout == "half":  # GPT-NeoX / transformers: pair (i, i + R/2)
        return x.chunk(2, dim=-1)
    pairs = x.unflatten(-1, (-1, 2))  # Meta / GPT-J / rotary-embedding-torch: pair (2i, 2i+1)
    return pairs[..., 0], pairs[..., 1]


def _apply_rope_reference(
    x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, layout: str, inplace: bool
) -> torch.Tensor:
    """Rotate the first R = 2 * cos.shape[-1] channels of x [..., Dh]; the rest pass through.

    cos, sin [..., R/2] broadcast against x[..., :R/2] and are in the compute dtype (float32
    for float16/bfloat16 x, rounded once at the end). (a, b) -> (a cos - b sin, b cos + a sin).
    Under torch.compile (and with gradients) it is out of place: inductor cannot trace `out=`.
    """
    r = 2 * cos.shape[-1]
    xr = x[..., :r]
    work = xr if xr.dtype == cos.dtype else xr.to(cos.dtype)
    a, b = _rope_pairs(work, layout)
    if torch.compiler.is_compiling() or (
        torch.is_grad_enabled() and (x.requires_grad or cos.requires_grad or sin.requires_grad)
    ):
        ra, rb = a * cos - b * sin, b * cos + a * sin  # differentiable, out of place
        rot = torch.cat((ra, rb), -1) if layout == "half" else torch.stack((ra, rb), -1).flatten(-2)
        if inplace:
            xr.copy_(rot)
            return x
        return torch.cat((rot.to(x.dtype), x[..., r:]), -1) if r < x.shape[-1] else rot.to(x.dtype)
    if work is xr and not inplace:  # write straight into a fresh output
        out = torch.empty_like(x)
        out[..., r:] = x[..., r:]
        oa, ob = _rope_pairs(out[..., :r], layout)
        torch.mul(a, cos, out=oa).addcmul_(b, sin, value=-1)
        torch.mul(b, cos, out=ob).addcmul_(a, sin)
        return out
    rb = torch.mul(b, cos).addcmul_(a, sin)  # rotate `work` in place, same ops as above
    a.mul_(cos).addcmul_(b, sin, value=-1)
    b.copy_(rb)
    if inplace:
        if work is not xr:
            xr.copy_(work)
        return x
    out = torch.empty_like(x)
    out[..., :r] = work
    out[..., r:] = x[..., r:]
    return out


def _rope_check(x: torch.Tensor, layout: str, rotary_dim: int | None, half_r: int) -> int:
    """Validate x, layout, rotary_dim against inv_freq's R/2 entries; return R."""
    if not isinstance(x, torch.Tensor) or not x.is_floating_point():
        raise TypeError(f"x must be a floating-point torch.Tensor, got {getattr(x, 'dtype', x)!r}")
    if layout not in ROPE_LAYOUTS:
        raise ValueError(f"layout must be one of {ROPE_LAYOUTS}, got {layout!r}")
    dh = x.shape[-1] if x.dim() else 0
    if rotary_dim is not None:
        if isinstance(rotary_dim, bool) or not isinstance(rotary_dim, int):
            raise TypeError(f"rotary_dim must be an int or None, got {type(rotary_dim).__name__}")
        if rotary_dim < 2 or rotary_dim % 2:
            raise ValueError(
                f"rotary_dim must be an even int >= 2 (pairs rotate), got {rotary_dim}"
            )
        if rotary_dim > dh:
            raise ValueError(
                f"rotary_dim must be <= the head dim Dh={dh} (allowed: even values 2..{dh}), "
                f"got {rotary_dim}"
            )
        if rotary_dim != 2 * half_r:
            raise ValueError(
                f"rotary_dim={rotary_dim} must equal 2 * inv_freq.numel() = {2 * half_r} "
                "(compute inv_freq for the rotary dim)"
            )
    elif 2 * half_r > dh:
        raise ValueError(
            f"inv_freq has {half_r} entries, so the rotary dim R = {2 * half_r} > the head dim "
            f"Dh={dh}; allowed: R <= Dh"
        )
    return 2 * half_r


def _rope_align(t: torch.Tensor, x: torch.Tensor, name: str) -> torch.Tensor:
    """t [*P, R/2] with P the positions' shape -> broadcastable to x[..., :R/2].

    [T] lines up with x's T axis; [B, T] with a 4-D x [B, H, T, Dh] gets a head axis; any other
    shape must broadcast to x's shape without its last dim.
    """
    if t.dim() == 3 and x.dim() == 4:
        t = t.unsqueeze(1)  # [B, T, R/2] -> [B, 1, T, R/2]
    lead = tuple(x.shape[:-1])
    try:
        ok = torch.broadcast_shapes(tuple(t.shape[:-1]), lead) == lead
    except RuntimeError:
        ok = False
    if not ok:
        raise ValueError(
            f"{name} of shape {tuple(t.shape[:-1])} do not broadcast to x's shape without its "
            f"last dim {lead}; allowed: [T], [B, T] or a shape broadcastable to {lead}"
        )
    return t


def apply_rope_cos_sin(
    x: torch.Tensor,
    cos: torch.Tensor,
    sin: torch.Tensor,
    layout: str = "half",
    inplace: bool = False,
) -> torch.Tensor:
    """Rotate x [..., Dh] by precomputed cos, sin [*P, R/2] (from rope_cos_sin); R <= Dh.

    The cos/sin half of apply_rope, for reusing one cos/sin on q and k, or for angles built
    another way (2-D positions, xPos scales folded into cos and sin).
    """
    _rope_check(x, layout, None, cos.shape[-1])
    cos, sin = _rope_align(cos, x, "positions"), _rope_align(sin, x, "positions")
    return _apply_rope_reference(x, cos, sin, layout, inplace)


def apply_rope(
    x: torch.Tensor,
    positions: torch.Tensor,
    inv_freq: torch.Tensor,
    layout: str = "half",
    rotary_dim: int | None = None,
    attention_factor: float = 1.0,
    inplace: bool = False,
) -> torch.Tensor:
    """Rotary position embedding (Su et al. 2021) of x [..., Dh], e.g. [B, H, T, Dh].

    positions: [T], [B, T] or broadcastable to x without its last dim (left padding, packed
    sequences, decoding offsets); floats allowed (interpolation); >= 0.
    inv_freq [R/2] (rope_inv_freq): the first R = rotary_dim channels rotate, the rest pass
    through (partial rotary). layout: "half" pairs channel i with i + R/2 (GPT-NeoX,
    transformers' rotate_half); "interleaved" pairs 2i with 2i + 1 (Meta, GPT-J,
    rotary-embedding-torch). cos and sin are multiplied by attention_factor. Angles float32
    (float64 at large positions, see ROPE_F64_FROM); returns x's dtype. inplace writes into x.
    """
    from posenc.base import check_positions

    check_positions(positions)
    _rope_check(x, layout, rotary_dim, inv_freq.shape[-1])
    cos, sin = rope_cos_sin(positions, inv_freq, attention_factor, x.dtype)
    cos, sin = _rope_align(cos, x, "positions"), _rope_align(sin, x, "positions")
    return _apply_rope_dispatch(x, cos, sin, layout, inplace)


def _apply_rope_dispatch(x, cos, sin, layout: str, inplace: bool) -> torch.Tensor:
    """posenc.fast_rope's one-pass C kernel where it applies (CPU, float32/bfloat16, no
    gradient through cos/sin; same numbers), else the reference. POSENC_ROPE_ENGINE=eager
    forces the reference; so does torch.compile (ctypes cannot be traced)."""
    from posenc import fast_rope

    if not torch.compiler.is_compiling() and fast_rope.use_fast(x, cos, sin, inplace):
        return fast_rope.rotate(x, cos, sin, layout, inplace=inplace)
    return _apply_rope_reference(x, cos, sin, layout, inplace)


def apply_rope_qk(
    q: torch.Tensor,
    k: torch.Tensor,
    q_pos: torch.Tensor,
    k_pos: torch.Tensor,
    inv_freq: torch.Tensor,
    layout: str = "half",
    rotary_dim: int | None = None,
    attention_factor: float = 1.0,
) -> tuple[torch.Tensor, torch.Tensor]:
    """apply_rope on q [B, H, Tq, Dh] and k [B, Hkv, Tk, Dh]; cos/sin built once when
    q_pos is k_pos."""
    from posenc.base import check_positions

    check_positions(k_pos, name="k_pos")
    _rope_check(q, layout, rotary_dim, inv_freq.shape[-1])
    _rope_check(k, layout, rotary_dim, inv_freq.shape[-1])
    k_cs = rope_cos_sin(k_pos, inv_freq, attention_factor, k.dtype)
    if q_pos is k_pos and _rope_compute_dtype(q.dtype) == _rope_compute_dtype(k.dtype):
        q_cs = k_cs
    else:
        check_positions(q_pos, name="q_pos")
        q_cs = rope_cos_sin(q_pos, inv_freq, attention_factor, q.dtype)
    q_cos, q_sin = (_rope_align(t, q, "q_pos") for t in q_cs)
    k_cos, k_sin = (_rope_align(t, k, "k_pos") for t in k_cs)
    return (
        _apply_rope_dispatch(q, q_cos, q_sin, layout, False),
        _apply_rope_dispatch(k, k_cos, k_sin, layout, False),
    )


# ============================================================================ biases
# (alibi_slopes, t5_bucket, sandwich_curve)


def alibi_slopes(num_heads: int) -> torch.Tensor:
    """ALiBi head slopes m [H] float32 (Press et al. 2022), equal to BLOOM's for every H.

    For H a power of two, m_h = 2^(-8h/H) for h = 1..H. Otherwise, with n = 2^floor(log2 H):
    the n slopes of that series, then every other slope (h = 1, 3, 5, ...) of the series for
    2n heads, H - n of them.
    """
    if isinstance(num_heads, bool) or not isinstance(num_heads, int):
        raise TypeError(f"num_heads must be an int, got {type(num_heads).__name__}")
    if num_heads < 1:
        raise ValueError(f"num_heads must be >= 1, got {num_heads}")

    def series(count: int, powers: torch.Tensor) -> torch.Tensor:
        # (2^(-8/count))^h in float32: the ratio is rounded once, as in BLOOM
        ratio = torch.tensor(2.0 ** (-8.0 / count), dtype=torch.float32)
        return torch.pow(ratio, powers)

    n = 1 << (num_heads.bit_length() - 1)  # largest power of two <= num_heads
    slopes = series(n, torch.arange(1, n + 1, dtype=torch.float32))
    if n < num_heads:
        odd = torch.arange(1, 2 * (num_heads - n), 2, dtype=torch.float32)
        slopes = torch.cat([slopes, series(2 * n, odd)])
    return slopes


def check_t5_buckets(bidirectional: bool, num_buckets: int, max_distance: int) -> None:
    """Raise TypeError / ValueError unless the arguments give well-defined T5 buckets."""
    if not isinstance(bidirectional, bool):
        raise TypeError(f"bidirectional must be a bool, got {type(bidirectional).__name__}")
    for name, value in (("num_buckets", num_buckets), ("max_distance", max_distance)):
        if isinstance(value, bool) or not isinstance(value, int):
            raise TypeError(f"{name} must be an int, got {type(value).__name__}")
    if bidirectional and (num_buckets < 4 or num_buckets % 2):
        raise ValueError(
            "num_buckets must be an even int >= 4 when bidirectional (half the buckets per "
            f"direction, each half with >= 1 exact bucket), got {num_buckets}"
        )
    if num_buckets < 2:
        raise ValueError(f"num_buckets must be >= 2, got {num_buckets}")
    max_exact = (num_buckets // 2 if bidirectional else num_buckets) // 2
    if max_distance <= max_exact:
        raise ValueError(
            f"max_distance must be > {max_exact} (where the log-spaced buckets start: half the "
            f"buckets of one direction), got {max_distance}"
        )


def t5_bucket(
    relative_position: torch.Tensor,
    bidirectional: bool = True,
    num_buckets: int = 32,
    max_distance: int = 128,
) -> torch.Tensor:
    """T5's relative-position buckets (Raffel et al. 2020): int64 in [0, num_buckets), same shape.

    relative_position = key - query, an integer tensor. Bidirectional: half the buckets per
    direction, keys after the query offset by num_buckets/2; otherwise keys after the query share
    bucket 0 with distance 0. Per direction, distances below n/2 (n = buckets of one direction)
    get a bucket each; larger ones are log-spaced up to max_distance, beyond which they share
    the last bucket. The log is taken in float32, as in T5, so buckets match bit for bit.
    """
    check_t5_buckets(bidirectional, num_buckets, max_distance)
    if not isinstance(relative_position, torch.Tensor):
        raise TypeError(
            f"relative_position must be a torch.Tensor, got {type(relative_position).__name__}"
        )
    if relative_position.is_floating_point() or relative_position.is_complex():
        raise TypeError(
            f"relative_position must be an integer tensor, got {relative_position.dtype}"
        )
    rel = relative_position.long()
    n = num_buckets
    if bidirectional:
        n //= 2
        offset = (rel > 0).long() * n
        dist = rel.abs()
    else:
        offset = torch.zeros_like(rel)
        dist = (-rel).clamp(min=0)
    max_exact = n // 2
    # clamp(min=max_exact) only avoids log(0) where the exact bucket is taken anyway
    scaled = (
        torch.log(dist.clamp(min=max_exact).float() / max_exact)
        / math.log(max_distance / max_exact)
        * (n - max_exact)
    )
    far = (max_exact + scaled.long()).clamp(max=n - 1)
    return offset + torch.where(dist < max_exact, dist, far)


def sandwich_curve(distance: torch.Tensor, dim: int = 128) -> torch.Tensor:
    """Sandwich's bias before per-head scaling (Chi et al. 2023), float64, same shape.

    p_m . p_n - dim/2 = sum_{i=1..dim/2} cos(d / 10000^(2i/dim)) - dim/2 with d = m - n: the
    inner product of two sinusoidal embeddings of width `dim` (d'), shifted to 0 at d = 0 and
    <= 0 elsewhere. Summed frequency by frequency, so no [..., dim/2] tensor is built.
    """
    if isinstance(dim, bool) or not isinstance(dim, int):
        raise TypeError(f"dim must be an int, got {type(dim).__name__}")
    if dim < 2 or dim % 2:
        raise ValueError(f"dim (Sandwich's d') must be an even int >= 2, got {dim}")
    d = distance.double()
    half = dim // 2
    total = torch.zeros_like(d)
    for i in range(1, half + 1):
        total = total + torch.cos(d * 10000.0 ** (-2.0 * i / dim))
    return total - half


# ============================================================================ relative
# (deberta_bucket, rel_shift)


def deberta_bucket(
    relative_position: torch.Tensor, bucket_size: int, max_position: int
) -> torch.Tensor:
    """DeBERTa-v2's log buckets of relative_position = query - key -> int64, same shape.

    Distances with |r| <= bucket_size // 2 (= mid) keep their value; beyond, the bucket is
    sign(r) * (mid + ceil(log(|r| / mid) / log((max_position - 1) / mid) * (mid - 1))), so
    |bucket| reaches bucket_size - 1 at |r| = max_position - 1 and keeps growing past it
    (callers clamp). Computed in float32 like transformers' `make_log_bucket_position`,
    whose integers it reproduces exactly.
    """
    mid = bucket_size // 2
    if mid < 1 or max_position - 1 <= mid:
        raise ValueError(
            f"deberta_bucket needs bucket_size >= 2 and max_position > bucket_size // 2 + 1, "
            f"got bucket_size={bucket_size}, max_position={max_position}"
        )
    rel = relative_position.long()
    inner = rel.abs() < mid  # |r| < mid: log of a placeholder, never used
    abs_pos = torch.where(inner, torch.full_like(rel, mid - 1), rel.abs()).float()
    ratio = torch.tensor((max_position - 1) / mid, dtype=torch.float32).log()
    log_pos = torch.ceil(torch.log(abs_pos / mid) / ratio * (mid - 1)) + mid
    bucket = torch.where(abs_pos <= mid, rel.float(), log_pos * rel.sign())
    return bucket.long()


def rel_shift(x: torch.Tensor) -> torch.Tensor:
    """Transformer-XL's relative shift: [..., Tq, Tk_rel] -> [..., Tq, Tk_rel].

    Input column c of row i holds a score against relative encoding number c, ordered by
    DEcreasing distance (column 0 = the largest distance, as Transformer-XL's
    pos_seq = klen-1 .. 0). Pad a zero column on the left, view the rows as
    [..., Tk_rel + 1, Tq], drop the first row and view back: out[..., i, j] =
    x[..., i, j + Tq - 1 - i]. Entries with j > Tk_rel - Tq + i wrap around and are not
    meaningful; with Tk_rel >= Tq + Tk - 1 the first Tk columns are all valid, column j of
    row i then holding distance (dmax - (Tq - 1)) + i - j where dmax is column 0's.
    """
    *lead, tq, kr = x.shape
    padded = torch.nn.functional.pad(x, (1, 0))  # [..., Tq, Tk_rel + 1]
    padded = padded.reshape(*lead, kr + 1, tq)[..., 1:, :]  # [..., Tk_rel, Tq]
    return padded.reshape(*lead, tq, kr)


def relative_sinusoid(distances: torch.Tensor, dim: int, base: float = 10000.0) -> torch.Tensor:
    """Transformer-XL's relative encoding R: distances [...] -> [..., dim] float32.

    The first dim/2 columns are sin(d * f_k), the last dim/2 cos(d * f_k), f_k = base^(-2k/dim)
    (Transformer-XL concatenates the halves; it does not interleave them).
    """
    if dim % 2:
        raise ValueError(f"relative_sinusoid needs an even dim, got dim={dim}")
    inv_freq = base ** (-torch.arange(0, dim, 2, dtype=torch.float64) / dim)
    ang = distances.to(torch.float64)[..., None] * inv_freq.to(distances.device)
    return torch.cat([ang.sin(), ang.cos()], dim=-1).float()
