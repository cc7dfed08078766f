"""`posenc bench`: speed and memory of posenc side by side with the libraries people use.

    posenc bench [--device cpu|cuda] [--quick] [--smoke] [--json FILE] [--threads N]

One process measures, in this order (each library that is not installed is skipped with a note):
    copy   the machine's copy bandwidth: q and k copied once into preallocated buffers (the
           physical limit of RoPE, which reads and writes q and k once);
    rope   RoPE on q and k, forward and forward+backward: posenc (out-of-place, into out=
           buffers, in place, and its pure-PyTorch reference) against transformers'
           apply_rotary_pos_emb with Llama's cos/sin, rotary-embedding-torch, x-transformers
           (and on CUDA Liger-Kernel and flash-attn);
    table  sinusoidal table generation against positional-encodings;
    bias   alibi / t5 / fire causal attention, T = 1k ... 32k: time and peak extra memory of
           posenc.attention against materializing the bias as transformers' T5 (compute_bias)
           and BLOOM (build_alibi_tensor + baddbmm) do;
    train  training tokens/s of posenc.TransformerLM against an x-transformers model of the
           same size and encoding, at the arena's default size.

Times are medians of repeats after warm-up. "ratio" = that row's time / posenc's time (> 1:
posenc is faster). "of limit" = copy time / the row's time (1.0 = at the copy bandwidth).

Peak memory (CPU): each path of the bias section runs in its own subprocess (so one library's
caches never count against another). After warm-up and timing, freed heap memory is given back
(malloc_trim) and the peak resident set size reset (Linux: "5" into /proc/self/clear_refs), the
op runs once more, and peak extra = VmHWM -
VmRSS before the call: every byte the op made resident, allocator caches included. On CUDA:
torch.cuda.max_memory_allocated minus what was allocated before the call.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from dataclasses import asdict, dataclass, field

import torch

GB = 1e9


@dataclass
class Row:
    section: str
    case: str
    impl: str
    ms: float | None = None
    ratio: float | None = None  # this row's time / posenc's time in the same case
    of_limit: float | None = None  # copy time / this row's time
    peak_mb: float | None = None
    note: str = ""


@dataclass
class Report:
    machine: dict
    args: dict
    rows: list[Row] = field(default_factory=list)
    targets: list[dict] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


# ------------------------------------------------------------------------------ timing


def sync(device: str) -> None:
    if device == "cuda":
        torch.cuda.synchronize()


def timeit(fn, device: str, repeats: int, warmup: int = 2) -> float:
    """Median wall time of fn() in ms, after `warmup` calls."""
    for _ in range(warmup):
        fn()
    sync(device)
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        sync(device)
        times.append(time.perf_counter() - t0)
    return 1e3 * statistics.median(times)


def optional(module: str):
    """Import a benchmarked library, or None (the caller adds a 'not installed' note)."""
    try:
        return __import__(module, fromlist=["_"])
    except Exception:  # noqa: BLE001 - missing or broken: skipped either way
        return None


# -------------------------------------------------------------------------------- sizes


@dataclass
class Sizes:
    B: int = 4
    H: int = 16
    T: int = 2048
    Dh: int = 128
    repeats: int = 7
    warmup: int = 2
    table_T: int = 8192
    table_dim: int = 512
    bias_T: tuple = (1024, 2048, 4096, 8192, 16384, 32768)
    bias_H: int = 8
    bias_Dh: int = 64
    bias_encodings: tuple = ("alibi", "t5", "fire")
    train_steps: int = 20
    train_encodings: tuple = ("rope", "alibi")


def sizes_for(args) -> Sizes:
    if args.smoke:  # tiny: for the test suite, checks the wiring, measures nothing useful
        return Sizes(
            B=1, H=2, T=64, Dh=32, repeats=2, warmup=1, table_T=64, table_dim=16, bias_T=(128,),
            bias_H=2, bias_Dh=16, bias_encodings=("alibi",), train_steps=2,
            train_encodings=("rope",),
        )  # fmt: skip
    if args.quick:  # the target RoPE shape, fewer repeats, short bias sweep
        return Sizes(
            repeats=3, warmup=1, bias_T=(1024, 2048), bias_encodings=("alibi", "t5"), train_steps=6,
            train_encodings=("rope",),
        )  # fmt: skip
    return Sizes()


def arena_size() -> dict:
    """The arena's default model and batch (posenc.arena), or its documented defaults."""
    try:
        from posenc.arena.runner import ArenaConfig

        c = ArenaConfig()
        return dict(dim=c.dim, depth=c.depth, heads=c.heads, batch=c.batch_size, T=c.train_len)
    except Exception:  # noqa: BLE001 - arena not importable: same numbers, stated in the note
        return dict(dim=128, depth=2, heads=4, batch=32, T=64)


