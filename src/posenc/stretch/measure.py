"""The measurements on a transformers causal LM patched by posenc.hf.patch: the perplexity of
every prefix of a window from one pass, retrieval prefilled once and each probe asked after it."""

from __future__ import annotations

import copy
import hashlib
import inspect
from dataclasses import dataclass, field
from types import SimpleNamespace

import torch
import torch.nn.functional as F
from transformers import AttentionInterface, DynamicCache
from transformers.integrations.sdpa_attention import sdpa_attention_forward
from transformers.masking_utils import AttentionMaskInterface

from posenc.hf.patch import PosencRotaryEmbedding
from posenc.stretch.data import check_whole, first_number

LOGIT_CHUNK = 1024  # positions per LM-head chunk: [1024, V] float32 logits at a time


def fingerprint(model, length: int, head_dim: int) -> str:
    """A digest of the rotary frequencies at `length` tokens: equal digests, equal logits."""
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
    if ids.ndim != 1 or ids.numel() < 2:
        raise ValueError(f"token_nll: ids must be [T] with T >= 2 tokens, got {tuple(ids.shape)}")
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


def window_rows(nll: torch.Tensor, length: int, context: int, width: int = 0) -> dict[str, float]:
    """The first `length` tokens' loss, loss@0-C, loss@C-T and (width > 0) pos@a-b, from nll."""
    check_whole(length, "length", 2)
    check_whole(context, "context")
    if length - 1 > nll.numel():
        raise ValueError(f"length {length} is longer than the pass ({nll.numel() + 1} tokens)")
    x = nll[: length - 1]  # x[t]: the loss of the token at position t + 1
    rows = {"loss": float(x.mean())}
    rows[f"loss@0-{min(context, length)}"] = float(x[: context - 1].mean())
    if length > context:
        rows[f"loss@{context}-{length}"] = float(x[context - 1 :].mean())
    if width:
        for a in range(0, length, check_whole(width, "width")):
            b = min(a + width, length)
            rows[f"pos@{a}-{b}"] = float(x[max(a - 1, 0) : b - 1].mean())
    return rows


# A prompt reusing an earlier one's cache prefills a chunk after cached keys: SDPA would need a
# [q, kv] mask (on a CPU it then computes every block); this attends the two apart and merges them.

PREFIX_ATTENTION = "posenc_prefix"
_FLASH_CPU = getattr(torch.ops.aten, "_scaled_dot_product_flash_attention_for_cpu", None)


def prefix_attention(module, query, key, value, attention_mask, dropout=0.0, scaling=None, **kw):
    """SDPA, but a chunk q [B, H, q, Dh] after a cached prefix attends the kv - q cached keys
    [B, Hkv, kv, Dh] and, causally, its own (batch 1, no mask: `use_prefix_attention`)."""
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


def use_prefix_attention(model) -> bool:
    """Switch `model` to `prefix_attention` where it can take it; whether it did."""
    cfg = model.config
    if (
        _FLASH_CPU is None
        or next(model.parameters()).device.type != "cpu"
        or cfg._attn_implementation not in ("sdpa", PREFIX_ATTENTION)
        or getattr(cfg, "sliding_window", None)
        or getattr(cfg, "attn_logit_softcapping", None)
        or set(getattr(cfg, "layer_types", None) or ["full_attention"]) != {"full_attention"}
    ):
        return False
    AttentionInterface.register(PREFIX_ATTENTION, prefix_attention)
    AttentionMaskInterface.register(PREFIX_ATTENTION, lambda *args, **kwargs: None)
    model.set_attn_implementation(PREFIX_ATTENTION)
    return True


# No fused CUDA kernel takes float32 with GQA: SDPA's math kernel would hold every head's [T, T]
# scores (36 GiB at 32k tokens for SmolLM2); repeated key/value heads run the O(T) kernel.

REPEAT_ATTENTION = "posenc_repeat_kv"


def repeat_attention(module, query, key, value, attention_mask, **kw):
    """SDPA with the key/value heads [B, Hkv, kv, Dh] repeated to the query's [B, H, q, Dh]."""
    groups = query.shape[1] // key.shape[1]
    key, value = key.repeat_interleave(groups, 1), value.repeat_interleave(groups, 1)
    kw.setdefault("is_causal", getattr(module, "is_causal", True))
    return sdpa_attention_forward(
        SimpleNamespace(num_key_value_groups=1), query, key, value, attention_mask, **kw
    )


def use_repeat_attention(model) -> bool:
    """Switch a GQA model with SDPA attention off the CPU to `repeat_attention`; whether it did."""
    cfg = model.config
    heads, kv = cfg.num_attention_heads, getattr(cfg, "num_key_value_heads", None) or 0
    on_cpu = next(model.parameters()).device.type == "cpu"
    if on_cpu or cfg._attn_implementation != "sdpa" or not kv or kv == heads:
        return False
    AttentionInterface.register(REPEAT_ATTENTION, repeat_attention)
    sdpa_mask = AttentionMaskInterface._global_mapping["sdpa"]
    AttentionMaskInterface.register(REPEAT_ATTENTION, sdpa_mask)
    model.set_attn_implementation(REPEAT_ATTENTION)
    return True


