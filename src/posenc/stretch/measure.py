"""The measurements, on a loaded transformers causal LM patched by posenc.hf.patch.

Perplexity: one forward pass at the longest length gives the loss of every shorter prefix of a
causal model: nll[t] is the loss of token t + 1 given tokens 0..t, so the perplexity of the
first T tokens is exp(mean(nll[:T - 1])). This holds while the rotary frequencies stay the
same, so lengths are grouped by the frequencies their call would use (`fingerprint`): static
scalings need one pass, a dynamic one a pass per length past the context (at or below it they
equal the unscaled model, and share its pass).

Retrieval: the prompt is prefilled once and the answer decoded greedily with the KV cache; a
prompt sharing a prefix with an earlier one of the same frequencies prefills only the rest
(`PromptCache`, `prefix_attention`).
"""

from __future__ import annotations

import copy
import hashlib
import inspect
from dataclasses import dataclass, field

import torch
import torch.nn.functional as F
from transformers import AttentionInterface, DynamicCache
from transformers.integrations.sdpa_attention import sdpa_attention_forward
from transformers.masking_utils import AttentionMaskInterface

from posenc.hf.patch import PosencRotaryEmbedding
from posenc.stretch.data import first_number

LOGIT_CHUNK = 1024  # positions per LM-head chunk: [1024, V] float32 logits at a time


def rope_of(model):
    """The posenc rope that a patched model's (first) rotary module uses."""
    module = next(m for m in model.modules() if isinstance(m, PosencRotaryEmbedding))
    return next(iter(module.encodings.values())).encoding


def fingerprint(model, length: int, head_dim: int) -> str:
    """A digest of the rotary frequencies and attention factors a call of `length` tokens uses,
    in every rotary module and layer type (Gemma 3's local and global ropes): equal digests,
    equal logits."""
    digest, pos = hashlib.sha1(), torch.arange(length)[None]
    for module in model.modules():
        if isinstance(module, PosencRotaryEmbedding):
            for layer_type, rope in module.encodings.items():
                inv_freq, factor = rope.encoding.frequencies(pos, rope.head_dim or head_dim)
                digest.update(repr((layer_type, float(factor))).encode())
                digest.update(inv_freq.detach().cpu().double().numpy().tobytes())
    return digest.hexdigest()[:16]


@torch.inference_mode()
def token_nll(model, ids: torch.Tensor) -> torch.Tensor:
    """ids [T] -> nll [T - 1] float64: the loss of each next token, from one forward pass."""
    device = next(model.parameters()).device
    ids = ids.to(device)
    hidden = model.base_model(input_ids=ids[None]).last_hidden_state[0]  # [T, D]
    head = model.get_output_embeddings()
    cap = getattr(model.config, "final_logit_softcapping", None)
    out = []
    for a in range(0, ids.numel() - 1, LOGIT_CHUNK):
        b = min(a + LOGIT_CHUNK, ids.numel() - 1)
        logits = head(hidden[a:b]).float()  # [n, V]
        if cap:
            logits = torch.tanh(logits / cap) * cap
        out.append(F.cross_entropy(logits, ids[a + 1 : b + 1], reduction="none"))
    return torch.cat(out).double().cpu()


def prefix_rows(nll: torch.Tensor, length: int, context: int) -> dict[str, float]:
    """The metrics of the first `length` tokens: loss (mean nll), ppl, and the loss of the
    positions within the context and past it (loss@0-C, loss@C-T)."""
    x = nll[: length - 1]
    rows = {"loss": float(x.mean()), "ppl": float(torch.exp(x.mean()))}
    inside = x[: context - 1]
    rows[f"loss@0-{min(context, length)}"] = float(inside.mean())
    if length > context:
        rows[f"loss@{context}-{length}"] = float(x[context - 1 :].mean())
    return rows


# --------------------------------------------------------------------- retrieval: a shared prefix
# Retrieval prompts of one length differ only from their first needle on (the filler before it is
# the same), so each prompt reuses the KV cache of an earlier one up to their common prefix and
# prefills only the rest: a chunk of queries after cached keys. SDPA would need an explicit
# [q, kv] mask for that (on a CPU it then computes every block); `prefix_attention` attends the
# prefix (no mask) and the chunk (causal) apart and merges them by their log-sum-exp.

PREFIX_ATTENTION = "posenc_prefix"
_FLASH_CPU = getattr(torch.ops.aten, "_scaled_dot_product_flash_attention_for_cpu", None)