# --------------------------------------------------------------------------------- copy


def bench_copy(rep: Report, s: Sizes, device: str) -> float:
    q = torch.randn(s.B, s.H, s.T, s.Dh, device=device)
    k = torch.randn_like(q)
    oq, ok = torch.empty_like(q), torch.empty_like(k)
    ms = timeit(lambda: (oq.copy_(q), ok.copy_(k)), device, s.repeats)
    moved = 2 * 2 * q.numel() * q.element_size()  # read + write, q and k
    note = f"{moved / GB / (ms / 1e3):.1f} GB/s (read + write of q and k)"
    rep.rows.append(Row("copy", "q,k", "torch copy_ into buffers", ms, None, 1.0, note=note))
    return ms


# --------------------------------------------------------------------------------- rope


def reference_qk(q, k, pos, inv):
    """posenc.functional's pure-PyTorch reference RoPE on q and k (no fast path)."""
    from posenc.functional import apply_rope_reference, rope_align, rope_cos_sin

    cos, sin = rope_cos_sin(pos, inv)
    return tuple(
        apply_rope_reference(x, rope_align(cos, x, "p"), rope_align(sin, x, "p"), "half", False)
        for x in (q, k)
    )


def rope_impls(s: Sizes, device: str, notes: list[str]):
    """name -> (fwd(q, k) -> (q', k'), supports_backward). posenc first."""
    from posenc import functional
    from posenc.functional import rope_inv_freq

    inv, _ = rope_inv_freq(s.Dh)
    inv = inv.to(device)
    pos = torch.arange(s.T, device=device)
    impls = {
        "posenc": (lambda q, k: functional.apply_rope_qk_fast(q, k, pos, None, inv), True),
        "posenc out=": (None, False),  # filled in bench_rope (needs the buffers)
        "posenc in-place": (
            lambda q, k: functional.apply_rope_qk_fast(q, k, pos, None, inv, inplace=True),
            False,
        ),
        "posenc reference": (lambda q, k: reference_qk(q, k, pos, inv), True),
    }
    tf = optional("transformers.models.llama.modeling_llama")
    if tf is not None:
        from transformers import LlamaConfig

        cfg = LlamaConfig(
            hidden_size=s.H * s.Dh, num_attention_heads=s.H, head_dim=s.Dh,
            max_position_embeddings=s.T,
        )  # fmt: skip
        rot = tf.LlamaRotaryEmbedding(config=cfg).to(device)
        pid = pos[None]

        def hf(q, k):
            cos, sin = rot(q, pid)  # Llama computes cos/sin per forward, then applies them
            return tf.apply_rotary_pos_emb(q, k, cos, sin)

        impls["transformers"] = (hf, True)
    else:
        notes.append("transformers not installed: its RoPE skipped")
    ret = optional("rotary_embedding_torch")
    if ret is not None:
        r = ret.RotaryEmbedding(dim=s.Dh).to(device)
        impls["rotary-embedding-torch"] = (
            lambda q, k: (r.rotate_queries_or_keys(q), r.rotate_queries_or_keys(k)),
            True,
        )
    else:
        notes.append("rotary-embedding-torch not installed: skipped")
    xt = optional("x_transformers.x_transformers")
    if xt is not None:
        xr = xt.RotaryEmbedding(s.Dh).to(device)

        def xtr(q, k):
            freqs, scale = xr(pos)
            return xt.apply_rotary_pos_emb(q, freqs, scale), xt.apply_rotary_pos_emb(
                k, freqs, scale
            )

        impls["x-transformers"] = (xtr, True)
    else:
        notes.append("x-transformers not installed: skipped")
    if device == "cuda":
        add_cuda_rope_impls(impls, s, pos, notes)
    else:
        notes.append("Liger-Kernel and flash-attn rotary: CUDA only, not measured on CPU")
    return impls