def cache_kwarg(model) -> str:
    """The name a KV cache is passed under: `cache` (transformers >= 5.2x), else past_key_values."""
    return "cache" if "cache" in inspect.signature(model.forward).parameters else "past_key_values"


@dataclass
class PromptCache:
    """The KV caches of the last prompts (the one reused and the last one) under one rotary
    `key`: prompts from the deepest needle up prefill only what follows their needle."""

    key: object = None
    entries: list = field(default_factory=list)  # [(ids, cache)], oldest first
    reused: int = 0  # tokens taken from a cache, of
    tokens: int = 0  # the tokens of every prompt

    def take(self, ids: list[int], key: object):
        """A copy of the cache of the longest prefix of `ids[:-1]` held, entered for `ids`."""
        if key != self.key:
            self.key, self.entries = key, []
        best, shared = None, 0
        for entry in self.entries:
            n = next((i for i, (a, b) in enumerate(zip(entry[0], ids[:-1])) if a != b),
                     min(len(entry[0]), len(ids) - 1))  # fmt: skip
            if n > shared:
                best, shared = entry, n
        cache = DynamicCache() if best is None else copy.deepcopy(best[1])
        crop_to(cache, shared)
        self.entries = [e for e in (best, (list(ids), cache)) if e is not None]
        self.reused, self.tokens = self.reused + shared, self.tokens + len(ids)
        return cache


def crop_to(cache, n: int) -> None:
    """Keep the cache's first n tokens (transformers' crop takes the number to drop)."""
    if cache.get_seq_length() > n:
        cache.crop(n - cache.get_seq_length())


@torch.inference_mode()
def prefill(model, ids: list[int], reuse: PromptCache, key: object):
    """The KV cache of `ids`, the prefix shared with an earlier context taken from `reuse`."""
    if not ids:
        raise ValueError("prefill: the context has no tokens")
    device = next(model.parameters()).device
    if model.config._attn_implementation == PREFIX_ATTENTION:
        cache = reuse.take(ids, key)
    else:
        cache = DynamicCache(config=model.config)
    done = cache.get_seq_length()
    model(input_ids=torch.tensor([ids[done:]], device=device), logits_to_keep=1,
          **{cache_kwarg(model): cache})  # fmt: skip
    return cache


@torch.inference_mode()
def ask(model, cache, question: list[int], answer: list[int], max_new_tokens: int):
    """One probe after a prefilled context (its cache left as it was): the greedy continuation
    of the question and log p(answer) teacher-forced, on one thread (a second one's fork and
    join cost more than a few tokens gain: 25x slower on a loaded 2-core CPU)."""
    if not question or not answer:
        raise ValueError("ask: the question and the answer need at least one token each")
    check_whole(max_new_tokens, "max_new_tokens")
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        device = next(model.parameters()).device
        n = cache.get_seq_length()
        crop = model.config._attn_implementation == PREFIX_ATTENTION  # full attention: crop back
        work = cache if crop else copy.deepcopy(cache)
        kw = cache_kwarg(model)
        logits = model(input_ids=torch.tensor([question + answer], device=device), **{kw: work})
        logits = logits.logits[0, len(question) - 1 :].float()  # [len(answer) + 1, V]
        target = torch.tensor(answer, device=device)[:, None]
        logp = float(logits[:-1].log_softmax(-1).gather(1, target).sum())
        greedy = logits.argmax(-1).tolist()
        eos = getattr(model.generation_config, "eos_token_id", None)
        stop = set(eos if isinstance(eos, (list, tuple)) else [] if eos is None else [eos])
        if greedy[:-1] == answer and not stop & set(answer):  # the greedy continuation begins with
            out = (answer + greedy[-1:])[:max_new_tokens]  # the answer: it is read off this pass
            if crop:
                crop_to(work, n)
            return out, logp
        if crop:
            crop_to(work, n + len(question))
        else:  # a sliding window's cache cannot be cropped: the question alone on a fresh copy
            work = copy.deepcopy(cache)
            model(input_ids=torch.tensor([question], device=device), **{kw: work})
        out = [greedy[0]]
        while len(out) < max_new_tokens and out[-1] not in stop:
            step = model(input_ids=torch.tensor([[out[-1]]], device=device), **{kw: work}).logits
            out.append(int(step[0, -1].argmax()))
        if crop:
            crop_to(work, n)
        return out, logp
    finally:
        torch.set_num_threads(threads)


def exact_match(text: str, expected: str) -> float:
    return float(first_number(text) == expected)