def prefix_attention(module, query, key, value, attention_mask, dropout=0.0, scaling=None, **kw):
    """transformers' SDPA attention, except for a chunk after a cached prefix: query [B, H, q, Dh]
    attends all kv - q cached keys and, causally, the chunk's own ([B, Hkv, kv, Dh]). Batch 1,
    no padding, no sliding window (`shares_prefix` checks the model): its mask is None."""
    q_len, kv_len = query.shape[2], key.shape[2]
    if q_len == 1 or q_len == kv_len:
        return sdpa_attention_forward(module, query, key, value, None, dropout, scaling, **kw)
    groups = query.shape[1] // key.shape[1]
    key, value = key.repeat_interleave(groups, 1), value.repeat_interleave(groups, 1)
    cut = kv_len - q_len
    old, lse_old = _FLASH_CPU(query, key[:, :, :cut], value[:, :, :cut], 0.0, False, scale=scaling)
    new, lse_new = _FLASH_CPU(query, key[:, :, cut:], value[:, :, cut:], 0.0, True, scale=scaling)
    w = torch.sigmoid(lse_old - lse_new)[..., None]  # the prefix's share of the softmax mass
    return (w * old + (1 - w) * new).to(query.dtype).transpose(1, 2).contiguous(), None


def shares_prefix(model) -> bool:
    """The model can take `prefix_attention`: SDPA attention on a CPU, every layer full causal
    attention without soft-capping, and this torch has the CPU flash kernel."""
    cfg = model.config
    return (
        _FLASH_CPU is not None
        and next(model.parameters()).device.type == "cpu"
        and cfg._attn_implementation in ("sdpa", PREFIX_ATTENTION)
        and not getattr(cfg, "sliding_window", None)
        and not getattr(cfg, "attn_logit_softcapping", None)
        and set(getattr(cfg, "layer_types", None) or ["full_attention"]) == {"full_attention"}
    )


def use_prefix_attention(model) -> bool:
    """Switch `model` to `prefix_attention` where it `shares_prefix`; whether it did."""
    if not shares_prefix(model):
        return False
    AttentionInterface.register(PREFIX_ATTENTION, prefix_attention)
    AttentionMaskInterface.register(PREFIX_ATTENTION, lambda *args, **kwargs: None)
    model.set_attn_implementation(PREFIX_ATTENTION)
    return True


def cache_kwarg(model) -> str:
    """The name a KV cache is passed under: `cache` (transformers >= 5.2x), else
    `past_key_values`."""
    return "cache" if "cache" in inspect.signature(model.forward).parameters else "past_key_values"


@dataclass
class PromptCache:
    """The KV caches of answered prompts and the token ids each holds, all computed with the
    rotary frequencies `key` names (a prompt with another key starts afresh). Two are kept: the
    one the last prompt reused (on a tie, the oldest) and the last prompt's; prompts ordered
    from the deepest needle to the shallowest then prefill only what follows their needle."""

    key: object = None
    entries: list = field(default_factory=list)  # [(ids, cache)], oldest first
    reused: int = 0  # tokens taken from a cache, of
    tokens: int = 0  # the tokens of every prompt

    def take(self, ids: list[int], key: object):
        """A cache holding the longest prefix of `ids[:-1]` any entry shares (a copy: the
        entry stays), entered as the cache of `ids`."""
        if key != self.key:
            self.key, self.entries = key, []
        best, shared = None, 0
        for entry in self.entries:
            n = next((i for i, (a, b) in enumerate(zip(entry[0], ids[:-1])) if a != b),
                     min(len(entry[0]), len(ids) - 1))  # fmt: skip
            if n > shared:
                best, shared = entry, n
        cache = DynamicCache() if best is None else copy.deepcopy(best[1])
        if cache.get_seq_length() > shared:
            cache.crop(shared - cache.get_seq_length())  # negative: drop that many
        self.entries = [e for e in (best, (list(ids), cache)) if e is not None]
        self.reused, self.tokens = self.reused + shared, self.tokens + len(ids)
        return cache


@torch.inference_mode()
def answer(
    model, ids: list[int], max_new_tokens: int, pad_token_id: int | None, *,
    reuse: PromptCache | None = None, key: object = None,
) -> list[int]:  # fmt: skip
    """The greedy continuation of `ids` as token ids (prefill once, then the KV cache). With
    `reuse` on a model using `prefix_attention`, the prefix `ids` shares with an earlier prompt
    of the same `key` (the rotary frequencies) comes from its cache; the rest is prefilled."""
    device = next(model.parameters()).device
    x = torch.tensor([ids], device=device)
    cache = {}
    if reuse is not None and model.config._attn_implementation == PREFIX_ATTENTION:
        cache = {cache_kwarg(model): reuse.take(ids, key)}
    out = model.generate(
        x,
        attention_mask=torch.ones_like(x),
        max_new_tokens=max_new_tokens,
        do_sample=False,
        pad_token_id=pad_token_id,
        **cache,
    )
    return out[0, x.shape[1] :].tolist()


def exact_match(text: str, expected: str) -> float:
    return float(first_number(text) == expected)
