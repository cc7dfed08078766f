"""A small pre-norm Transformer language model that takes any positional encoding (its layers,
Context, Attention, MLP, Block, are in posenc.layers).

Where the encoding acts:
- absolute encodings (`embed`) once, at the input; a Linear projects back to D where
  embed_dim(D) != D (onehot, index, phase concatenate).
- the others inside attention: ONE module shared by all layers (as T5, ALiBi) unless
  `share_encoding=False`; or a per-layer schedule, `encoding` a list of `depth` names or
  (name, kwargs) pairs over `encoding_kwargs` (Gemma 3: five local RoPE layers to one global;
  Llama 4's iRoPE: every fourth "nope_temperature").
- `window`: sliding-window attention, one int or a per-layer list (None = global; RNoPE-SWA).
- `sample_positions` (`randomized`) once per training forward (eval too where
  `sample_at_eval`), before the first layer: every layer sees the same (a schedule has it in
  every layer or none). With a KV cache it is drawn once over max_tokens and each step indexes
  that draw, so decoding equals the full forward under the same draw.
Positions default to arange(T) (after the cache when decoding). Packed sequences / left padding:
`doc_ids` [B, T]; positions restart per document and a mask keeps attention inside each.
The KV cache holds unencoded keys, so every encoding works with it (`cache_exact = False`,
`phase`: approximate).
"""

from __future__ import annotations

import math

import torch
from torch import nn

from posenc.attention.window import layer_windows
from posenc.base import PositionalEncoding
from posenc.checks import (
    check_doc_ids,
    check_int,
    check_model_positions,
    check_tokens,
    grid_positions,
    load_checkpoint,
    restart_positions,
)
from posenc.encodings import build_for
from posenc.kv_cache import KVCache, generate
from posenc.layers import Block, Context


