"""Hugging Face configs in and out: the encoding a transformers config describes, and back.

    from_config(config, layer_type=None, *, layer=None) -> PositionalEncoding
    to_rope_parameters(encoding) -> dict     the transformers v5 `rope_parameters` dict
    to_config(encoding) -> dict              rope_parameters plus the recorded extra keys
    with_scaling(cfg, scaling, types) -> dict the config dict with a scaling's rope_parameters

`config`: a PretrainedConfig (its to_dict(); no transformers import) or a config.json dict (a
multimodal one without rope keys: its text_config). Read as transformers reads it:
rope_parameters (flat or per layer type), else legacy rope_scaling + rope_theta (GPT-NeoX
rotary_emb_base, Gemma 3 rope_local_base_freq; default 10000); partial_rotary_factor (GPT-NeoX
rotary_pct, GPT-J rotary_dim / Dh) -> R; head_dim (MLA: qk_rope_head_dim), else hidden_size //
num_attention_heads; (original_)max_position_embeddings where the scaling reads them; layout
"interleaved" for Llama 4, DeepSeek-V3 (rope_interleave), GPT-J, CodeGen; mrope keys -> "mrope".
Per-layer-type configs (Gemma 3) need `layer_type=` or `layer=`; no-rope layers (Llama 4,
SmolLM3: no_rope_layers / no_rope_layer_interval) give NoPE for "nope" or such a `layer=`, and
"nope_temperature" with Llama 4's attn_temperature_tuning (recorded in `hf_extras`).
Every encoding built here carries `hf_rope_parameters` (the selected dict, v5 form; None for
NoPE), so `to_rope_parameters(from_config(c, t)) == c["rope_parameters"][t]`.
"""

from __future__ import annotations

import copy

from posenc.base import PositionalEncoding
from posenc.checks import check_int
from posenc.encodings import build
from posenc.encodings.rotary import RoPE
from posenc.functional.rope_scaling import KNOWN_KEYS, ROPE_SCALING

ROPE_KEYS = ("rope_parameters", "rope_scaling", "rope_theta", "rotary_emb_base", "rotary_dim")
DEFAULT_THETA = 10000.0  # transformers' RotaryEmbeddingConfigMixin.default_theta
RENAMED_TYPES = {"su": "longrope", "mrope": "default"}  # legacy rope_type names
MODEL_RENAMED_TYPES = {"phi3": {"yarn": "longrope"}}  # as Phi3Config converts them on load
AS_GIVEN = "posenc_rope_type_as_given"  # a config dict key: a scaling patch() was asked for
# models whose rotary pairs are interleaved (a config's `rope_interleave` overrides)
INTERLEAVED_MODELS = ("llama4", "llama4_text", "deepseek_v3", "gptj", "codegen")
ORIGINAL_LEN_TYPES = ("llama3", "yarn", "longrope")  # read original_max_position_embeddings
MROPE_KEYS = ("mrope_section", "mrope_interleaved")
EXTRA_KEYS = ("attn_temperature_tuning", "floor_scale", "attn_scale")  # Llama 4, recorded only


def config_dict(config) -> dict:
    """The dict of a PretrainedConfig (to_dict()) or a config.json; a multimodal one's text part."""
    if isinstance(config, dict):
        cfg = config
    elif callable(getattr(config, "to_dict", None)):
        cfg = config.to_dict()
    else:
        raise TypeError(
            "config must be a transformers PretrainedConfig or the dict of a config.json, "
            f"got {type(config).__name__}"
        )
    if not any(cfg.get(k) is not None for k in ROPE_KEYS) and isinstance(
        cfg.get("text_config"), dict
    ):
        return cfg["text_config"]
    return cfg


def _theta(cfg: dict) -> float:
    theta = cfg.get("rope_theta", cfg.get("rotary_emb_base"))
    return DEFAULT_THETA if theta is None else theta