def add_cuda_rope_impls(impls, s, pos, notes) -> None:
    from posenc.functional import rope_cos_sin, rope_inv_freq

    inv, _ = rope_inv_freq(s.Dh)
    cos, sin = rope_cos_sin(pos, inv.to(pos.device))  # [T, Dh/2]
    liger = optional("liger_kernel.ops.rope")
    if liger is not None:
        full_cos = torch.cat((cos, cos), -1)[None]
        full_sin = torch.cat((sin, sin), -1)[None]
        fn = liger.LigerRopeFunction.apply
        impls["Liger-Kernel"] = (lambda q, k: fn(q, k, full_cos, full_sin), True)
    else:
        notes.append("Liger-Kernel not installed: skipped")
    fa = optional("flash_attn.layers.rotary")
    if fa is not None:

        def flash(q, k):  # flash-attn wants [B, T, H, Dh]
            qt, kt = q.transpose(1, 2), k.transpose(1, 2)
            return fa.apply_rotary_emb(qt, cos, sin), fa.apply_rotary_emb(kt, cos, sin)

        impls["flash-attn"] = (flash, True)
    else:
        notes.append("flash-attn not installed: skipped")


def bench_rope(rep: Report, s: Sizes, device: str, copy_ms: float) -> dict:
    from posenc import functional, kernels
    from posenc.functional import rope_inv_freq

    torch.manual_seed(0)
    q0 = torch.randn(s.B, s.H, s.T, s.Dh, device=device)
    k0 = torch.randn_like(q0)
    oq, ok = torch.empty_like(q0), torch.empty_like(k0)
    inv, _ = rope_inv_freq(s.Dh)
    pos = torch.arange(s.T, device=device)
    impls = rope_impls(s, device, rep.notes)
    impls["posenc out="] = (
        lambda q, k: functional.apply_rope_qk_fast(q, k, pos, None, inv.to(device), out=(oq, ok)),
        False,
    )
    case = f"B={s.B} H={s.H} T={s.T} Dh={s.Dh} f32"
    times: dict[str, float] = {}
    with torch.no_grad():
        for name, (fn, _) in impls.items():
            q, k = (q0.clone(), k0.clone()) if "in-place" in name else (q0, k0)
            try:
                times[name] = timeit(lambda fn=fn, q=q, k=k: fn(q, k), device, s.repeats, s.warmup)
            except Exception as err:  # noqa: BLE001 - one broken library must not stop the run
                rep.notes.append(f"rope fwd {name}: failed ({type(err).__name__}: {err})")
    for name, ms in times.items():
        base = times.get("posenc")
        rep.rows.append(Row("rope fwd", case, name, ms, ms / base if base else None, copy_ms / ms))
    rep.notes.append(f"posenc fast RoPE engines: {kernels.engine_status()}")

    bwd: dict[str, float] = {}
    gq, gk = torch.randn_like(q0), torch.randn_like(k0)
    for name, (fn, has_bwd) in impls.items():
        if not has_bwd:
            continue
        q, k = q0.clone().requires_grad_(), k0.clone().requires_grad_()

        def step(fn=fn, q=q, k=k):
            q.grad = k.grad = None
            outs = fn(q, k)
            torch.autograd.backward(list(outs), [gq, gk])

        try:
            bwd[name] = timeit(step, device, s.repeats, s.warmup)
        except Exception as err:  # noqa: BLE001
            rep.notes.append(f"rope fwd+bwd {name}: failed ({type(err).__name__}: {err})")
    for name, ms in bwd.items():
        base = bwd.get("posenc")
        rep.rows.append(
            Row("rope fwd+bwd", case, name, ms, ms / base if base else None, 2 * copy_ms / ms)
        )
    return {"fwd": times, "bwd": bwd}


# -------------------------------------------------------------------------------- table


def bench_table(rep: Report, s: Sizes, device: str) -> None:
    from posenc.functional import sinusoidal_table

    pos = torch.arange(s.table_T, device=device)
    case = f"T={s.table_T} D={s.table_dim}"
    ours = timeit(lambda: sinusoidal_table(pos, s.table_dim), device, s.repeats)
    rep.rows.append(Row("sin table", case, "posenc", ours, 1.0))
    pe = optional("positional_encodings.torch_encodings")
    if pe is None:
        rep.notes.append("positional-encodings not installed: skipped")
        return
    enc = pe.PositionalEncoding1D(s.table_dim).to(device)
    x = torch.zeros(1, s.table_T, s.table_dim, device=device)

    def theirs():
        enc.cached_penc = None  # it caches its last table; time the generation
        return enc(x)

    ms = timeit(theirs, device, s.repeats)
    rep.rows.append(Row("sin table", case, "positional-encodings", ms, ms / ours))


