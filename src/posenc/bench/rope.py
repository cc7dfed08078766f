"""Sections `copy` and `rope`: RoPE on q, k [B, H, T, Dh] float32 (cos / sin inside every
call), forward and forward+backward, posenc against other libraries; `copy` of q and k into
buffers is RoPE's limit ("of limit" = copy time / a row's time).
"""

from __future__ import annotations

import torch

from posenc.bench.common import GB, Sizes, optional, timeit
from posenc.bench.report import Report, Row
from posenc.functional import apply_rope, rope_cos_sin, rope_inv_freq
from posenc.functional.rotary import _rope_qk_fast  # q and k in one call (one Triton launch)
from posenc.kernels import engine_status


def bench_copy(rep: Report, s: Sizes, device: str) -> float:
    q = torch.randn(s.B, s.H, s.T, s.Dh, device=device)  # [B, H, T, Dh]
    k = torch.randn_like(q)
    oq, ok = torch.empty_like(q), torch.empty_like(k)
    ms = timeit(lambda: (oq.copy_(q), ok.copy_(k)), device, s.repeats)
    moved = 2 * 2 * q.numel() * q.element_size()  # read + write, q and k
    note = f"{moved / GB / (ms / 1e3):.1f} GB/s (read + write of q and k)"
    rep.rows.append(Row("copy", "q,k", "torch copy_ into buffers", ms, None, 1.0, note=note))
    return ms


def reference_qk(q, k, pos, inv):
    """posenc.functional's pure-PyTorch reference RoPE on q and k (no fast path)."""
    cos, sin = rope_cos_sin(pos, inv)  # [T, Dh/2]
    return tuple(apply_rope(x, cos=cos, sin=sin, engine="reference") for x in (q, k))


def rope_impls(s: Sizes, device: str, notes: list[str], out: tuple):
    """name -> (fwd(q, k) -> (q', k'), supports_backward), posenc first; out: the out= buffers."""
    inv = rope_inv_freq(s.Dh)[0].to(device)  # [Dh/2]
    pos = torch.arange(s.T, device=device)  # [T]
    impls = {
        "posenc": (lambda q, k: _rope_qk_fast(q, k, pos, None, inv), True),
        "posenc out=": (lambda q, k: _rope_qk_fast(q, k, pos, None, inv, out=out), False),
        "posenc in-place": (lambda q, k: _rope_qk_fast(q, k, pos, None, inv, inplace=True), False),
        "posenc reference": (lambda q, k: reference_qk(q, k, pos, inv), True),
    }
    tf = optional("transformers.models.llama.modeling_llama", notes, "transformers", "its RoPE")
    if tf is not None:
        from transformers import LlamaConfig

        cfg = LlamaConfig(
            hidden_size=s.H * s.Dh, num_attention_heads=s.H, head_dim=s.Dh,
            max_position_embeddings=s.T,
        )  # fmt: skip
        rot = tf.LlamaRotaryEmbedding(config=cfg).to(device)
        pid = pos[None]  # [1, T]

        def hf(q, k):
            cos, sin = rot(q, pid)  # Llama computes cos/sin per forward, then applies them
            return tf.apply_rotary_pos_emb(q, k, cos, sin)

        impls["transformers"] = (hf, True)
    ret = optional("rotary_embedding_torch", notes, "rotary-embedding-torch")
    if ret is not None:
        r = ret.RotaryEmbedding(dim=s.Dh).to(device)
        impls["rotary-embedding-torch"] = (
            lambda q, k: (r.rotate_queries_or_keys(q), r.rotate_queries_or_keys(k)),
            True,
        )
    xt = optional("x_transformers.x_transformers", notes, "x-transformers")
    if xt is not None:
        xr = xt.RotaryEmbedding(s.Dh).to(device)

        def xtr(q, k):
            freqs, scale = xr(pos)
            return tuple(xt.apply_rotary_pos_emb(x, freqs, scale) for x in (q, k))

        impls["x-transformers"] = (xtr, True)
    if device == "cuda":
        add_cuda_rope_impls(impls, *rope_cos_sin(pos, inv), notes)
    else:
        notes.append("Liger-Kernel and flash-attn rotary: CUDA only, not measured on CPU")
    return impls


def add_cuda_rope_impls(impls, cos, sin, notes) -> None:  # cos, sin [T, Dh/2]
    liger = optional("liger_kernel.ops.rope", notes, "Liger-Kernel")
    if liger is not None:
        full_cos = torch.cat((cos, cos), -1)[None]  # [1, T, Dh]
        full_sin = torch.cat((sin, sin), -1)[None]
        fn = liger.LigerRopeFunction.apply
        impls["Liger-Kernel"] = (lambda q, k: fn(q, k, full_cos, full_sin), True)
    fa = optional("flash_attn.layers.rotary", notes, "flash-attn")
    if fa is not None:

        def flash(q, k):  # flash-attn wants [B, T, H, Dh]
            qt, kt = q.transpose(1, 2), k.transpose(1, 2)
            return fa.apply_rotary_emb(qt, cos, sin), fa.apply_rotary_emb(kt, cos, sin)

        impls["flash-attn"] = (flash, True)


def bench_rope(rep: Report, s: Sizes, device: str, copy_ms: float) -> dict:
    """Rows "rope fwd" and "rope fwd+bwd"; {"fwd": {impl: ms}, "bwd": {impl: ms}}."""
    torch.manual_seed(0)
    q0 = torch.randn(s.B, s.H, s.T, s.Dh, device=device)  # [B, H, T, Dh]
    k0 = torch.randn_like(q0)
    impls = rope_impls(s, device, rep.notes, out=(torch.empty_like(q0), torch.empty_like(k0)))
    case = f"B={s.B} H={s.H} T={s.T} Dh={s.Dh} f32"
    gq, gk = torch.randn_like(q0), torch.randn_like(k0)  # output gradients

    def call(fn, name: str, backward: bool):
        if not backward:
            q, k = (q0.clone(), k0.clone()) if "in-place" in name else (q0, k0)
            return lambda: fn(q, k)
        q, k = q0.clone().requires_grad_(), k0.clone().requires_grad_()

        def step():
            q.grad = k.grad = None
            torch.autograd.backward(list(fn(q, k)), [gq, gk])

        return step

    out: dict[str, dict[str, float]] = {}
    for mode, label, limit in (("fwd", "rope fwd", copy_ms), ("bwd", "rope fwd+bwd", 2 * copy_ms)):
        times = out[mode] = {}
        with torch.set_grad_enabled(mode == "bwd"):
            for name, (fn, has_bwd) in impls.items():
                if mode == "fwd" or has_bwd:
                    run = call(fn, name, backward=mode == "bwd")
                    try:
                        times[name] = timeit(run, device, s.repeats, s.warmup)
                    except Exception as err:  # noqa: BLE001 - one library must not stop the run
                        rep.notes.append(f"{label} {name}: failed ({type(err).__name__}: {err})")
        base = times.get("posenc")
        for name, ms in times.items():
            rep.rows.append(Row(label, case, name, ms, ms / base if base else None, limit / ms))
        if mode == "fwd":
            rep.notes.append(f"posenc fast RoPE engines: {engine_status()}")
    return out
