"""The KV cache of TransformerLM, and picking the next token when generating. The cache holds
UNencoded keys: each step encodes all of them, so every encoding works (a dynamic RoPE scaling
never rotates with a stale base)."""

from __future__ import annotations

import warnings

import torch

from posenc.checks import check_float, check_int


class KVCache:
    """Every layer's unencoded k, v of `shape` [depth, B, Hkv, max_tokens, Dh], positions
    [B, max_tokens] (+ [..., P]), preallocated."""

    def __init__(self, shape: tuple, *, position_dims=1, device=None, dtype=None) -> None:
        self.k = torch.zeros(shape, device=device, dtype=dtype)
        self.v = torch.zeros(shape, device=device, dtype=dtype)
        self.position_dims = position_dims
        self.positions: torch.Tensor | None = None  # [B, max_tokens(, P)], on the first write
        self.length = 0  # tokens stored
        self.default = True  # every stored position was the default arange
        self.drawn: torch.Tensor | None = None  # [max_tokens]: randomized positions, one draw

    @property
    def max_tokens(self) -> int:
        return self.k.shape[3]

    def add_positions(self, positions: torch.Tensor, default: bool) -> torch.Tensor:
        """Store the positions of T new tokens ([T] or [B, T]); return all stored [B, L + T]."""
        P = self.position_dims
        start = self.length
        stop = start + positions.shape[-1 if P == 1 else -2]
        if stop > self.max_tokens:
            raise ValueError(
                f"the KV cache holds max_tokens={self.max_tokens}; {start} stored + "
                f"{stop - start} new tokens do not fit"
            )
        if self.positions is None:
            shape = (self.k.shape[1], self.max_tokens) + ((P,) if P > 1 else ())
            self.positions = positions.new_zeros(shape)
        self.positions[:, start:stop] = positions
        self.default = self.default and default
        return self.positions[:, :stop]

    def sampled(self, sample, positions: torch.Tensor) -> torch.Tensor:
        """Randomized positions with a cache: `sample` (sample_positions) drawn ONCE over
        arange(max_tokens), indexed by positions [T] / [B, T]: decode steps continue the prompt's
        draw in order, and the finished sequence gets a full forward's draw of the same state."""
        if self.drawn is None:
            self.drawn = sample(torch.arange(self.max_tokens, device=positions.device))
        if positions.numel() and int(positions.max()) >= self.max_tokens:
            raise ValueError(
                f"positions go up to {int(positions.max())}: randomized positions with a KV "
                f"cache index one draw over its max_tokens={self.max_tokens}"
            )
        return self.drawn[positions.long()]

    def update(self, layer: int, k: torch.Tensor, v: torch.Tensor):
        """Write k, v [B, Hkv, T, Dh] after the stored ones; return all [B, Hkv, L + T, Dh]."""
        start, stop = self.length, self.length + k.shape[2]
        self.k[layer, :, :, start:stop] = k
        self.v[layer, :, :, start:stop] = v
        return self.k[layer, :, :, :stop], self.v[layer, :, :, :stop]


def pick_token(logits: torch.Tensor, temperature: float, top_k: int | None) -> torch.Tensor:
    """logits [B, V] -> token ids [B, 1]: argmax at temperature 0, else a sample."""
    if temperature == 0:
        return logits.argmax(dim=-1, keepdim=True)
    # the max subtracted first: a tiny temperature sends the others to -inf (near-greedy),
    # never inf - inf = nan
    logits = (logits - logits.amax(dim=-1, keepdim=True)) / temperature
    if top_k is not None:
        kth = torch.topk(logits, min(top_k, logits.shape[-1])).values[:, -1:]
        logits = logits.masked_fill(logits < kth, -torch.inf)
    return torch.multinomial(torch.softmax(logits, dim=-1), num_samples=1)


@torch.no_grad()
def generate(
    model,
    tokens: torch.Tensor,
    max_new_tokens: int,
    temperature: float = 0.0,
    top_k: int | None = None,
    return_logits: bool = False,
):
    """tokens [B, T] -> [B, T + max_new_tokens] with a KV cache, in eval mode: greedy at
    temperature 0, else sampled from softmax(logits / temperature) over the top_k; with
    return_logits also the logits [B, new, V] each token was chosen from."""
    if not model.causal:
        raise ValueError("generate needs a causal model (causal=True); this is an encoder")
    check_int("max_new_tokens", max_new_tokens, low=0)
    if not isinstance(tokens, torch.Tensor) or tokens.dim() != 2 or tokens.shape[1] == 0:
        raise ValueError(
            f"tokens (the prompt) must be a non-empty [B, T] tensor, got "
            f"{tuple(getattr(tokens, 'shape', ())) or tokens!r}"
        )
    check_float("temperature", temperature, ge=0)
    inexact = [e for e in model.encodings if not e.cache_exact]
    if inexact:
        warnings.warn(
            f"generate: {type(inexact[0]).__name__} depends on the whole sequence "
            "(cache_exact=False), so cached decoding gives other logits than a full forward",
            stacklevel=2,
        )
    if top_k is not None:
        check_int("top_k", top_k, low=1)
    was_training = model.training
    model.eval()
    try:
        cache = model.new_cache(tokens.shape[0], tokens.shape[1] + max_new_tokens)
        logits, chosen = model(tokens, cache=cache)[:, -1], []
        for step in range(max_new_tokens):
            chosen.append(logits)
            nxt = pick_token(logits, temperature, top_k)  # [B, 1]
            tokens = torch.cat([tokens, nxt], dim=1)
            if step + 1 < max_new_tokens:
                logits = model(nxt, cache=cache)[:, -1]
    finally:
        model.train(was_training)
    if return_logits:
        V = model.lm_head.out_features
        empty = tokens.new_zeros((tokens.shape[0], 0, V), dtype=logits.dtype)
        return tokens, torch.stack(chosen, dim=1) if chosen else empty
    return tokens
