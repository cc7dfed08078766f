"""patch(model): a loaded transformers causal LM takes its positions from posenc, in place.

transformers (v5) decoders compute cos and sin once per forward in one module, `rotary_emb` on
the base model: forward(x [B, T, D], position_ids [B, T][, layer_type]) -> cos, sin [B, T, R]
in x's dtype, half layout (cat(angles, angles)), the attention factor folded in. Every
attention layer applies them with its own apply_rotary_pos_emb. patch swaps that module for a
PosencRotaryEmbedding computing the same cos and sin from posenc encodings; the model's
attention, masks, KV cache and generate() are kept as they are, and so are model.config and the
weights (a saved and reloaded model is the unpatched one).

posenc's angles are float64 products reduced to one turn (posenc.functional.position_angles),
transformers' are float32 products: both agree to ~1e-6 rad at short lengths, posenc stays
accurate at long ones where transformers' drift (up to p * w * 2^-24 rad).

transformers is optional: it is imported inside patch(); without it, ImportError with the hint.
"""

from __future__ import annotations

import torch
from torch import nn

from posenc import functional as PF
from posenc.base import PositionalEncoding
from posenc.encodings.rotary import RoPE
from posenc.hf.config import from_config, layer_types_of

# model_type -> how its attention applies cos, sin [B, T, R]: "full" rotates the whole head
# (rotate_half over Dh: R must be Dh), "partial" the first R = cos.shape[-1] channels (R <= Dh).
SUPPORTED = {
    "llama": "full",
    "mistral": "full",
    "qwen2": "full",
    "qwen3": "full",
    "gemma3_text": "full",
    "phi3": "partial",
    "gpt_neox": "partial",
}
INSTALL_HINT = "pip install posenc[hf]"


def _transformers():
    try:
        import transformers
    except ImportError as error:
        raise ImportError(f"posenc.hf.patch needs transformers: {INSTALL_HINT}") from error
    return transformers


def cos_sin(
    encoding: PositionalEncoding, position_ids: torch.Tensor, head_dim: int
) -> tuple[torch.Tensor, torch.Tensor]:
    """position_ids [B, T] -> cos, sin [B, T, R] float32 in transformers' half layout
    (cat(c, c)), the attention factor folded in; NoPE: cos 1, sin 0 over all Dh channels."""
    if encoding.family == "none":
        ones = torch.ones(*position_ids.shape, head_dim, device=position_ids.device)
        return ones, torch.zeros_like(ones)
    inv_freq, factor = encoding.frequencies(position_ids, head_dim)
    cos, sin = PF.rope_cos_sin(position_ids, inv_freq, factor)  # [B, T, R/2]
    return torch.cat((cos, cos), -1), torch.cat((sin, sin), -1)


class PosencRotaryEmbedding(nn.Module):
    """Stands in for a transformers model's `rotary_emb`, computing cos, sin with posenc.

    encodings: {layer_type: encoding} for a model with rope per layer type (Gemma 3), else
    {None: encoding}. forward(x [B, T, D], position_ids [B, T], layer_type=None) -> cos, sin
    [B, T, R] in x's dtype. The encodings are kept in a plain dict, not as submodules, so that
    model.to(dtype) leaves their float32 frequencies as they are.
    """

    def __init__(self, encodings: dict, head_dim: int) -> None:
        super().__init__()
        self.encodings = dict(encodings)
        self.head_dim = head_dim

    @torch.no_grad()
    def forward(
        self, x: torch.Tensor, position_ids: torch.Tensor, layer_type: str | None = None
    ) -> tuple[torch.Tensor, torch.Tensor]:
        if layer_type not in self.encodings:
            raise ValueError(
                f"layer_type={layer_type!r}: this model's rope is set for {list(self.encodings)}"
            )
        cos, sin = cos_sin(self.encodings[layer_type], position_ids, self.head_dim)
        return cos.to(x.dtype), sin.to(x.dtype)

    def extra_repr(self) -> str:
        return ", ".join(f"{t}: {e!r}" for t, e in self.encodings.items())


def _head_dim(config) -> int:
    return getattr(config, "head_dim", None) or config.hidden_size // config.num_attention_heads


def _merged(old: dict, new: dict) -> dict:
    """A scaling dict over a layer's own rope_parameters: rope_theta and partial_rotary_factor
    not given in it are the model's."""
    if not isinstance(new, dict):
        raise TypeError(f"scaling must be a dict (rope_parameters), got {type(new).__name__}")
    if "rope_type" not in new and "type" not in new:
        raise ValueError(f"scaling needs the key 'rope_type' (got keys: {sorted(new)})")
    kept = {k: old[k] for k in ("rope_theta", "partial_rotary_factor") if k in (old or {})}
    return {**kept, **new}