def rope_parameters_of(cfg: dict) -> dict:
    """The v5 rope_parameters of a config dict (a copy): as given, or built from legacy keys."""
    params = cfg.get("rope_parameters")
    for key in ("rope_parameters", "rope_scaling"):
        if cfg.get(key) is not None and not isinstance(cfg[key], dict):
            raise TypeError(
                f"config key {key!r} must be a dict (flat, or one per layer type), got "
                f"{type(cfg[key]).__name__}"
            )
    if params and any(isinstance(v, dict) for v in params.values()):  # per layer type
        for key, value in params.items():
            if value is not None and not isinstance(value, dict):
                raise TypeError(
                    f"config key 'rope_parameters' is nested per layer type, but its key {key!r} "
                    f"holds a {type(value).__name__}: each layer type needs a dict (or None)"
                )
    if params:
        return copy.deepcopy(params)
    if cfg.get("rope_local_base_freq") is not None:  # Gemma 3's legacy form
        full = {"rope_type": "default", **copy.deepcopy(cfg.get("rope_scaling") or {})}
        full.setdefault("rope_theta", _theta(cfg))
        local = {"rope_type": "default", "rope_theta": cfg["rope_local_base_freq"]}
        return {"sliding_attention": local, "full_attention": full}
    theta = cfg.get("rope_theta", cfg.get("rotary_emb_base"))
    if cfg.get("rope_scaling") is None and theta is None and not cfg.get("rotary_dim"):
        raise ValueError(
            "config describes no rotary encoding: it has none of the keys "
            f"{', '.join(ROPE_KEYS)} (nor text_config with one)"
        )
    params = copy.deepcopy(cfg.get("rope_scaling") or {})
    params.setdefault("rope_type", params.pop("type", "default"))
    return _defaults(params, cfg)


def _defaults(params: dict, cfg: dict) -> dict:
    """params with the config's rope_theta and partial rotary factor where they name none."""
    params.setdefault("rope_theta", _theta(cfg))
    prf = _partial(cfg)
    if prf is not None:
        params.setdefault("partial_rotary_factor", prf)
    return params


def _partial(cfg: dict) -> float | None:
    """partial_rotary_factor, else rotary_pct, else (no other rope key: GPT-J) rotary_dim / Dh."""
    prf = cfg.get("partial_rotary_factor", cfg.get("rotary_pct"))
    legacy = not any(cfg.get(k) for k in ("rope_parameters", "rope_theta", "rotary_emb_base"))
    if prf is None and legacy and cfg.get("rotary_dim"):
        prf = check_int("rotary_dim", cfg["rotary_dim"], low=2) / head_dim_of(cfg)
    return prf


def layer_types_of(params: dict) -> list[str] | None:
    """The layer types of rope_parameters nested per layer type, None for a flat dict."""
    nested = bool(params) and all(v is None or isinstance(v, dict) for v in params.values())
    return list(params) if nested else None


def no_rope_layers_of(cfg: dict) -> list[int] | None:
    """Per-layer flags (1: RoPE, 0: NoPE) of a config with no-rope layers (Llama 4), else None."""
    if "no_rope_layers" not in cfg and "no_rope_layer_interval" not in cfg:
        return None
    if cfg.get("no_rope_layers"):
        return [int(bool(f)) for f in cfg["no_rope_layers"]]
    interval = cfg.get("no_rope_layer_interval") or 4  # transformers' default
    layers = check_int("num_hidden_layers", cfg.get("num_hidden_layers"), low=1)
    return [int((i + 1) % interval != 0) for i in range(layers)]


def _select(cfg: dict, params: dict, layer_type, layer) -> dict | None:
    """The flat rope_parameters of the selected layer; None for a NoPE layer."""
    types, flags = layer_types_of(params), no_rope_layers_of(cfg)
    if layer is not None:
        if layer_type is not None:
            raise ValueError("pass layer_type= or layer=, not both")
        layers = cfg.get("num_hidden_layers") or len(flags or cfg.get("layer_types") or [])
        if check_int("layer", layer, low=0) >= layers > 0:
            raise ValueError(f"layer must be in 0..{layers - 1} (num_hidden_layers), got {layer}")
        if flags is not None:
            if layer >= len(flags):
                raise ValueError(f"layer={layer}: no_rope_layers has only {len(flags)} entries")
            if not flags[layer]:
                return None
        if types is not None:
            if not cfg.get("layer_types"):
                raise ValueError("layer=: the config has no layer_types to look the layer up in")
            layer_type = cfg["layer_types"][layer]
    if types is not None:
        if layer_type not in types:
            got = "none was given" if layer_type is None else f"got {layer_type!r}"
            raise ValueError(
                f"the config has rope_parameters per layer type: pass layer_type= one of "
                f"{types} (or layer=); {got}"
            )
        return params[layer_type]
    if layer_type == "nope" and flags is not None:
        return None
    if layer_type is not None:
        allowed = "None or 'nope'" if flags is not None else "None"
        raise ValueError(
            f"layer_type={layer_type!r}, but the config's rope_parameters are not per layer "
            f"type; allowed: {allowed}"
        )
    return params


# rope_parameters keys a model's attention reads, not its rotary embedding: patching the rotary
# module leaves them to the model (Ministral 3's Llama-4 query scale 1 + beta log(1 + [p / C])).
ATTENTION_KEYS = ("llama_4_scaling_beta",)


