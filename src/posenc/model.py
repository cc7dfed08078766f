"""A small pre-norm Transformer language model that takes any positional encoding.

Read top to bottom: Context, Attention, MLP, Block, TransformerLM (nanoGPT style).

Where the encoding acts:
- absolute encodings (family "absolute") embed the token embeddings once, at the input; if
  `embed_dim(D) != D` (onehot, index, phase concatenate features) a Linear projects back to D.
- rotary / bias / relative encodings act inside attention. By default ONE encoding module is
  shared by all layers (as T5 and ALiBi do); `share_encoding=False` gives each layer its own.
- `sample_positions(positions)` (the `randomized` wrapper) is called once per training forward
  (and in eval where `sample_at_eval`), before the first layer: every layer sees the same.

Positions are explicit: the default is arange(T) (continuing after the cache when decoding).
Packed sequences and left padding: pass `doc_ids` [B, T] (contiguous documents, the pads one
of them); positions restart per document and a mask keeps attention inside each document.

KV cache (posenc.kv_cache): unencoded keys, so every encoding works with it; a decode step
costs O(T). `cache_exact = False` encodings (`phase`) give only approximate logits with it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from posenc.attention import attention
from posenc.base import PositionalEncoding
from posenc.checks import (
    check_int,
    check_model_positions,
    check_tokens,
    grid_positions,
    load_checkpoint,
    restart_positions,
)
from posenc.encodings import build_for
from posenc.kv_cache import KVCache, generate


@dataclass
class Context:
    """What every layer's attention needs besides x and its encoding: one object passed down.

    q_pos, k_pos: [T] / [B, T] (+ [..., P]) or None for attention's defaults; mask: boolean
    [B or 1, 1, Tq, Tk] (True = may attend) or None.
    """

    q_pos: torch.Tensor | None
    k_pos: torch.Tensor | None
    mask: torch.Tensor | None
    causal: bool
    backend: str
    cache: KVCache | None = None


class Attention(nn.Module):
    """Multi-head (grouped-query when kv_heads < heads) self-attention through posenc.attention."""

    def __init__(self, dim: int, heads: int, kv_heads: int) -> None:
        super().__init__()
        self.heads, self.kv_heads, self.head_dim = heads, kv_heads, dim // heads
        self.qkv_proj = nn.Linear(dim, (heads + 2 * kv_heads) * self.head_dim, bias=False)
        self.out_proj = nn.Linear(heads * self.head_dim, dim, bias=False)

    def forward(self, x: torch.Tensor, encoding, ctx: Context, layer: int) -> torch.Tensor:
        """x [B, T, D] -> [B, T, D]."""
        B, T, _ = x.shape
        H, Hkv, Dh = self.heads, self.kv_heads, self.head_dim
        qkv = self.qkv_proj(x).view(B, T, H + 2 * Hkv, Dh).transpose(1, 2)  # [B, H+2Hkv, T, Dh]
        q, k, v = qkv.split([H, Hkv, Hkv], dim=1)  # k, v [B, Hkv, T, Dh], not yet encoded
        if ctx.cache is not None:
            k, v = ctx.cache.update(layer, k, v)  # all cached tokens, still unencoded
        y = attention(
            q, k, v, encoding, ctx.q_pos, ctx.k_pos,
            causal=ctx.causal, backend=ctx.backend, mask=ctx.mask,
        )  # fmt: skip
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

    def forward(self, x: torch.Tensor, encoding, ctx: Context, layer: int) -> torch.Tensor:
        h = self.attn(self.norm1(x), encoding, ctx, layer)
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
        train_len: int | None = None,
        causal: bool = True,
        kv_heads: int | None = None,
        mlp_ratio: float = 4,
        dropout: float = 0.0,
        share_encoding: bool = True,
    ) -> None:
        super().__init__()
        kv_heads = heads if kv_heads is None else kv_heads
        for name, value in (("vocab_size", vocab_size), ("dim", dim), ("depth", depth)):
            check_int(name, value, low=1)
        if check_int("heads", heads, low=1) and dim % heads:
            raise ValueError(f"heads must be a positive int dividing dim={dim}, got {heads!r}")
        if check_int("kv_heads", kv_heads, low=1) and heads % kv_heads:
            raise ValueError(
                f"kv_heads must be a positive int dividing heads={heads}, got {kv_heads!r}"
            )
        if not isinstance(encoding, str):
            raise TypeError(f"encoding must be a registry name, got {type(encoding).__name__}")
        self.config = dict(
            vocab_size=vocab_size, dim=dim, depth=depth, heads=heads, encoding=encoding,
            encoding_kwargs=dict(encoding_kwargs or {}), max_len=max_len, train_len=train_len,
            causal=causal,
            kv_heads=kv_heads, mlp_ratio=mlp_ratio, dropout=dropout, share_encoding=share_encoding,
        )  # fmt: skip
        self.causal, self.depth, self.dim, self.attn_backend = causal, depth, dim, "auto"
        self.encodings = nn.ModuleList([self.build_encoding()])
        self.absolute = self.encoding.family == "absolute"
        if not share_encoding and not self.absolute:
            self.encodings.extend(self.build_encoding() for _ in range(depth - 1))
        self.tok_emb = nn.Embedding(vocab_size, dim)
        # sqrt(D) for sinusoids (Vaswani et al. §3.4; else the table drowns the tokens), else 1
        self.embed_scale = float(self.encoding.token_scale(dim))
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
        c = self.config
        std = dict(dim=c["dim"], heads=c["heads"], head_dim=c["dim"] // c["heads"])
        std.update(max_len=c["max_len"], train_len=c["train_len"])
        return build_for(c["encoding"], causal=c["causal"], **std, **c["encoding_kwargs"])

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
        check_tokens(tokens, self.lm_head.out_features)
        if tokens.shape[1] == 0:  # an empty sequence: empty logits
            return self.lm_head.weight.new_zeros(tokens.shape[0], 0, self.lm_head.out_features)
        positions, default, mask = self.positions_of(tokens, positions, doc_ids, cache)
        x = self.tok_emb(tokens) * self.embed_scale  # [B, T, D]
        if self.absolute:
            x = self.in_proj(self.encoding.embed(x, positions))
        x = self.drop(x)
        ctx = self.context(positions, default, mask, cache)
        for i, block in enumerate(self.blocks):
            enc = None if self.absolute else self.encodings[i if len(self.encodings) > 1 else 0]
            x = block(x, enc, ctx, i)
        if cache is not None:
            cache.length += tokens.shape[1]
        return self.lm_head(self.norm(x))

    def positions_of(self, tokens, positions, doc_ids, cache):
        """-> (positions [T] / [B, T] (+ [..., P]), whether they are the default arange, the
        document mask [B, 1, T, T] or None). Training positions pass through the encoding's
        sample_positions hook here, once for every layer."""
        B, T = tokens.shape
        P = self.encoding.position_dims
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
                positions = grid_positions(restart_positions(doc_ids), P)
        default = positions is None
        if default:
            offset = cache.length if cache is not None else 0
            positions = grid_positions(torch.arange(offset, offset + T, device=tokens.device), P)
        else:
            check_model_positions(positions, B, T, P)
            positions = positions.to(tokens.device)
        enc = self.encoding
        if (self.training or enc.sample_at_eval) and enc.overrides("sample_positions"):
            positions, default = enc.sample_positions(positions), False
        return positions, default, mask

    def context(self, positions, default: bool, mask, cache) -> Context:
        """The Context every layer's attention gets."""
        q_pos = k_pos = positions
        if cache is not None:
            k_pos = cache.add_positions(positions, default)
            default = cache.default
        if default or self.absolute:
            # None: attention's defaults (causal by index; SDPA's fused causal kernel). Absolute
            # encodings are done with positions once embedded: causal order is the index order.
            q_pos = k_pos = None
        return Context(q_pos, k_pos, mask, self.causal, self.attn_backend, cache)

    # ------------------------------------------------------------------------------ generate

    def new_cache(self, batch: int, max_tokens: int) -> KVCache:
        """An empty KV cache for `batch` sequences of up to `max_tokens` tokens."""
        attn = self.blocks[0].attn
        w = self.tok_emb.weight
        P = self.encoding.position_dims
        shape = (self.depth, batch, attn.kv_heads, attn.head_dim, max_tokens)
        return KVCache(*shape, position_dims=P, device=w.device, dtype=w.dtype)

    def generate(self, tokens: torch.Tensor, max_new_tokens: int, **kwargs):
        """Continue tokens [B, T] by max_new_tokens with a KV cache (posenc.kv_cache.generate:
        temperature, top_k, return_logits)."""
        return generate(self, tokens, max_new_tokens, **kwargs)

    # ------------------------------------------------------------------------------ checkpoints

    def save(self, path) -> None:
        """torch.save({"config": constructor kwargs, "model": state_dict}, path)."""
        torch.save({"config": dict(self.config), "model": self.state_dict()}, path)

    @classmethod
    def from_checkpoint(cls, path, map_location="cpu") -> TransformerLM:
        """Rebuild a model saved by `save` (or any {"config", "model"} checkpoint)."""
        ckpt = load_checkpoint(path, ("config", "model"), map_location)
        try:
            model = cls(**ckpt["config"])
            model.load_state_dict(ckpt["model"])
        except (TypeError, KeyError, RuntimeError) as err:
            raise ValueError(f"{path}: config and weights do not fit ({err})"[:300]) from None
        return model