# --------------------------------------------------------------------------------- bias

BIAS_PATHS = ("posenc", "materialized")
# FIRE runs an MLP on every (query, key) pair: T = 8192 takes over 7 minutes per path on 2 cores
BIAS_MAX_T = {"fire": 4096}


def materialized_attention(name: str, q, k, v, enc):
    """Causal attention with the full [1, H, T, T] bias built the way transformers does:
    T5 (compute_bias: buckets -> embedding, added to q·k), BLOOM (build_alibi_tensor +
    baddbmm), FIRE (no transformers model: posenc's own bias(), materialized)."""
    B, H, T, Dh = q.shape
    scale = enc.softmax_scale(Dh)
    if name == "t5":
        from transformers.models.t5.modeling_t5 import T5Attention

        pos = torch.arange(T, device=q.device)
        rel = pos[None, :] - pos[:, None]  # key - query
        buckets = T5Attention._relative_position_bucket(
            rel, bidirectional=enc.bidirectional, num_buckets=enc.num_buckets,
            max_distance=enc.max_distance,
        )  # fmt: skip
        bias = enc.relative_attention_bias(buckets).permute(2, 0, 1)[None]  # [1, H, T, T]
        scores = torch.matmul(q, k.transpose(-1, -2)) * scale + bias
    elif name == "alibi":
        from transformers.models.bloom.modeling_bloom import build_alibi_tensor

        alibi = build_alibi_tensor(torch.ones(B, T, device=q.device), H, q.dtype)  # [B*H, 1, T]
        scores = torch.baddbmm(
            alibi, q.reshape(B * H, T, Dh), k.reshape(B * H, T, Dh).transpose(1, 2),
            beta=1.0, alpha=scale,
        ).view(B, H, T, T)  # fmt: skip
    else:
        pos = torch.arange(T, device=q.device)
        scores = torch.matmul(q, k.transpose(-1, -2)) * scale + enc.bias(q, k, pos, pos)
    causal = torch.ones(T, T, dtype=torch.bool, device=q.device).tril()
    scores = scores.masked_fill(~causal, torch.finfo(scores.dtype).min)
    return torch.matmul(scores.softmax(-1), v)


def proc_status_kb(field: str) -> int | None:
    """A field of /proc/self/status in kB (VmRSS, VmHWM), or None off Linux."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith(field + ":"):
                    return int(line.split()[1])
    except OSError:
        pass
    return None


def reset_peak_rss() -> bool:
    """Give freed heap memory back to the OS (glibc malloc_trim, so a later allocation cannot
    reuse resident pages unseen), then reset the peak RSS (VmHWM) to the current RSS (Linux
    >= 4.0, /proc/self/clear_refs)."""
    import ctypes
    import gc

    gc.collect()
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL("libc.so.6").malloc_trim(0)
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        return True
    except OSError:
        return False


def bias_case_worker(spec: dict) -> list[dict]:
    """Run one path over increasing T in this process: [{T, ms, peak_mb}] (see module doc).

    Peak extra memory of one call: VmHWM (peak RSS, reset just before the call through
    /proc/self/clear_refs) minus VmRSS before it; where the reset is not possible, the
    ru_maxrss growth (an underestimate when an earlier peak was higher)."""
    import resource

    import posenc
    from posenc.attention import attention

    torch.set_num_threads(spec["threads"])
    device, name, path = spec["device"], spec["encoding"], spec["path"]
    results = []
    for T in spec["T"]:
        torch.manual_seed(0)
        H, Dh = spec["H"], spec["Dh"]
        enc = posenc.build(name, dim=H * Dh, heads=H, head_dim=Dh, max_len=T).to(device)
        if name == "t5":
            enc = posenc.build(name, heads=H, bidirectional=False).to(device)
        q, k, v = (torch.randn(1, H, T, Dh, device=device) for _ in range(3))

        def run(enc=enc, q=q, k=k, v=v):
            if path == "materialized":
                return materialized_attention(name, q, k, v, enc)
            return attention(q, k, v, enc, causal=True)

        with torch.no_grad():
            ms = timeit(run, device, spec["repeats"], warmup=1)
            if device == "cuda":
                torch.cuda.reset_peak_memory_stats()
                base = torch.cuda.memory_allocated()
                run()
                peak = torch.cuda.max_memory_allocated() - base
            elif reset_peak_rss() and proc_status_kb("VmHWM") is not None:
                base = proc_status_kb("VmRSS")
                run()
                peak = (proc_status_kb("VmHWM") - base) * 1024
            else:
                base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
                run()
                peak = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - base) * 1024
        results.append({"T": T, "ms": ms, "peak_mb": max(peak, 0) / 1e6})
        del q, k, v, enc
    return results


def available_memory() -> float:
    """Bytes the OS can still give (MemAvailable), or the GPU's free memory."""
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        return float(torch.cuda.mem_get_info()[0])
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return float(line.split()[1]) * 1024
    except OSError:
        pass
    return 8 * GB


