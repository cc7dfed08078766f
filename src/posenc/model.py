"""A small pre-norm Transformer language model that takes any positional encoding.

Read top to bottom: KVCache, Attention, MLP, Block, TransformerLM (nanoGPT style).

Where the encoding acts:
- absolute encodings (family "absolute") embed the token embeddings once, at the input; if
  `embed_dim(D) != D` (onehot, index, phase concatenate features) a Linear projects back to D.
- rotary / bias / relative encodings act inside attention. By default ONE encoding module is
  shared by all layers (as T5 and ALiBi do); `share_encoding=False` gives each layer its own.
- a `sample_positions(positions)` hook (the `randomized` wrapper) is called once per forward,
  before the first layer, so every layer sees the same positions.

Positions are explicit: the default is arange(T) (continuing after the cache when decoding).
Packed sequences: pass `doc_ids` [B, T] (contiguous documents); positions restart per document
and a document mask keeps attention inside each document.

KV cache: it holds the UNencoded keys (after the projection, before any rotation) and the
values; each step applies the encoding over all cached keys, so every encoding works and a
dynamic RoPE scaling never rotates with a stale base. A decode step costs O(T). Encodings with
`cache_exact = False` (`phase`: a token's encoding depends on the whole sequence) give only
approximate logits with the cache.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from posenc.attention import attention
from posenc.base import PositionalEncoding

SQRT_D_EMBED_SCALE = ("sinusoidal", "sinusoidal_2d", "sinusoidal_3d")  # see TransformerLM


class KVCache:
    """Unencoded keys and values of every layer, preallocated for `max_tokens`.

    k, v: [depth, B, Hkv, max_tokens, Dh]; positions: [B, max_tokens] (or [..., P]).
    """

    def __init__(
        self,
        depth,
        batch,
        kv_heads,
        head_dim,
        max_tokens,
        *,
        position_dims=1,
        device=None,
        dtype=None,
    ) -> None:
        shape = (depth, batch, kv_heads, max_tokens, head_dim)
        self.k = torch.zeros(shape, device=device, dtype=dtype)
        self.v = torch.zeros(shape, device=device, dtype=dtype)
        self.position_dims = position_dims
        self.positions: torch.Tensor | None = None  # [B, max_tokens(, P)], on the first write
        self.length = 0  # tokens stored
        self.default = True  # every stored position was the default arange

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

    def update(self, layer: int, k: torch.Tensor, v: torch.Tensor):
        """Write k, v [B, Hkv, T, Dh] after the stored ones; return all [B, Hkv, L + T, Dh]."""
        start, stop = self.length, self.length + k.shape[2]
        self.k[layer, :, :, start:stop] = k
        self.v[layer, :, :, start:stop] = v
        return self.k[layer, :, :, :stop], self.v[layer, :, :, :stop]


class Attention(nn.Module):
    """Multi-head (grouped-query when kv_heads < heads) self-attention through posenc.attention."""

    def __init__(self, dim: int, heads: int, kv_heads: int) -> None:
        super().__init__()
        self.heads, self.kv_heads, self.head_dim = heads, kv_heads, dim // heads
        self.qkv_proj = nn.Linear(dim, (heads + 2 * kv_heads) * self.head_dim, bias=False)
        self.out_proj = nn.Linear(heads * self.head_dim, dim, bias=False)

    def forward(self, x, encoding, q_pos, k_pos, mask, causal, backend, cache=None, layer=0):
        B, T, _ = x.shape
        H, Hkv, Dh = self.heads, self.kv_heads, self.head_dim
        qkv = self.qkv_proj(x).view(B, T, H + 2 * Hkv, Dh).transpose(1, 2)  # [B, H+2Hkv, T, Dh]
        q, k, v = qkv.split([H, Hkv, Hkv], dim=1)  # k, v [B, Hkv, T, Dh], not yet encoded
        if cache is not None:
            k, v = cache.update(layer, k, v)  # all cached tokens, still unencoded
        y = attention(q, k, v, encoding, q_pos, k_pos, causal=causal, backend=backend, mask=mask)
        return self.out_proj(y.transpose(1, 2).reshape(B, T, -1))


class MLP(nn.Module):
    def __init__(self, dim: int, hidden: int) -> None:
        super().__init__()
        self.fc1, self.fc2 = nn.Linear(dim, hidden), nn.Linear(hidden, dim)

    def forward(self, x):
        return self.fc2(F.gelu(self.fc1(x)))


class Block(nn.Module):
    """Pre-norm: x + attn(norm(x)), then x + mlp(norm(x))."""

    def __init__(self, dim, heads, kv_heads, mlp_ratio, dropout) -> None:
        super().__init__()
        self.norm1, self.norm2 = nn.LayerNorm(dim), nn.LayerNorm(dim)
        self.attn = Attention(dim, heads, kv_heads)
        self.mlp = MLP(dim, int(mlp_ratio * dim))
        self.drop = nn.Dropout(dropout)

    def forward(self, x, encoding, q_pos, k_pos, mask, causal, backend, cache=None, layer=0):
        h = self.attn(self.norm1(x), encoding, q_pos, k_pos, mask, causal, backend, cache, layer)
        x = x + self.drop(h)
        return x + self.drop(self.mlp(self.norm2(x)))


class TransformerLM(nn.Module):
    """Decoder (causal=True) or encoder (causal=False) with any registered encoding.

    forward(tokens [B, T], positions=None, doc_ids=None) -> logits [B, T, vocab_size].
    The encoding is built by name with dim, heads, head_dim, max_len and `encoding_kwargs`.
    `attn_backend` (an attribute, default "auto") is the posenc.attention backend.
    """

    def __init__(
        self,
        vocab_size: int,
        dim: int,
        depth: int,
        heads: int,
        encoding: str = "rope",
        encoding_kwargs: dict | None = None,
        max_len: int | None = None,
        causal: bool = True,
        kv_heads: int | None = None,
        mlp_ratio: float = 4,
        dropout: float = 0.0,
        share_encoding: bool = True,
    ) -> None:
        super().__init__()
        kv_heads = heads if kv_heads is None else kv_heads
        for name, value in (("vocab_size", vocab_size), ("dim", dim), ("depth", depth)):
            if not isinstance(value, int) or value < 1:
                raise ValueError(f"{name} must be a positive int, got {value!r}")
        if not isinstance(heads, int) or heads < 1 or dim % heads:
            raise ValueError(f"heads must be a positive int dividing dim={dim}, got {heads!r}")
        if not isinstance(kv_heads, int) or kv_heads < 1 or heads % kv_heads:
            raise ValueError(
                f"kv_heads must be a positive int dividing heads={heads}, got {kv_heads!r}"
            )
        if not isinstance(encoding, str):
            raise TypeError(
                f"encoding must be a registry name (str), got {type(encoding).__name__}"
            )
        self.config = dict(
            vocab_size=vocab_size, dim=dim, depth=depth, heads=heads, encoding=encoding,
            encoding_kwargs=dict(encoding_kwargs or {}), max_len=max_len, causal=causal,
            kv_heads=kv_heads, mlp_ratio=mlp_ratio, dropout=dropout, share_encoding=share_encoding,
        )  # fmt: skip
        self.causal, self.depth, self.dim, self.attn_backend = causal, depth, dim, "auto"
        self.encodings = nn.ModuleList([self.build_encoding()])
        self.absolute = self.encoding.family == "absolute"
        if not share_encoding and not self.absolute:
            self.encodings.extend(self.build_encoding() for _ in range(depth - 1))

        self.tok_emb = nn.Embedding(vocab_size, dim)
        # Vaswani et al. §3.4: token embeddings are multiplied by sqrt(D) before the sinusoids
        # (amplitude 1) are added; without it the table drowns the tokens (std 0.02 init).
        self.embed_scale = math.sqrt(dim) if encoding in SQRT_D_EMBED_SCALE else 1.0
        width = self.encoding.embed_dim(dim) if self.absolute else dim
        self.in_proj = nn.Linear(width, dim) if width != dim else nn.Identity()
        self.drop = nn.Dropout(dropout)
        self.blocks = nn.ModuleList(
            Block(dim, heads, kv_heads, mlp_ratio, dropout) for _ in range(depth)
        )
        self.norm = nn.LayerNorm(dim)
        self.lm_head = nn.Linear(dim, vocab_size, bias=False)
        self.lm_head.weight = self.tok_emb.weight  # weight tying
        self.init_weights()

    def build_encoding(self) -> PositionalEncoding:
        from posenc import build

        c = self.config
        std = dict(dim=c["dim"], heads=c["heads"], head_dim=c["dim"] // c["heads"])
        return build(c["encoding"], **std, max_len=c["max_len"], **c["encoding_kwargs"])

    def init_weights(self) -> None:
        """GPT-2 init for the model's own weights; the encodings keep their own init."""
        for name, module in self.named_modules():
            if name.startswith("encodings"):
                continue
            if isinstance(module, (nn.Linear, nn.Embedding)):
                nn.init.normal_(module.weight, std=0.02)
            if isinstance(module, nn.Linear) and module.bias is not None:
                nn.init.zeros_(module.bias)
        if self.embed_scale != 1.0:  # Vaswani et al.: N(0, D^-1/2) times sqrt(D) = unit scale
            nn.init.normal_(self.tok_emb.weight, std=self.dim**-0.5)
        if isinstance(self.in_proj, nn.Linear):  # concatenated features: tokens pass as they are
            with torch.no_grad():
                self.in_proj.weight[:, : self.in_proj.out_features].copy_(torch.eye(self.dim))
        for name, p in self.blocks.named_parameters():  # residual projections
            if name.endswith(("out_proj.weight", "fc2.weight")):
                nn.init.normal_(p, std=0.02 / math.sqrt(2 * self.depth))

    @property
    def encoding(self) -> PositionalEncoding:
        """The encoding (the one all layers share, or layer 0's)."""
        return self.encodings[0]

    def num_params(self) -> int:
        """Number of parameters (tied embedding counted once), encodings included."""
        return sum(p.numel() for p in self.parameters())

    # ------------------------------------------------------------------------------ forward

    def forward(
        self,
        tokens: torch.Tensor,
        positions: torch.Tensor | None = None,
        doc_ids: torch.Tensor | None = None,
        cache: KVCache | None = None,
    ) -> torch.Tensor:
        """tokens [B, T] -> logits [B, T, V]. positions [T] or [B, T]; doc_ids [B, T] or [T]."""
        if not isinstance(tokens, torch.Tensor) or tokens.dim() != 2:
            raise ValueError(
                f"tokens must be a [B, T] tensor, got {getattr(tokens, 'shape', tokens)}"
            )
        B, T = tokens.shape
        P = self.encoding.position_dims
        offset = cache.length if cache is not None else 0
        mask = None
        if doc_ids is not None:
            if cache is not None:
                raise ValueError("doc_ids (packed sequences) cannot be combined with a cache")
            if doc_ids.shape not in ((T,), (B, T), (1, T)):
                raise ValueError(
                    f"doc_ids must be [T] or [B, T] = [{B}, {T}], got {tuple(doc_ids.shape)}"
                )
            mask = (doc_ids[..., :, None] == doc_ids[..., None, :]).unsqueeze(-3)  # [B,1,T,T]
            if positions is None:
                positions = restart_positions(doc_ids)
                positions = positions[..., None].expand(*positions.shape, P) if P > 1 else positions
        default = positions is None
        if default:
            positions = torch.arange(offset, offset + T, device=tokens.device)
            positions = positions[:, None].expand(T, P) if P > 1 else positions
        else:
            check_model_positions(positions, B, T, P)
            positions = positions.to(tokens.device)
        sample = getattr(self.encoding, "sample_positions", None)
        if sample is not None and self.training:
            positions, default = sample(positions), False  # once, for every layer

        x = self.tok_emb(tokens) * self.embed_scale  # [B, T, D]
        if self.absolute:
            x = self.in_proj(self.encoding.embed(x, positions))
        x = self.drop(x)
        q_pos, k_pos = positions, positions
        if cache is not None:
            k_pos = cache.add_positions(positions, default)
            default = cache.default
        if default or self.absolute:
            # None: attention's defaults (causal by index; SDPA's fused causal kernel). Absolute
            # encodings are done with positions once embedded: causal order is the index order.
            q_pos = k_pos = None
        encoding = None if self.absolute else self.encoding
        for i, block in enumerate(self.blocks):
            enc = encoding if encoding is None or len(self.encodings) == 1 else self.encodings[i]
            x = block(x, enc, q_pos, k_pos, mask, self.causal, self.attn_backend, cache, i)
        if cache is not None:
            cache.length += T
        return self.lm_head(self.norm(x))

    # ------------------------------------------------------------------------------ generate

    def new_cache(self, batch: int, max_tokens: int) -> KVCache:
        """An empty KV cache for `batch` sequences of up to `max_tokens` tokens."""
        attn = self.blocks[0].attn
        w = self.tok_emb.weight
        P = self.encoding.position_dims
        shape = (self.depth, batch, attn.kv_heads, attn.head_dim, max_tokens)
        return KVCache(*shape, position_dims=P, device=w.device, dtype=w.dtype)

    @torch.no_grad()
    def generate(
        self,
        tokens: torch.Tensor,
        max_new_tokens: int,
        temperature: float = 0.0,
        top_k: int | None = None,
        return_logits: bool = False,
    ):
        """Continue tokens [B, T] by max_new_tokens -> [B, T + max_new_tokens] (KV cache).

        temperature 0 is greedy; otherwise sample from softmax(logits / temperature), limited
        to the top_k tokens if given. With return_logits, also the logits [B, new, V] each
        token was chosen from. Runs in eval mode (restores the mode after).
        """
        if not self.causal:
            raise ValueError("generate needs a causal model (causal=True); this is an encoder")
        if not isinstance(max_new_tokens, int) or max_new_tokens < 0:
            raise ValueError(f"max_new_tokens must be an int >= 0, got {max_new_tokens!r}")
        if temperature < 0:
            raise ValueError(f"temperature must be >= 0, got {temperature}")
        if top_k is not None and (not isinstance(top_k, int) or top_k < 1):
            raise ValueError(f"top_k must be a positive int or None, got {top_k!r}")
        was_training = self.training
        self.eval()
        try:
            cache = self.new_cache(tokens.shape[0], tokens.shape[1] + max_new_tokens)
            logits, chosen = self(tokens, cache=cache)[:, -1], []
            for step in range(max_new_tokens):
                chosen.append(logits)
                nxt = pick_token(logits, temperature, top_k)  # [B, 1]
                tokens = torch.cat([tokens, nxt], dim=1)
                if step + 1 < max_new_tokens:
                    logits = self(nxt, cache=cache)[:, -1]
        finally:
            self.train(was_training)
        if return_logits:
            V = self.lm_head.out_features
            empty = tokens.new_zeros((tokens.shape[0], 0, V), dtype=logits.dtype)
            return tokens, torch.stack(chosen, dim=1) if chosen else empty
        return tokens

    # ------------------------------------------------------------------------------ checkpoints

    def save(self, path) -> None:
        """torch.save({"config": constructor kwargs, "model": state_dict}, path)."""
        torch.save({"config": dict(self.config), "model": self.state_dict()}, path)

    @classmethod
    def from_checkpoint(cls, path, map_location="cpu") -> TransformerLM:
        """Rebuild a model saved by `save` (or any {"config", "model"} checkpoint)."""
        ckpt = torch.load(path, map_location=map_location, weights_only=True)
        if not isinstance(ckpt, dict) or "config" not in ckpt or "model" not in ckpt:
            raise ValueError(
                f"{path} is not a TransformerLM checkpoint (needs 'config' and 'model')"
            )
        model = cls(**ckpt["config"])
        model.load_state_dict(ckpt["model"])
        return model