def _scaling(params: dict, cfg: dict) -> tuple[dict, dict]:
    """(RoPE's scaling dict, the mrope keys) of one layer's flat rope_parameters."""
    unknown = sorted(set(params) - KNOWN_KEYS - set(MROPE_KEYS) - {"alpha", *ATTENTION_KEYS})
    if unknown:
        raise ValueError(
            f"rope_parameters key {unknown[0]!r} cannot be represented by posenc (keys it "
            f"reads: {', '.join(sorted(KNOWN_KEYS | set(MROPE_KEYS)))})"
        )
    rope_type = params.get("rope_type", params.get("type", "default"))
    if not cfg.get(AS_GIVEN):  # a config read as its class reads it, not patch(scaling=...)
        rope_type = MODEL_RENAMED_TYPES.get(cfg.get("model_type"), {}).get(rope_type, rope_type)
    rope_type = RENAMED_TYPES.get(rope_type, rope_type)
    if rope_type not in ROPE_SCALING:
        raise ValueError(
            f"rope_parameters key 'rope_type': unknown rope_type {rope_type!r}; "
            f"allowed: {', '.join(ROPE_SCALING)}"
        )
    skip = (*MROPE_KEYS, "type", "alpha", *ATTENTION_KEYS)
    scaling = {k: v for k, v in params.items() if k not in skip}
    scaling["rope_type"] = rope_type
    if rope_type == "dynamic" and params.get("alpha"):  # Hunyuan: NTK with a fixed alpha
        scaling.update(rope_type="ntk", factor=params["alpha"])
        return scaling, {k: params[k] for k in MROPE_KEYS if k in params}
    _defaults(scaling, cfg)
    max_len = cfg.get("max_position_embeddings")
    if rope_type != "default" and max_len is not None:
        scaling["max_position_embeddings"] = max_len
    if rope_type == "dynamic" and max_len is not None:  # transformers' original length for it
        scaling["original_max_position_embeddings"] = max_len
    if rope_type in ORIGINAL_LEN_TYPES and cfg.get("original_max_position_embeddings"):
        scaling["original_max_position_embeddings"] = cfg["original_max_position_embeddings"]
    return scaling, {k: params[k] for k in MROPE_KEYS if k in params}


def head_dim_of(cfg: dict) -> int:
    for key in ("qk_rope_head_dim", "head_dim"):
        if cfg.get(key):
            return check_int(key, cfg[key], low=1)
    hidden, heads = cfg.get("hidden_size"), cfg.get("num_attention_heads")
    if not (hidden and heads):
        raise ValueError(
            "the config gives no head dim: it needs head_dim (or qk_rope_head_dim), or "
            "hidden_size and num_attention_heads"
        )
    return check_int("hidden_size", hidden, low=1) // check_int("num_attention_heads", heads, low=1)


def _mrope(head_dim: int, layout: str, scaling: dict, mrope: dict) -> PositionalEncoding:
    """posenc's "mrope" encoding with the mrope keys."""
    scaled = sorted(set(scaling) - {"rope_type", "rope_theta"})
    if scaling["rope_type"] != "default" or scaled:
        key = scaled[0] if scaled else "rope_type"
        raise ValueError(f"rope_parameters key {key!r}: posenc's mrope takes no rope scaling")
    return build("mrope", head_dim=head_dim, layout=layout, **mrope, base=scaling["rope_theta"])


def from_config(config, layer_type: str | None = None, *, layer: int | None = None):
    """posenc's RoPE, mrope, NoPE or nope_temperature that a transformers config describes
    (module docstring). layer_type: a key of per-layer-type rope_parameters, or "nope" (no-rope
    layers); layer: a layer index instead. ValueError names the key posenc cannot read."""
    cfg = config_dict(config)
    params = rope_parameters_of(cfg)
    selected = _select(cfg, params, layer_type, layer)
    head_dim = head_dim_of(cfg)
    if selected is None and cfg.get("attn_temperature_tuning"):  # Llama 4's NoPE layers
        temperature = {k: cfg[k] for k in ("floor_scale", "attn_scale") if k in cfg}
        encoding = build("nope_temperature", head_dim=head_dim, **temperature)
    elif selected is None:
        encoding = build("nope", head_dim=head_dim)
    else:
        scaling, mrope = _scaling(selected, cfg)
        interleave = cfg.get("rope_interleave")
        if interleave is None:
            interleave = cfg.get("model_type") in INTERLEAVED_MODELS
        layout = "interleaved" if interleave else "half"
        if mrope:
            encoding = _mrope(head_dim, layout, scaling, mrope)
        else:
            encoding = RoPE(head_dim=head_dim, layout=layout, scaling=scaling)
    encoding.hf_rope_parameters = copy.deepcopy(selected)
    has_nope = no_rope_layers_of(cfg) is not None
    encoding.hf_extras = {k: cfg[k] for k in EXTRA_KEYS if has_nope and k in cfg}
    return encoding


