"""Rotary position embedding (Su et al. 2021): frequencies, cos/sin, and the rotation.

`apply_rope` is the one public rotation: through posenc.kernels (the C kernel on CPU) where it
applies, else the pure-PyTorch reference `_rope_reference`.
"""

from __future__ import annotations

import torch

from posenc import kernels
from posenc.checks import check_bool, check_int, check_positions, check_tensor
from posenc.functional.absolute import position_angles
from posenc.functional.rope_scaling import ROPE_SCALING, rope_type_of

ROPE_LAYOUTS = ("half", "interleaved")


def rope_inv_freq(
    dim: int, base: float = 10000.0, scaling: dict | None = None, seq_len: int | None = None
) -> tuple[torch.Tensor, float]:
    """Inverse frequencies [dim // 2] float32 of a rotary dim `dim`, and the attention factor
    (a factor on cos and sin). `scaling` is a Hugging Face `rope_scaling` dict
    (posenc.functional.rope_scaling; its `rope_theta` overrides `base`); `seq_len`, the
    current length, matters for the dynamic ones only.
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


def rope_cos_sin(
    positions: torch.Tensor,
    inv_freq: torch.Tensor,
    attention_factor: float = 1.0,
    dtype: torch.dtype = torch.float32,
) -> tuple[torch.Tensor, torch.Tensor]:
    """positions [...], inv_freq [R/2] -> cos, sin [..., R/2] of positions * inv_freq, times
    attention_factor, in float32 (float64 for `dtype` float64): for apply_rope(cos=, sin=)."""
    angles = position_angles(positions, inv_freq.to(positions.device), dtype)  # float32 / 64
    cos, sin = angles.cos(), angles.sin()
    if attention_factor != 1.0:
        cos, sin = cos * attention_factor, sin * attention_factor
    return cos, sin


def rope_pairs(x: torch.Tensor, layout: str) -> tuple[torch.Tensor, torch.Tensor]:
    """Views of the two members of each rotary pair of x [..., R]: [..., R/2] each."""
    if layout == "half":  # GPT-NeoX / transformers: pair (i, i + R/2)
        return x.chunk(2, dim=-1)
    pairs = x.unflatten(-1, (-1, 2))  # Meta / GPT-J / rotary-embedding-torch: pair (2i, 2i+1)
    return pairs[..., 0], pairs[..., 1]


def _rope_reference(
    x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, layout: str, inplace: bool
) -> torch.Tensor:
    """Rotate the first R = 2 * cos.shape[-1] channels of x [..., Dh], (a, b) ->
    (a cos - b sin, b cos + a sin), in cos's dtype, rounded once; the rest pass through.
    Out of place under torch.compile (inductor cannot trace `out=`) and with gradients.
    """
    r = 2 * cos.shape[-1]
    xr = x[..., :r]
    work = xr if xr.dtype == cos.dtype else xr.to(cos.dtype)
    a, b = rope_pairs(work, layout)
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
        oa, ob = rope_pairs(out[..., :r], layout)
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
    """Validate layout, rotary_dim against inv_freq's R/2 entries (x checked); return R."""
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
    """t [*P, R/2] -> broadcastable to x[..., :R/2] ([B, T] for x [B, H, T, Dh]: a head axis)."""
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


def _check_angles(x, positions, inv_freq, cos, sin) -> str:
    """Which angles were given ('positions' or 'cos'); TypeError / ValueError otherwise."""
    if not isinstance(x, torch.Tensor) or not x.is_floating_point():
        raise TypeError(f"x must be a floating-point torch.Tensor, got {getattr(x, 'dtype', x)!r}")
    if cos is None and sin is None:
        if positions is None or inv_freq is None:
            raise TypeError("apply_rope needs positions and inv_freq, or cos and sin")
        check_tensor("inv_freq", inv_freq)
        return "positions"
    if positions is not None or inv_freq is not None:
        raise TypeError("apply_rope takes positions and inv_freq, or cos and sin: not both")
    check_tensor("cos", cos)
    check_tensor("sin", sin)
    if cos.shape != sin.shape:
        raise ValueError(f"cos and sin must have one shape, got {tuple(cos.shape)} and "
                         f"{tuple(sin.shape)}")  # fmt: skip
    return "cos"