def run_worker(spec: dict) -> list[dict]:
    cmd = [sys.executable, "-m", "posenc.bench", "--worker", json.dumps(spec)]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=3600)
    if proc.returncode != 0:
        raise RuntimeError(proc.stderr.strip().splitlines()[-1] if proc.stderr else "failed")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def bench_bias(rep: Report, s: Sizes, device: str, threads: int) -> dict:
    if optional("transformers") is None:
        rep.notes.append("transformers not installed: the materialized T5/BLOOM paths skipped")
    for name, top in BIAS_MAX_T.items():
        if name in s.bias_encodings and max(s.bias_T) > top:
            rep.notes.append(f"{name}: measured up to T={top} only (its MLP bias is slow on CPU)")
    avail = available_memory()
    out: dict = {}
    for name in s.bias_encodings:
        results = {}
        for path in BIAS_PATHS:
            Ts = [T for T in s.bias_T if BIAS_MAX_T.get(name, T) >= T]
            if path == "materialized":
                # bias + scores + probabilities, float32, [H, T, T] each (T5 and BLOOM keep all 3)
                need = {T: 3 * s.bias_H * T * T * 4 for T in Ts}
                skip = [T for T in Ts if need[T] > 0.6 * avail]
                for T in skip:
                    rep.notes.append(
                        f"{name} materialized at T={T} skipped: needs ~{need[T] / GB:.1f} GB, "
                        f"{avail / GB:.1f} GB available"
                    )
                Ts = [T for T in Ts if T not in skip]
                if optional("transformers") is None and name in ("t5", "alibi"):
                    Ts = []
            if not Ts:
                continue
            spec = dict(
                device=device, encoding=name, path=path, T=Ts, H=s.bias_H, Dh=s.bias_Dh,
                repeats=max(1, min(s.repeats, 3)), threads=threads,
            )  # fmt: skip
            try:
                results[path] = {r["T"]: r for r in run_worker(spec)}
            except Exception as err:  # noqa: BLE001
                rep.notes.append(f"bias {name} {path}: failed ({err})")
        for T in s.bias_T:
            ours = results.get("posenc", {}).get(T)
            for path in BIAS_PATHS:
                r = results.get(path, {}).get(T)
                if r is None:
                    continue
                impl = "posenc.attention" if path == "posenc" else materialized_label(name)
                ratio = r["ms"] / ours["ms"] if ours else None
                case = f"{name} T={T} H={s.bias_H} Dh={s.bias_Dh} B=1 causal"
                rep.rows.append(Row("bias attn", case, impl, r["ms"], ratio, None, r["peak_mb"]))
        out[name] = results
    return out


def materialized_label(name: str) -> str:
    return {
        "t5": "materialized (T5 compute_bias)",
        "alibi": "materialized (BLOOM build_alibi_tensor)",
    }.get(name, "materialized (posenc bias())")


# -------------------------------------------------------------------------------- train


def xtransformers_model(cfg: dict, encoding: str, vocab: int):
    from x_transformers import Decoder, TransformerWrapper

    pos = {"rope": dict(rotary_pos_emb=True), "alibi": dict(alibi_pos_bias=True)}[encoding]
    return TransformerWrapper(
        num_tokens=vocab, max_seq_len=cfg["T"], use_abs_pos_emb=False,
        attn_layers=Decoder(
            dim=cfg["dim"], depth=cfg["depth"], heads=cfg["heads"],
            attn_dim_head=cfg["dim"] // cfg["heads"], ff_mult=4, **pos,
        ),
        tie_embedding=True,  # posenc ties the output head to the embedding too
    )  # fmt: skip


