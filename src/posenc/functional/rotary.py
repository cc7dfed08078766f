"""Rotary position embedding (Su et al. 2021): frequencies, cos/sin, and the rotation.

Angles are float32 reduced in float64 (posenc.functional.position_angles: accurate at any
position), float64 for float64 inputs; shapes follow posenc.base.
The rotation runs through posenc.kernels (the C kernel on CPU) where it applies, else the
reference `apply_rope_reference`; scaling variants are in posenc.functional.rope_scaling.
"""

from __future__ import annotations

import torch

from posenc import kernels
from posenc.checks import check_int, check_positions
from posenc.functional.absolute import position_angles
from posenc.functional.rope_scaling import ROPE_SCALING, rope_type_of

ROPE_LAYOUTS = ("half", "interleaved")


def rope_inv_freq(
    dim: int, base: float = 10000.0, scaling: dict | None = None, seq_len: int | None = None
) -> tuple[torch.Tensor, float]:
    """Inverse frequencies [dim // 2] float32 of a rotary dim `dim`, and the attention factor.

    `scaling` is a Hugging Face `rope_scaling` dict (rope_type default, linear, ntk, dynamic,
    yarn, llama3, longrope, proportional: there `dim` is the head dim; see posenc.rope_scaling);
    a `rope_theta` key in it overrides `base`.
    `seq_len` (the current length) matters for dynamic and longrope only. The attention factor
    multiplies cos and sin (yarn's temperature, longrope's scale; 1.0 otherwise).
    """
    check_int("dim", dim, low=2, even=True)  # the rotary dim
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


def rope_cos_sin(
    positions: torch.Tensor,
    inv_freq: torch.Tensor,
    attention_factor: float = 1.0,
    dtype: torch.dtype = torch.float32,
) -> tuple[torch.Tensor, torch.Tensor]:
    """cos and sin of the angles positions * inv_freq, times attention_factor.

    positions [...] (ints or floats), inv_freq [R/2] -> cos, sin [..., R/2] in the dtype the
    rotation of an input of `dtype` is computed in (float32; float64 for float64 inputs),
    within ~1e-6 of float64's at any position (position_angles). Build them once and pass
    them to apply_rope_cos_sin for q and k.
    """
    angles = position_angles(positions, inv_freq.to(positions.device), _rope_compute_dtype(dtype))
    cos, sin = angles.cos(), angles.sin()
    if attention_factor != 1.0:
        cos, sin = cos * attention_factor, sin * attention_factor
    return cos, sin


def _rope_pairs(x: torch.Tensor, layout: str) -> tuple[torch.Tensor, torch.Tensor]:
    """Views of the two members of each rotary pair of x [..., R]: [..., R/2] each."""
    if layout == "half":  # GPT-NeoX / transformers: pair (i, i + R/2)
        return x.chunk(2, dim=-1)
    pairs = x.unflatten(-1, (-1, 2))  # Meta / GPT-J / rotary-embedding-torch: pair (2i, 2i+1)
    return pairs[..., 0], pairs[..., 1]


def apply_rope_reference(
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
        check_int("rotary_dim", rotary_dim, low=2, even=True)  # pairs rotate
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


def rope_align(t: torch.Tensor, x: torch.Tensor, name: str) -> torch.Tensor:
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
    cos, sin = rope_align(cos, x, "positions"), rope_align(sin, x, "positions")
    return apply_rope_reference(x, cos, sin, layout, inplace)


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
    rotary-embedding-torch). cos and sin are multiplied by attention_factor. Accurate at any
    position (see rope_cos_sin); returns x's dtype. inplace writes into x.
    """
    positions = check_positions(positions)
    _rope_check(x, layout, rotary_dim, inv_freq.shape[-1])
    cos, sin = rope_cos_sin(positions, inv_freq, attention_factor, x.dtype)
    cos, sin = rope_align(cos, x, "positions"), rope_align(sin, x, "positions")
    return _apply_rope_dispatch(x, cos, sin, layout, inplace)


def _apply_rope_dispatch(x, cos, sin, layout: str, inplace: bool) -> torch.Tensor:
    """posenc.kernels' one-pass C kernel where it applies (CPU, float32/bfloat16, no
    gradient through cos/sin; same numbers), else the reference. POSENC_ROPE_ENGINE=eager
    forces the reference; so does torch.compile (ctypes cannot be traced)."""
    if not torch.compiler.is_compiling() and kernels.use_fast(x, cos, sin, inplace):
        return kernels.rotate(x, cos, sin, layout, inplace=inplace)
    return apply_rope_reference(x, cos, sin, layout, inplace)


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
    k_pos = check_positions(k_pos, name="k_pos")
    _rope_check(q, layout, rotary_dim, inv_freq.shape[-1])
    _rope_check(k, layout, rotary_dim, inv_freq.shape[-1])
    k_cs = rope_cos_sin(k_pos, inv_freq, attention_factor, k.dtype)
    if q_pos is k_pos and _rope_compute_dtype(q.dtype) == _rope_compute_dtype(k.dtype):
        q_cs = k_cs
    else:
        q_pos = check_positions(q_pos, name="q_pos")
        q_cs = rope_cos_sin(q_pos, inv_freq, attention_factor, q.dtype)
    q_cos, q_sin = (rope_align(t, q, "q_pos") for t in q_cs)
    k_cos, k_sin = (rope_align(t, k, "k_pos") for t in k_cs)
    q = _apply_rope_dispatch(q, q_cos, q_sin, layout, False)
    return q, _apply_rope_dispatch(k, k_cos, k_sin, layout, False)


def apply_rope_fast(
    x: torch.Tensor,
    positions: torch.Tensor,
    inv_freq: torch.Tensor,
    layout: str = "half",
    attention_factor: float = 1.0,
    *,
    inplace: bool = False,
    out: torch.Tensor | None = None,
    engine: str | None = None,
) -> torch.Tensor:
    """apply_rope without the value checks (no host syncs), with out= and an engine choice:
    x [..., Dh], positions [T] / [B, T] / broadcastable, inv_freq [R/2]."""
    cos, sin = rope_cos_sin(positions, inv_freq, attention_factor, x.dtype)
    cos, sin = rope_align(cos, x, "positions"), rope_align(sin, x, "positions")
    return kernels.rotate(x, cos, sin, layout, inplace=inplace, out=out, engine=engine)


def apply_rope_qk_fast(
    q: torch.Tensor,
    k: torch.Tensor,
    q_pos: torch.Tensor,
    k_pos: torch.Tensor | None,
    inv_freq: torch.Tensor,
    layout: str = "half",
    attention_factor: float = 1.0,
    *,
    inplace: bool = False,
    out: tuple[torch.Tensor, torch.Tensor] | None = None,
    engine: str | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """apply_rope_fast on q [B, H, Tq, Dh] and k [B, Hkv, Tk, Dh]; cos/sin built once when
    k_pos is None or is q_pos. out=(q_out, k_out) writes into preallocated buffers."""
    q_cs = rope_cos_sin(q_pos, inv_freq, attention_factor, q.dtype)
    same = k_pos is None or k_pos is q_pos
    k_cs = q_cs if same else rope_cos_sin(k_pos, inv_freq, attention_factor, k.dtype)
    q_cs = tuple(rope_align(t, q, "q_pos") for t in q_cs)
    k_cs = tuple(rope_align(t, k, "k_pos") for t in k_cs)
    return kernels.rotate_qk(q, k, q_cs, k_cs, layout, inplace=inplace, out=out, engine=engine)