def pick_token(logits: torch.Tensor, temperature: float, top_k: int | None) -> torch.Tensor:
    """logits [B, V] -> token ids [B, 1]: argmax at temperature 0, else a sample."""
    if temperature == 0:
        return logits.argmax(dim=-1, keepdim=True)
    logits = logits / temperature
    if top_k is not None:
        kth = torch.topk(logits, min(top_k, logits.shape[-1])).values[:, -1:]
        logits = logits.masked_fill(logits < kth, -torch.inf)
    return torch.multinomial(torch.softmax(logits, dim=-1), num_samples=1)


def restart_positions(doc_ids: torch.Tensor) -> torch.Tensor:
    """doc_ids [..., T] (contiguous documents) -> positions restarting at 0 in each document."""
    idx = torch.arange(doc_ids.shape[-1], device=doc_ids.device).expand_as(doc_ids)
    starts = torch.ones_like(doc_ids, dtype=torch.bool)
    starts[..., 1:] = doc_ids[..., 1:] != doc_ids[..., :-1]
    first = torch.where(starts, idx, 0).cummax(dim=-1).values  # index where each doc starts
    return idx - first


def check_model_positions(positions: torch.Tensor, B: int, T: int, P: int) -> None:
    """ValueError naming `positions` unless it is [T] or [B, T] (+ a trailing P axis if P > 1)."""
    want = (T,) if P == 1 else (T, P)
    if not isinstance(positions, torch.Tensor):
        raise TypeError(f"positions must be a torch.Tensor, got {type(positions).__name__}")
    if tuple(positions.shape) not in (want, (B, *want), (1, *want)):
        raise ValueError(
            f"positions must have shape {list(want)} or {[B, *want]}, got {tuple(positions.shape)}"
        )