class TransformerLM(nn.Module):
    """Decoder (causal=True) or encoder with any registered encoding, built by name with the
    model's shape and `encoding_kwargs` (a list: a per-layer schedule). forward(tokens [B, T],
    positions, doc_ids) -> logits [B, T, V]; `attn_backend` (default "auto") the backend."""

    def __init__(
        self,
        vocab_size: int,
        dim: int,
        depth: int,
        heads: int,
        encoding: str | list = "rope",
        encoding_kwargs: dict | None = None,
        max_len: int | None = None,
        train_len: int | None = None,
        causal: bool = True,
        kv_heads: int | None = None,
        mlp_ratio: float = 4,
        dropout: float = 0.0,
        share_encoding: bool = True,
        window: int | list | None = None,
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
        specs = layer_specs(encoding, depth)
        windows = layer_windows(window, depth)
        self.config = dict(
            vocab_size=vocab_size, dim=dim, depth=depth, heads=heads, encoding=encoding,
            encoding_kwargs=dict(encoding_kwargs or {}), max_len=max_len, train_len=train_len,
            causal=causal,
            kv_heads=kv_heads, mlp_ratio=mlp_ratio, dropout=dropout, share_encoding=share_encoding,
            window=window,
        )  # fmt: skip
        self.causal, self.depth, self.dim, self.attn_backend = causal, depth, dim, "auto"
        if specs is None:
            self.encodings = nn.ModuleList([self.build_encoding(encoding)])
        else:
            self.encodings = nn.ModuleList(self.build_encoding(*spec) for spec in specs)
            check_schedule(self.encodings)
        self.absolute = "embed" in self.encoding.provides  # acts once, at the input
        if specs is None and not share_encoding and not self.absolute:
            self.encodings.extend(self.build_encoding(encoding) for _ in range(depth - 1))
        self.tok_emb = nn.Embedding(vocab_size, dim)
        # sqrt(D) for sinusoids (Vaswani et al. §3.4; else the table drowns the tokens), else 1
        self.embed_scale = float(self.encoding.token_scale(dim))
        width = self.encoding.embed_dim(dim) if self.absolute else dim
        self.in_proj = nn.Linear(width, dim) if width != dim else nn.Identity()
        self.drop = nn.Dropout(dropout)
        self.blocks = nn.ModuleList(
            Block(dim, heads, kv_heads, mlp_ratio, dropout, w) for w in windows
        )
        self.norm = nn.LayerNorm(dim)
        self.lm_head = nn.Linear(dim, vocab_size, bias=False)
        self.lm_head.weight = self.tok_emb.weight  # weight tying
        self.init_weights()

    def build_encoding(self, name: str, kwargs: dict | None = None) -> PositionalEncoding:
        c = self.config
        std = {k: c[k] for k in ("dim", "heads", "kv_heads", "max_len", "train_len")}
        std["head_dim"] = c["dim"] // c["heads"]  # build() passes each what it takes
        kwargs = {**std, **c["encoding_kwargs"], **(kwargs or {})}
        return build_for(name, causal=c["causal"], **kwargs)

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
        """Layer 0's encoding (shared, or the first): its position hooks serve every layer."""
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
        """-> (positions [T] / [B, T] (+ [..., P]), whether the default arange, the document mask
        [B, 1, T, T] or None); training positions pass sample_positions here, once for all."""
        B, T = tokens.shape
        P = self.encoding.position_dims
        mask = None
        if doc_ids is not None:
            if cache is not None:
                raise ValueError("doc_ids (packed sequences) cannot be combined with a cache")
            check_doc_ids(doc_ids, B, T)
            whole = [e for e in self.encodings if not e.per_document]
            if whole:
                raise ValueError(
                    f"doc_ids: {type(whole[0]).__name__} ({whole[0].extra_repr()}) scales with "
                    "the longest sequence of the batch, not per document; run the documents "
                    "as separate sequences"
                )
            mask = (doc_ids[..., :, None] == doc_ids[..., None, :]).unsqueeze(-3)  # [B,1,T,T]
            if positions is None:
                positions = grid_positions(restart_positions(doc_ids), P)
        default = positions is None
        if default:
            offset = cache.length if cache is not None else 0
            positions = grid_positions(torch.arange(offset, offset + T, device=tokens.device), P)
        else:
            positions = check_model_positions(positions, B, T, P).to(tokens.device)
        enc = self.encoding
        if (self.training or enc.sample_at_eval) and "sample_positions" in enc.provides:
            if cache is None:
                positions = enc.sample_positions(positions)
            else:  # one draw for the whole cache: decode steps continue it, in order
                positions = cache.sampled(enc.sample_positions, positions)
            default = False
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
        shape = (self.depth, batch, attn.kv_heads, max_tokens, attn.head_dim)
        return KVCache(shape, position_dims=P, device=w.device, dtype=w.dtype)

    def generate(self, tokens: torch.Tensor, max_new_tokens: int, **kwargs):
        """posenc.kv_cache.generate (temperature, top_k, return_logits)."""
        return generate(self, tokens, max_new_tokens, **kwargs)

    # ------------------------------------------------------------------------------ checkpoints

    def save(self, path) -> None:
        """torch.save({"config", "model": state_dict}, path); a config that is not plain data
        (an encoding instance) is refused, naming the key, instead of an unloadable checkpoint."""
        plain_config(self.config)
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


def plain_config(value, where: str = "config") -> None:
    """ValueError naming the key unless `value` is plain data (None, bool, int, float, str, and
    lists / tuples / dicts of it: what weights_only loads)."""
    if isinstance(value, list | tuple):
        for i, item in enumerate(value):
            plain_config(item, f"{where}[{i}]")
    elif isinstance(value, dict):
        for key, item in value.items():
            plain_config(item, f"{where}[{key!r}]")
    elif value is not None and not isinstance(value, bool | int | float | str):
        raise ValueError(
            f"save: {where} is a {type(value).__name__}, which a checkpoint cannot rebuild; give "
            "encodings by registry name and keywords (encoding_kwargs={'encoding': 'rope', ...})"
        )


def layer_specs(encoding, depth: int) -> list[tuple[str, dict]] | None:
    """None for one encoding name; for a per-layer schedule, [(name, kwargs)] * depth."""
    if isinstance(encoding, str):
        return None
    if not isinstance(encoding, list | tuple):
        raise TypeError(
            "encoding must be a registry name or a per-layer list of names / (name, kwargs), "
            f"got {type(encoding).__name__}"
        )
    if len(encoding) != depth:
        raise ValueError(f"encoding: a per-layer schedule needs depth={depth} entries, got "
                         f"{len(encoding)}")  # fmt: skip
    specs = []
    for i, spec in enumerate(encoding):
        if isinstance(spec, str):
            spec = (spec, {})
        ok = isinstance(spec, list | tuple) and len(spec) == 2 and isinstance(spec[0], str)
        if not ok or not isinstance(spec[1], dict):
            raise TypeError(f"encoding[{i}] must be a name or (name, kwargs), got {spec!r}")
        specs.append((spec[0], dict(spec[1])))
    return specs


def check_schedule(encodings) -> None:
    """A per-layer schedule: no absolute encoding, one position_dims, randomized in all or none."""
    for i, enc in enumerate(encodings):
        if "embed" in enc.provides:
            raise ValueError(
                f"encoding[{i}] ({type(enc).__name__}) is absolute: it acts once, at the input; "
                "a per-layer schedule takes rotary, bias, relative or none encodings"
            )
    sampling = {(enc.sample_len, enc.sample_at_eval) if "sample_positions" in enc.provides
                else None for enc in encodings}  # fmt: skip
    if len(sampling) > 1:
        raise ValueError(
            "encoding: randomized positions are drawn once per forward for every layer, so a "
            "per-layer schedule has randomized in every layer (one sample_len, sample_at_eval) "
            f"or in none; got {[type(e).__name__ for e in encodings]}"
        )
    dims = {enc.position_dims for enc in encodings}
    if len(dims) > 1:
        raise ValueError(f"encoding: every layer must take the same positions, got "
                         f"position_dims {sorted(dims)}")  # fmt: skip
