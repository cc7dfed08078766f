"""The measurements, on a loaded transformers causal LM patched by posenc.hf.patch.

Perplexity: one forward pass at the longest length gives the loss of every shorter prefix of a
causal model: nll[t] is the loss of token t + 1 given tokens 0..t, so the perplexity of the
first T tokens is exp(mean(nll[:T - 1])). This holds while the rotary frequencies stay the
same, so lengths are grouped by the frequencies their call would use (`fingerprint`): static
scalings need one pass, a dynamic one a pass per length past the context (at or below it they
equal the unscaled model, and share its pass).

Retrieval: the prompt is prefilled once and the answer decoded greedily with the KV cache.
"""

from __future__ import annotations

import hashlib

import torch
import torch.nn.functional as F

from posenc.hf.patch import PosencRotaryEmbedding
from posenc.stretch.data import first_number

LOGIT_CHUNK = 1024  # positions per LM-head chunk: [1024, V] float32 logits at a time


def rope_of(model):
    """The posenc rope that a patched model's (first) rotary module uses."""
    module = next(m for m in model.modules() if isinstance(m, PosencRotaryEmbedding))
    return next(iter(module.encodings.values())).encoding


def fingerprint(model, length: int, head_dim: int) -> str:
    """A digest of the rotary frequencies and attention factor a call of `length` tokens uses:
    equal digests, equal logits."""
    inv_freq, factor = rope_of(model).frequencies(torch.arange(length)[None], head_dim)
    data = inv_freq.detach().cpu().double().numpy().tobytes() + repr(float(factor)).encode()
    return hashlib.sha1(data).hexdigest()[:16]


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


@torch.inference_mode()
def answer(model, ids: list[int], max_new_tokens: int, pad_token_id: int | None) -> list[int]:
    """The greedy continuation of `ids` as token ids (prefill once, then the KV cache)."""
    device = next(model.parameters()).device
    x = torch.tensor([ids], device=device)
    out = model.generate(
        x,
        attention_mask=torch.ones_like(x),
        max_new_tokens=max_new_tokens,
        do_sample=False,
        pad_token_id=pad_token_id,
    )
    return out[0, x.shape[1] :].tolist()


def exact_match(text: str, expected: str) -> float:
    return float(first_number(text) == expected)
