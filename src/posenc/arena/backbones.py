"""The models the arena trains: build_model(kwargs) -> model; model(tokens [B, T]) -> logits
[B, T, V]. kwargs are TransformerLM's keywords, plus "backbone": "hf-llama" (transformers' own
LlamaForCausalLM, positions through posenc.hf.patch; pip install posenc[hf]) or "lstm".
"""

from __future__ import annotations

import torch
from torch import nn

from posenc.arena.config import LSTM_TAKES
from posenc.encodings import build
from posenc.hf import patch
from posenc.model import TransformerLM


class HFLlama(nn.Module):
    """transformers' LlamaForCausalLM at the arena's size (MLP 4 x dim, tied embeddings), its
    rotary embedding a posenc encoding (rope with any scaling, or nope); no cache, no mask
    (right padding in a causal model). `attn_backend` is ignored: transformers picks its own."""

    attn_backend = "auto"

    def __init__(
        self, *, vocab_size: int, dim: int, depth: int, heads: int, encoding: str = "rope",
        encoding_kwargs: dict | None = None, train_len: int | None = None, causal: bool = True,
    ) -> None:  # fmt: skip
        super().__init__()
        try:
            from transformers import LlamaConfig, LlamaForCausalLM
        except ImportError as error:
            hint = "--backbone hf-llama needs transformers: pip install posenc[hf]"
            raise ImportError(hint) from error
        if not causal:
            raise ValueError("the hf-llama backbone is a causal LM (causal=True)")
        kwargs = dict(encoding_kwargs or {})
        config = LlamaConfig(
            vocab_size=vocab_size, hidden_size=dim, intermediate_size=4 * dim,
            num_hidden_layers=depth, num_attention_heads=heads, num_key_value_heads=heads,
            max_position_embeddings=train_len or 2048, tie_word_embeddings=True,
            rope_theta=float(kwargs.get("base", 10000.0)), bos_token_id=None, eos_token_id=None,
            pad_token_id=None,
        )  # fmt: skip
        self.lm = LlamaForCausalLM(config)
        self.encoding = build(encoding, head_dim=dim // heads, train_len=train_len, **kwargs)
        patch(self.lm, self.encoding)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        return self.lm(input_ids=tokens, use_cache=False).logits


class LSTMLM(nn.Module):
    """tokens [B, T] -> embedding [B, T, D] -> encoding.embed (absolute, or nope) -> Linear to D
    if it concatenates -> LSTM of `depth` layers -> LayerNorm -> tied head -> logits [B, T, V].
    `heads` and `attn_backend` are unused (no attention)."""

    attn_backend = "auto"

    def __init__(
        self, *, vocab_size: int, dim: int, depth: int, heads: int = 1, encoding: str = "nope",
        encoding_kwargs: dict | None = None, train_len: int | None = None, causal: bool = True,
    ) -> None:  # fmt: skip
        super().__init__()
        if not causal:
            raise ValueError("the lstm backbone reads left to right (causal=True)")
        self.tok_emb = nn.Embedding(vocab_size, dim)
        kwargs = dict(dim=dim, train_len=train_len, **(encoding_kwargs or {}))
        self.encoding = build(encoding, **kwargs)
        if not self.encoding.provides <= LSTM_TAKES:  # what it would not apply
            raise ValueError(f"the lstm backbone takes absolute encodings or nope, not {encoding}")
        width = self.encoding.embed_dim(dim)
        self.in_proj = nn.Linear(width, dim) if width != dim else nn.Identity()
        self.lstm = nn.LSTM(dim, dim, num_layers=depth, batch_first=True)
        self.norm = nn.LayerNorm(dim)
        self.lm_head = nn.Linear(dim, vocab_size, bias=False)
        self.lm_head.weight = self.tok_emb.weight
        nn.init.normal_(self.tok_emb.weight, std=dim**-0.5)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        T = tokens.shape[1]
        x = self.tok_emb(tokens) * self.encoding.token_scale(self.tok_emb.embedding_dim)
        x = self.in_proj(self.encoding.embed(x, torch.arange(T, device=tokens.device)))
        return self.lm_head(self.norm(self.lstm(x)[0]))  # [B, T, V]


BUILDERS = {"posenc": TransformerLM, "hf-llama": HFLlama, "lstm": LSTMLM}


def build_model(kwargs: dict) -> nn.Module:
    """The model of a cell's settings: kwargs["backbone"] (absent: posenc) names the class."""
    kwargs = dict(kwargs)
    backbone = kwargs.pop("backbone", "posenc")
    if backbone not in BUILDERS:
        raise ValueError(f"backbone must be one of {', '.join(BUILDERS)}, got {backbone!r}")
    return BUILDERS[backbone](**kwargs)


def decayed(name: str, p: torch.Tensor) -> bool:
    """Whether AdamW decays this parameter: the blocks' weight matrices (posenc's `blocks.`,
    Llama's `lm.model.layers.`, the LSTM's), not embeddings, norms, biases or encodings."""
    return name.startswith(("blocks.", "lm.model.layers.", "lstm.")) and p.dim() >= 2
