"""The paths the bias section times, each a zero-argument call over q, k, v [1, H, T, Dh]
(docs/bench/README.md, Method): posenc (backend auto), limit (SDPA without a bias), before
(backend chunked), flex (FlexAttention, forward only), materialized (the [1, H, T, T] bias the
way transformers' T5 and BLOOM build it; posenc's bias() for the others). Modes: "fwd" under
no_grad, "fwd+bwd" with a fixed random output gradient.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from posenc.attention import attention

FWD_ONLY = {"flex", "materialized"}
MATERIALIZED_LABEL = {  # how transformers materializes each bias; others: posenc's bias()
    "t5": "materialized (T5 compute_bias)",
    "alibi": "materialized (BLOOM build_alibi_tensor)",
}
LABEL = {
    "posenc": "posenc.attention",
    "limit": "SDPA without bias (limit)",
    "before": "posenc before (backend=chunked)",
    "flex": "FlexAttention compiled (score_mod)",
}


def label(path: str, name: str) -> str:
    if path == "materialized":
        return MATERIALIZED_LABEL.get(name, "materialized (posenc bias())")
    return LABEL[path]


def materialized_attention(name: str, q, k, v, enc):
    """Causal attention with the full [1, H, T, T] bias built the way transformers does."""
    B, H, T, Dh = q.shape
    scale = enc.softmax_scale(Dh)
    if name == "t5":
        from transformers.models.t5.modeling_t5 import T5Attention

        pos = torch.arange(T, device=q.device)
        rel = pos[None, :] - pos[:, None]  # [T, T], key - query
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
    causal = torch.ones(T, T, dtype=torch.bool, device=q.device).tril()  # [T, T]
    scores = scores.masked_fill(~causal, torch.finfo(scores.dtype).min)  # [B, H, T, T]
    return torch.matmul(scores.softmax(-1), v)


def forward_fn(path: str, name: str, enc):
    """(q, k, v) -> out for one path."""
    if path == "limit":
        return lambda q, k, v: F.scaled_dot_product_attention(q, k, v, is_causal=True)
    if path == "materialized":
        return lambda q, k, v: materialized_attention(name, q, k, v, enc)
    backend = {"posenc": "auto", "before": "chunked", "flex": "flex"}[path]
    return lambda q, k, v: attention(q, k, v, enc, causal=True, backend=backend)


def make_call(path: str, name: str, enc, q, k, v, mode: str):
    """A zero-argument call running `path` once in `mode`."""
    fn = forward_fn(path, name, enc)
    if mode == "fwd":

        def run():
            with torch.no_grad():
                return fn(q, k, v)

        return run
    grad = torch.randn(q.shape, generator=torch.Generator().manual_seed(1)).to(q)

    def run_bwd():
        leaves = [t.detach().requires_grad_() for t in (q, k, v)]
        fn(*leaves).backward(grad)

    return run_bwd