def _with_scaling(cfg: dict, scaling: dict, types: list[str] | None) -> dict:
    """The config dict with `scaling` for rope_parameters (per layer type: {type: dict})."""
    params = cfg["rope_parameters"]
    if types is None:
        return {**cfg, "rope_parameters": _merged(params, scaling)}
    if not isinstance(scaling, dict) or not all(
        t in types and isinstance(v, dict) for t, v in scaling.items()
    ):
        raise ValueError(
            f"scaling: this model has rope per layer type; pass {{layer_type: rope_parameters}} "
            f"with layer types from {types} (types left out keep theirs), got {scaling!r}"
        )
    new = {t: _merged(params[t], scaling[t]) if t in scaling else params[t] for t in params}
    return {**cfg, "rope_parameters": new}


def _encodings(config, encoding, scaling) -> dict:
    """{layer_type or None: encoding} for the model: its config's, rescaled, or given."""
    if encoding is not None and scaling is not None:
        raise ValueError("pass encoding= or scaling=, not both")
    cfg = config.to_dict()
    types = layer_types_of(cfg.get("rope_parameters") or {})
    if scaling is not None:
        cfg = _with_scaling(cfg, scaling, types)
    own = {t: from_config(cfg, t) for t in types} if types else {None: from_config(cfg)}
    if encoding is None:
        return own
    if not isinstance(encoding, dict):
        return {t: encoding for t in own}
    if types is None or not set(encoding) <= set(types):
        allowed = types or "none: this model has one rope; pass one encoding"
        raise ValueError(f"encoding: a dict is keyed by layer type; allowed: {allowed}")
    return {**own, **encoding}


def _check(encoding, kind: str, head_dim: int, model_type: str) -> None:
    """ValueError unless transformers' attention can apply `encoding` as cos, sin."""
    if not isinstance(encoding, PositionalEncoding):
        raise TypeError(f"encoding must be a posenc encoding, got {type(encoding).__name__}")
    if encoding.family == "none" and not encoding.overrides("rotate"):
        return  # NoPE: cos 1, sin 0 (nope_temperature scales queries: not expressible here)
    if not isinstance(encoding, RoPE) or encoding.position_dims != 1:
        raise ValueError(
            f"encoding: {type(encoding).__name__} cannot be applied as transformers' cos, sin; "
            "allowed: posenc 'rope' (any rope_type, half layout) or 'nope'"
        )
    if encoding.layout != "half":
        raise ValueError(
            f"encoding: layout={encoding.layout!r}; {model_type}'s attention rotates pairs "
            "(i, i + R/2): allowed layout 'half' (build the rope with layout='half')"
        )
    if encoding.head_dim is not None and encoding.head_dim != head_dim:
        raise ValueError(f"encoding: head_dim={encoding.head_dim}, the model's is {head_dim}")
    rotary = encoding.rotary_dim(head_dim)
    if kind == "full" and rotary != head_dim:
        partial = [m for m, k in SUPPORTED.items() if k == "partial"]
        raise ValueError(
            f"encoding: rotary_dim={rotary}, but {model_type}'s attention rotates the whole head "
            f"(rotary_dim must be head_dim={head_dim}); partial rotary: {', '.join(partial)}"
        )


def patch(model, encoding=None, *, scaling: dict | None = None):
    """Make a loaded transformers causal LM take its positions from posenc, in place; returns it.

    No arguments: the encoding its own config describes (posenc.hf.from_config): the same
    logits. scaling: a rope_parameters dict (e.g. {"rope_type": "yarn", "factor": 4.0,
    "original_max_position_embeddings": 2048}; rope_theta and partial_rotary_factor default to
    the model's; for a model with rope per layer type, {layer_type: dict}): the logits of the
    model rebuilt by transformers with that config. encoding: a posenc rope (any rope_type, half
    layout) or nope encoding, or for Gemma 3 a dict {layer_type: encoding}.

    Supported model_types: SUPPORTED (llama, mistral, qwen2, qwen3, gemma3_text, phi3, gpt_neox).
    The interleaved layout is refused (ValueError): these models rotate pairs (i, i + R/2), and
    an interleaved rope would need their q/k projection rows permuted, i.e. the weights changed.
    A partial rotary dim R < Dh works only where the model's attention rotates R channels
    (phi3, gpt_neox). Positions are the ones the model is given (left padding through generate's
    position_ids, packed sequences through explicit position_ids); dynamic and longrope follow
    the largest position of each call (transformers': the largest seen so far, the same in a
    generation).
    """
    transformers = _transformers()
    if not isinstance(model, transformers.PreTrainedModel):
        raise TypeError(f"model must be a transformers PreTrainedModel, got {type(model).__name__}")
    model_type = getattr(model.config, "model_type", None)
    if model_type not in SUPPORTED:
        raise ValueError(
            f"patch: model_type {model_type!r} is not supported; supported: {', '.join(SUPPORTED)}"
        )
    base = model.base_model
    if not isinstance(getattr(base, "rotary_emb", None), nn.Module):
        raise ValueError(f"patch: {type(base).__name__} has no rotary_emb module to replace")
    head_dim = _head_dim(model.config)
    encodings = _encodings(model.config, encoding, scaling)
    for enc in encodings.values():
        _check(enc, SUPPORTED[model_type], head_dim, model_type)
    base.rotary_emb = PosencRotaryEmbedding(encodings, head_dim)
    return model