def to_rope_parameters(encoding: PositionalEncoding) -> dict:
    """The transformers v5 rope_parameters of a rotary encoding: from_config's, as read; else
    rope_type, rope_theta, the scaling keys and partial_rotary_factor = R / Dh (1.0 too: a
    model's default may differ). ValueError for NoPE, non-rotary and static "ntk"."""
    if not isinstance(encoding, PositionalEncoding):
        raise TypeError(f"encoding must be a posenc encoding, got {type(encoding).__name__}")
    if getattr(encoding, "hf_rope_parameters", None) is not None:
        return copy.deepcopy(encoding.hf_rope_parameters)
    if not isinstance(encoding, RoPE):
        raise ValueError(
            f"{type(encoding).__name__} (family {encoding.family!r}) has no transformers "
            "rope_parameters; only rope encodings do (a NoPE layer is written as no_rope_layers)"
        )
    if encoding.rope_type == "ntk":
        raise ValueError("rope_type 'ntk' (static NTK) has no transformers rope_type")
    if encoding.rope_type == "dynamic" and "original_max_position_embeddings" in encoding.scaling:
        raise ValueError(
            "rope_type 'dynamic' with original_max_position_embeddings: transformers' dynamic NTK "
            "reads the original length from the config's max_position_embeddings, not from "
            "rope_parameters; use to_config(encoding), which writes it there"
        )
    params = {"rope_type": encoding.rope_type, "rope_theta": encoding.base}
    skip = ("type", "rope_type", "rope_theta", "max_position_embeddings")
    params.update({k: copy.deepcopy(v) for k, v in encoding.scaling.items() if k not in skip})
    if encoding.head_dim is not None and encoding.rope_type != "proportional":
        # what it rotates, whatever factor the scaling holds; 1.0 too (GPT-NeoX defaults 0.25)
        params["partial_rotary_factor"] = encoding.rotary_dim() / encoding.head_dim
    return params


def is_nope(encoding: PositionalEncoding) -> bool:
    """A NoPE layer as transformers writes it: no angles, bias or embedding declared (at most
    a query scale: nope_temperature)."""
    return encoding.provides <= {"rotate", "sample_positions"}


def to_config(encoding: PositionalEncoding) -> dict:
    """The config keys of an encoding: rope_parameters plus the recorded extras (Llama 4's
    temperature); dynamic NTK: also max_position_embeddings, its original length."""
    extras = copy.deepcopy(getattr(encoding, "hf_extras", {}))
    if is_nope(encoding):
        return extras
    scaling, orig = getattr(encoding, "scaling", None) or {}, "original_max_position_embeddings"
    original = scaling.get(orig) or scaling.get("max_position_embeddings")
    if getattr(encoding, "rope_type", None) != "dynamic" or not original:
        return {"rope_parameters": to_rope_parameters(encoding), **extras}
    params = getattr(encoding, "hf_rope_parameters", None)
    if params is None:  # to_rope_parameters refuses dynamic with an original length
        clone = copy.copy(encoding)
        clone.scaling = {k: v for k, v in scaling.items() if k != orig}
        params = to_rope_parameters(clone)
    params = {k: v for k, v in copy.deepcopy(params).items() if k != orig}
    return {"rope_parameters": params, "max_position_embeddings": original, **extras}


def _merged(old: dict, new: dict) -> dict:
    """`new` over a layer's rope_parameters, keeping its rope_theta, partial and mrope keys."""
    if not isinstance(new, dict):
        raise TypeError(f"scaling must be a dict (rope_parameters), got {type(new).__name__}")
    if "rope_type" not in new and "type" not in new:
        raise ValueError(f"scaling needs the key 'rope_type' (got keys: {sorted(new)})")
    keep = ("rope_theta", "partial_rotary_factor", *MROPE_KEYS)
    kept = {k: old[k] for k in keep if k in (old or {})}
    return {**kept, **new}


def with_scaling(cfg: dict, scaling: dict, types: list[str] | None) -> dict:
    """The config dict with `scaling` as rope_parameters (per layer type: {type: dict}), taken
    as given (not renamed as a config class renames what it loads)."""
    params, cfg = cfg["rope_parameters"], {**cfg, AS_GIVEN: True}
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