def bench_train(rep: Report, s: Sizes, device: str) -> dict:
    from posenc.model import TransformerLM

    cfg, vocab = arena_size(), 256
    if s.B == 1:  # --smoke
        cfg = dict(dim=32, depth=1, heads=2, batch=2, T=16)
    B, T = cfg["batch"], cfg["T"]
    out = {}
    xt = optional("x_transformers")
    if xt is None:
        rep.notes.append("x-transformers not installed: training comparison skipped")
    for encoding in s.train_encodings:
        models = {
            "posenc": TransformerLM(
                vocab, cfg["dim"], cfg["depth"], cfg["heads"], encoding=encoding, max_len=T
            )
        }
        if xt is not None:
            models["x-transformers"] = xtransformers_model(cfg, encoding, vocab)
        case = f"{encoding} dim={cfg['dim']} depth={cfg['depth']} heads={cfg['heads']} B={B} T={T}"
        speeds = {}
        for name, model in models.items():
            model.to(device).train()
            opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
            g = torch.Generator().manual_seed(0)
            x = torch.randint(0, vocab, (B, T + 1), generator=g).to(device)

            def step(model=model, opt=opt, x=x):
                logits = model(x[:, :-1])
                loss = torch.nn.functional.cross_entropy(logits.flatten(0, 1), x[:, 1:].flatten())
                opt.zero_grad(set_to_none=True)
                loss.backward()
                opt.step()

            ms = timeit(step, device, s.train_steps, warmup=3)
            speeds[name] = B * T / (ms / 1e3)
            params = sum(p.numel() for p in model.parameters())
            rep.rows.append(
                Row(
                    "train",
                    case,
                    name,
                    ms,
                    None,
                    note=f"{speeds[name]:,.0f} tok/s, {params:,} params",
                )
            )
        for row in rep.rows:
            if row.section == "train" and row.case == case:
                row.ratio = speeds["posenc"] / speeds[row.impl]  # their time / ours
        out[encoding] = speeds
    return out


# ------------------------------------------------------------------------------ targets


def check_targets(rep: Report, s: Sizes, copy_ms, rope, bias, train, quick: bool) -> None:
    at_target = (s.B, s.H, s.T, s.Dh) == (4, 16, 2048, 128)

    def add(name, ok, value, note=""):
        status = "N/A" if ok is None else ("PASS" if ok else "FAIL")
        rep.targets.append(dict(target=name, status=status, value=value, note=note))

    fwd, bwd = (rope or {}).get("fwd", {}), (rope or {}).get("bwd", {})
    hf, hfb = fwd.get("transformers"), bwd.get("transformers")
    why = "" if at_target else "not at the target shape (B=4 H=16 T=2048 Dh=128)"
    for label, ours, other, need in (
        ("out-of-place RoPE >= 3x transformers", fwd.get("posenc"), hf, 3.0),
        ("in-place RoPE >= 10x transformers", fwd.get("posenc in-place"), hf, 10.0),
        ("fwd+bwd RoPE >= 3x transformers", bwd.get("posenc"), hfb, 3.0),
    ):
        if ours and other and at_target:
            add(label, other / ours >= need, f"{other / ours:.1f}x")
        else:
            add(label, None, "-", why or "transformers not measured")
    inp = fwd.get("posenc in-place")
    if inp and copy_ms and at_target:
        add("in-place RoPE within 1.5x of copy", inp / copy_ms <= 1.5, f"{inp / copy_ms:.2f}x")
    else:
        add("in-place RoPE within 1.5x of copy", None, "-", why)
    limit_mb = 8.6e3 / 8
    for name in ("t5", "alibi"):
        res = (bias or {}).get(name, {})
        ours = res.get("posenc", {}).get(16384)
        label = f"{name} T=16384 peak extra memory <= 1/8 of 8.6 GB"
        if ours:
            add(label, ours["peak_mb"] <= limit_mb, f"{ours['peak_mb']:.0f} MB")
        else:
            add(label, None, "-", "T=16384 not in this run" + (" (--quick)" if quick else ""))
        mat = res.get("materialized", {})
        common = [T for T in mat if T in res.get("posenc", {})]
        label = f"{name} no slower than materialized (largest T where it fits)"
        if common:
            T = max(common)
            r = mat[T]["ms"] / res["posenc"][T]["ms"]
            add(label, r >= 1.0, f"{r:.2f}x at T={T}")
        else:
            add(label, None, "-", "materialized path not measured")
    sp = (train or {}).get("rope", {})
    if "posenc" in sp and "x-transformers" in sp:
        r = sp["posenc"] / sp["x-transformers"]
        add("TransformerLM training >= 1.2x x-transformers (rope)", r >= 1.2, f"{r:.2f}x")
    else:
        add("TransformerLM training >= 1.2x x-transformers (rope)", None, "-", "not measured")