def apply_rope(
    x: torch.Tensor,
    positions: torch.Tensor | None = None,
    inv_freq: torch.Tensor | None = None,
    layout: str = "half",
    rotary_dim: int | None = None,
    attention_factor: float = 1.0,
    inplace: bool = False,
    *,
    cos: torch.Tensor | None = None,
    sin: torch.Tensor | None = None,
    out: torch.Tensor | None = None,
    engine: str | None = None,
    check: bool = True,
) -> torch.Tensor:
    """Rotary position embedding (Su et al. 2021) of x [..., Dh], e.g. [B, H, T, Dh]: posenc's
    one RoPE function; x's dtype out.

    The angles: `positions` ([T], [B, T] or broadcastable to x without its last dim; floats
    allowed) and `inv_freq` [R/2], or precomputed `cos`, `sin` [*P, R/2] (rope_cos_sin). The
    first R channels rotate, the rest pass through (`rotary_dim`, if given, must equal R).
    layout: "half" pairs channel i with i + R/2 (GPT-NeoX, transformers); "interleaved" 2i
    with 2i + 1 (Meta, GPT-J). cos and sin are multiplied by attention_factor.

    inplace=True writes into x, out= into a preallocated tensor (not overlapping x unless it
    is x); neither autograd on x. engine: None the C kernel where it applies (CPU, float32 /
    bfloat16, no gradient through cos/sin; POSENC_ROPE_ENGINE=eager turns it off), else the
    reference; "reference"; or one of posenc.kernels.ENGINES. check=False skips the value
    checks of positions (no host sync).
    """
    given = _check_angles(x, positions, inv_freq, cos, sin)
    check_bool("inplace", inplace)
    check_bool("check", check)
    if engine not in (None, "reference", *kernels.ENGINES):
        raise ValueError(f"engine must be None, 'reference' or one of {kernels.ENGINES}, "
                         f"got {engine!r}")  # fmt: skip
    if given == "positions":
        positions = check_positions(positions) if check else check_tensor("positions", positions)
        _rope_check(x, layout, rotary_dim, inv_freq.shape[-1])
        cos, sin = rope_cos_sin(positions, inv_freq, attention_factor, x.dtype)
    else:
        _rope_check(x, layout, rotary_dim, cos.shape[-1])
        if attention_factor != 1.0:
            cos, sin = cos * attention_factor, sin * attention_factor
    cos, sin = rope_align(cos, x, given), rope_align(sin, x, given)
    return _rotate(x, cos, sin, layout, inplace, out, engine)


def _rotate(x, cos, sin, layout: str, inplace: bool, out, engine: str | None) -> torch.Tensor:
    """The one dispatch: the reference, or posenc.kernels. engine=None takes the C kernel where
    it applies, else (and under torch.compile: ctypes cannot be traced) the reference."""
    if engine is None and out is None:
        fast = not torch.compiler.is_compiling() and kernels.use_fast(x, cos, sin, inplace)
        engine = None if fast else "reference"
    if engine == "reference":
        if out is not None:
            raise ValueError("engine='reference' has no out=: use inplace=True, or an engine "
                             f"of {kernels.ENGINES}")  # fmt: skip
        return _rope_reference(x, cos, sin, layout, inplace)
    return kernels._rotate(x, cos, sin, layout, inplace=inplace, out=out, engine=engine)


def _rope_qk_fast(q, k, q_pos, k_pos, inv_freq, layout="half", attention_factor=1.0, *,
                  inplace=False, out=None, engine=None):  # fmt: skip
    """q and k through posenc.kernels in one call (on CUDA with Triton: one kernel launch),
    without the value checks; cos/sin built once when k_pos is None or is q_pos (posenc bench
    measures it)."""
    q_cs = rope_cos_sin(q_pos, inv_freq, attention_factor, q.dtype)
    same = k_pos is None or k_pos is q_pos
    k_cs = q_cs if same else rope_cos_sin(k_pos, inv_freq, attention_factor, k.dtype)
    q_cs = tuple(rope_align(t, q, "q_pos") for t in q_cs)
    k_cs = tuple(rope_align(t, k, "k_pos") for t in k_cs)
    return kernels._rotate_qk(q, k, q_cs, k_cs, layout, inplace=inplace, out=out, engine=engine)