# -------------------------------------------------------------------------------- print


def fmt(v, spec: str) -> str:
    return "-" if v is None else format(v, spec)


def print_report(rep: Report) -> None:
    head = f"{'section':<13} {'case':<38} {'implementation':<40} {'ms':>10} {'ratio':>7} "
    head += f"{'of limit':>8} {'peak MB':>8}  note"
    print(head)
    print("-" * len(head))
    for r in rep.rows:
        print(
            f"{r.section:<13} {r.case[:38]:<38} {r.impl[:40]:<40} {fmt(r.ms, '10.2f')} "
            f"{fmt(r.ratio, '7.2f')} {fmt(r.of_limit, '8.2f')} {fmt(r.peak_mb, '8.0f')}  {r.note}"
        )
    print("\nratio = time / posenc's time (> 1: posenc faster); of limit = copy time / time")
    print("\ntargets:")
    for t in rep.targets:
        note = f"  ({t['note']})" if t["note"] else ""
        print(f"  {t['status']:<4}  {t['target']:<62} {t['value']}{note}")
    if rep.notes:
        print("\nnotes:")
        for n in rep.notes:
            print(f"  - {n}")


# --------------------------------------------------------------------------------- main


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="posenc bench", description=__doc__.split("\n")[0])
    p.add_argument("--device", default="cpu", choices=("cpu", "cuda"))
    p.add_argument("--quick", action="store_true", help="fewer repeats and lengths (< 2 min)")
    p.add_argument("--smoke", action="store_true", help="tiny sizes: checks that it runs")
    p.add_argument("--json", metavar="FILE", help="also write every number to FILE")
    p.add_argument("--threads", type=int, default=2, help="torch threads (default 2)")
    p.add_argument(
        "--sections",
        default="copy,rope,table,bias,train",
        help="comma-separated subset of copy,rope,table,bias,train",
    )
    p.add_argument("--worker", help=argparse.SUPPRESS)  # internal: one bias path per process
    return p


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    if args.worker:
        print(json.dumps(bias_case_worker(json.loads(args.worker))))
        return 0
    if args.threads < 1:
        raise ValueError(f"--threads must be >= 1, got {args.threads}")
    sections = [x.strip() for x in args.sections.split(",") if x.strip()]
    known = ("copy", "rope", "table", "bias", "train")
    bad = [x for x in sections if x not in known]
    if bad:
        raise ValueError(f"--sections: unknown {bad}; allowed: {', '.join(known)}")
    if args.device == "cuda" and not torch.cuda.is_available():
        raise ValueError("--device cuda: no CUDA device here; allowed: cpu")
    torch.set_num_threads(args.threads)
    s, device = sizes_for(args), args.device
    machine = dict(
        platform=platform.platform(), processor=platform.processor(), cpus=os.cpu_count(),
        threads=args.threads, torch=torch.__version__, python=platform.python_version(),
        device=torch.cuda.get_device_name() if device == "cuda" else "cpu",
        load_avg=os.getloadavg() if hasattr(os, "getloadavg") else None,
    )  # fmt: skip
    rep = Report(machine=machine, args=vars(args))
    t0 = time.time()
    copy_ms = bench_copy(rep, s, device) if "copy" in sections or "rope" in sections else None
    rope = bench_rope(rep, s, device, copy_ms) if "rope" in sections else None
    if "table" in sections:
        bench_table(rep, s, device)
    bias = bench_bias(rep, s, device, args.threads) if "bias" in sections else None
    train = bench_train(rep, s, device) if "train" in sections else None
    check_targets(rep, s, copy_ms, rope, bias, train, args.quick)
    rep.notes.append(
        f"wall time {time.time() - t0:.0f} s; load average at start {machine['load_avg']}"
    )
    where = f"{machine['device']} ({machine['platform']})"
    print(f"posenc bench on {where}, torch {torch.__version__}, {args.threads} threads, float32\n")
    print_report(rep)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({**asdict(rep)}, f, indent=1, default=str)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
