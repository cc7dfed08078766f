"""patch(model): a loaded transformers model takes its rotary positions from posenc, in place.

Every text rotary module (class name ending in "RotaryEmbedding", outside vision / audio
towers: forward(x [B, T, D], position_ids [B, T] (mrope [3, B, T]) [, layer_type])) is swapped
for a PosencRotaryEmbedding returning the same output computed by posenc; attention, masks, KV
cache, generate(), config and weights are kept. The output FORM is read from the module:
    "half"         cos, sin [B, T, R] = cat(c, c)            (Llama and most)
    "interleaved"  cos, sin [B, T, R] = repeat_interleave(c)  (Cohere, GLM-4.5 ...)
    "pairs"        cos, sin [B, T, R/2]                        (GPT-OSS, Nemotron ...)
    "pairs_sc"     sin, cos [B, T, R/2]                        (GPT-J, CodeGen)
    "complex"      polar(a, angle) [B, T, R/2] complex         (Llama 4, DeepSeek-V2)
with the attention factor folded in, and CONFIRMED: the module's output and posenc's (from_config
of its config) must agree at the PROBES (short, across the original context, long) to the
float32 rounding bound of the angles (4 p w 2^-24 + 4e-6, times the attention factor); else
ValueError saying what differs, the model left as it was. transformers is imported in patch().
"""

from __future__ import annotations

import copy
import inspect
import warnings

import torch
from torch import nn

from posenc import functional as PF
from posenc.base import PositionalEncoding
from posenc.encodings.rotary import RoPE
from posenc.functional.mrope import check_mrope_section
from posenc.hf.config import (
    ATTENTION_KEYS,
    MROPE_KEYS,
    config_dict,
    from_config,
    head_dim_of,
    is_nope,
    layer_types_of,
    with_scaling,
)

FORMS = ("half", "interleaved", "pairs", "pairs_sc", "complex")
SKIP_PARTS = ("vision", "visual", "audio", "speech", "image", "vqmodel", "encoder.")
KEPT_ATTRIBUTES = ("config", "layer_types", "mrope_section", "rope_type")  # read by some models


class Rope:
    """One layer type's rotary frequencies as patch applies them: a posenc rope (or NoPE), and
    for mrope the axis (0 t, 1 h, 2 w) each pair follows."""

    def __init__(self, encoding, axes: list[int] | None = None, head_dim=None) -> None:
        self.encoding, self.axes = encoding, axes
        self.head_dim = getattr(encoding, "head_dim", None) or head_dim

    def rotary_dim(self) -> int:
        return self.encoding.rotary_dim(self.head_dim)

    def frequencies(self, pos: torch.Tensor) -> tuple[torch.Tensor, float]:
        return self.encoding.frequencies(pos, self.head_dim)

    def cos_sin(self, position_ids: torch.Tensor, width: int):
        """position_ids [B, T] (mrope [3, B, T] or [B, T]) -> cos, sin [B, T, R/2] float32 times
        the attention factor, inv_freq [R/2]; NoPE: cos 1, sin 0 over `width` pairs."""
        pos = position_ids
        if self.axes is not None:
            pos = pos.expand(3, *pos.shape[-2:]) if pos.dim() == 2 else pos
            if pos.dim() != 3 or pos.shape[0] != 3:
                raise ValueError(
                    f"position_ids: mrope takes [3, B, T] or [B, T], got {tuple(pos.shape)}"
                )
        flat = pos[0] if self.axes is not None else pos
        if is_nope(self.encoding):
            ones = torch.ones(*flat.shape, width, device=pos.device)
            return ones, torch.zeros_like(ones), torch.zeros(width)
        inv_freq, factor = self.frequencies(pos)
        if self.axes is None:
            cos, sin = PF.rope_cos_sin(pos, inv_freq, factor)  # [B, T, R/2]
            return cos, sin, inv_freq
        angles = PF.mrope_angles(pos.permute(1, 2, 0), inv_freq, self.axes)  # [B, T, R/2]
        return angles.cos() * factor, angles.sin() * factor, inv_freq


def spread(t: torch.Tensor, form: str) -> torch.Tensor:
    """[.., R/2] per pair -> [.., R] in `form` (half: cat(t, t), interleaved: t0 t0 t1 t1 ...)."""
    if form == "half":
        return torch.cat((t, t), -1)
    return t.repeat_interleave(2, -1) if form == "interleaved" else t


def render(cos: torch.Tensor, sin: torch.Tensor, form: str, dtype: torch.dtype):
    """cos, sin [B, T, R/2] -> the module output of `form` (see the module docstring)."""
    if form == "complex":
        return torch.complex(cos, sin)  # cos, sin carry the attention factor
    cos, sin = spread(cos, form), spread(sin, form)
    if form == "pairs_sc":
        return sin.to(dtype), cos.to(dtype)
    return cos.to(dtype), sin.to(dtype)


def cos_sin(
    encoding: PositionalEncoding, position_ids: torch.Tensor, head_dim: int
) -> tuple[torch.Tensor, torch.Tensor]:
    """position_ids [B, T] -> cos, sin [B, T, R] float32, cat(c, c) with the attention factor."""
    cos, sin, _ = Rope(encoding, head_dim=head_dim).cos_sin(position_ids, head_dim // 2)
    return render(cos, sin, "half", torch.float32)


class PosencRotaryEmbedding(nn.Module):
    """A transformers rotary module's stand-in: encodings {layer_type or None: encoding or
    Rope}, form (FORMS): forward(x [B, T, D], position_ids [B, T] / [3, B, T], layer_type=None)
    -> that form in x's dtype. A plain dict, not submodules: model.to(dtype) keeps float32."""

    def __init__(self, encodings: dict, head_dim: int, form: str = "half") -> None:
        super().__init__()
        if form not in FORMS:
            raise ValueError(f"form must be one of {FORMS}, got {form!r}")
        wrap = lambda e: e if isinstance(e, Rope) else Rope(e, head_dim=head_dim)  # noqa: E731
        self.encodings = {t: wrap(e) for t, e in encodings.items()}
        self.head_dim, self.form = head_dim, form

    @torch.no_grad()
    def forward(self, x: torch.Tensor, position_ids: torch.Tensor, layer_type: str | None = None):
        if layer_type not in self.encodings:
            raise ValueError(
                f"layer_type={layer_type!r}: this model's rope is set for {list(self.encodings)}"
            )
        cos, sin, _ = self.encodings[layer_type].cos_sin(position_ids, self.head_dim // 2)
        return render(cos, sin, self.form, x.dtype)

    def extra_repr(self) -> str:
        rows = [f"{t}: {r.encoding!r}" for t, r in self.encodings.items()]
        return f"form={self.form}, " + ", ".join(rows)


# ---------------------------------------------------------------------------------------------
# what a model's rotary module is: its config's rope, per layer type, confirmed by probing


def rotary_modules(model) -> list[tuple[str, nn.Module]]:
    """(name, module) of every text rotary module (RotaryEmbedding, outside vision / audio)."""
    found = []
    for name, module in model.named_modules():
        cls = type(module).__name__
        # the class name counts too, unless it says text (GlmImageTextRotaryEmbedding)
        lowered = name.lower() if cls.endswith("TextRotaryEmbedding") else f"{name}.{cls}".lower()
        text = cls.endswith("RotaryEmbedding") and not any(p in lowered for p in SKIP_PARTS)
        if text or isinstance(module, PosencRotaryEmbedding):
            found.append((name, module))
    return found


def rope_of(cfg: dict, layer_type: str | None, head_dim: int | None = None) -> Rope:
    """The Rope of one layer type of a config dict (mrope sections as pair axes over a posenc
    rope); head_dim overrides the config's (Gemma 4's global layers)."""
    if head_dim is not None:
        cfg = {**cfg, "head_dim": head_dim, "qk_rope_head_dim": None}
    params = cfg.get("rope_parameters") or {}
    if layer_types_of(params) is None:
        layer_type = None  # one rope for every layer type
    flat = params[layer_type] if layer_type is not None else params
    head_dim = head_dim_of(cfg)
    if isinstance(flat, dict) and flat.get("mrope_section") is not None:
        section = flat["mrope_section"]  # Qwen3-Omni's "interleaved" counts as mrope_interleaved
        rest = {k: v for k, v in flat.items() if k not in (*MROPE_KEYS, "interleaved")}
        interleaved = bool(flat.get("mrope_interleaved") or flat.get("interleaved"))
        if isinstance(section, list | tuple) and len(section) != 3:
            raise ValueError(
                f"mrope_section {list(section)} has {len(section)} axes (HunYuan-VL's xdrope, "
                "whose sections split the doubled cos / sin, so the two channels of a rotary "
                "pair can follow different axes); posenc's mrope gives each pair one of 3 axes"
            )
        plain = {**cfg, "rope_parameters": ({**params, layer_type: rest} if layer_type else rest)}
        encoding = from_config(plain, layer_type)
        section = check_mrope_section(section, encoding.rotary_dim() // 2)
        encoding.hf_rope_parameters = copy.deepcopy(flat)
        return Rope(encoding, PF.mrope_axes(section, interleaved), head_dim)
    return Rope(from_config(cfg, layer_type), head_dim=head_dim)


def _probe_positions(cfg: dict) -> list[torch.Tensor]:
    """Position rows [1, T] compared at: short, across the original length L, long (4L + ...)."""
    params = cfg.get("rope_parameters") or {}
    lengths = [cfg.get("max_position_embeddings")] + [
        p.get("original_max_position_embeddings") for p in [params, *params.values()]
        if isinstance(p, dict)
    ]  # fmt: skip
    length = max(int(n) for n in lengths if n) if any(lengths) else 4096
    length = min(length, 1 << 18)
    short = torch.arange(8)
    edge = torch.arange(max(length - 4, 0), length + 4)
    long = torch.tensor([0, 1, 5, length // 2, 2 * length + 1, 4 * length + 3])
    return [row[None] for row in (short, edge, long)]


def _fresh(module: nn.Module) -> nn.Module:
    """A copy of the module with a dynamic rope's grown state reset to its original one."""
    clone = copy.deepcopy(module)
    if getattr(clone, "max_seq_len_cached", None) == getattr(clone, "original_max_seq_len", None):
        return clone  # not grown
    if isinstance(getattr(clone, "original_inv_freq", None), torch.Tensor):
        clone.inv_freq = clone.original_inv_freq.clone()
    for key in [k for k in vars(clone).get("_buffers", {}) if k.endswith("_original_inv_freq")]:
        setattr(clone, key.replace("_original_inv_freq", "_inv_freq"), getattr(clone, key).clone())
    if hasattr(clone, "original_max_seq_len"):
        clone.max_seq_len_cached = clone.original_max_seq_len
    return clone


def _compare(theirs, rope: Rope, pos, width: int, form: str) -> float | None:
    """The largest |posenc - theirs| beyond the tolerance (<= 0: equal); None: shapes differ."""
    cos, sin, inv_freq = rope.cos_sin(pos, width)
    factor = 1.0 if is_nope(rope.encoding) else rope.frequencies(pos)[1]
    ours = render(cos.double(), sin.double(), form, torch.float64)
    ours = [ours] if form == "complex" else list(ours)
    if len(ours) != len(theirs) or any(a.shape != b.shape for a, b in zip(ours, theirs)):
        return None
    if form == "complex" and not theirs[0].is_complex():
        return None
    p = pos.abs().amax(0) if pos.dim() == 3 else pos.abs()  # [B, T]
    tol = abs(factor) * (4e-6 + 4 * p[..., None].double() * inv_freq.double() * 2.0**-24)
    tol = spread(tol, form)  # the float32 rounding bound of their angles, times the factor
    worst = -1.0
    for a, b in zip(ours, theirs):
        b = b.to(torch.complex128 if b.is_complex() else torch.float64)
        worst = max(worst, ((a - b).abs() - tol).max().item())
    return worst


def identify(module: nn.Module, name: str, cfg: dict, ropes: dict) -> tuple[str, dict]:
    """(the form of the module's output, {layer_type: head dim} where its width shows another
    head dim), confirmed against `ropes` at every probe; else ValueError saying what differs."""
    hidden = cfg.get("hidden_size") or 8
    takes_type = "layer_type" in inspect.signature(module.forward).parameters
    form, where, head_dims = None, f"patch: {name} ({type(module).__name__})", {}
    for layer_type, rope in ropes.items():
        for row in _probe_positions(cfg):
            pos = row  # mrope: (t, h, w) [3, 1, T] that differ per axis, as an image's would
            if rope.axes is not None:
                pos = torch.stack((row, row // 2 + 1, row % 5 + row // 3))
            x = torch.zeros(1, row.shape[-1], hidden)
            args = (x, pos, layer_type) if takes_type else (x, pos)
            try:
                with torch.no_grad():
                    out = _fresh(module)(*args)
            except Exception as error:  # the module's own limits (a table of max positions)
                if row[0, -1] < 8:
                    raise ValueError(f"{where}: calling it as forward(x, position_ids"
                                     f"{', layer_type' if takes_type else ''}) fails: "
                                     f"{type(error).__name__}: {error}") from None  # fmt: skip
                continue
            theirs = list(out) if isinstance(out, tuple | list) else [out]
            if not all(isinstance(t, torch.Tensor) for t in theirs):
                raise ValueError(f"{where}: its output is not a tensor or a tuple of tensors")
            width = theirs[0].shape[-1]
            forms = [form] if form else FORMS
            scores = {f: _compare(theirs, rope, pos, width, f) for f in forms}
            if all(v is None for v in scores.values()) and layer_type not in head_dims:
                for head_dim in _other_head_dims(rope, width):  # the width tells the head dim
                    other = rope_of(cfg, layer_type, head_dim)
                    tried = {f: _compare(theirs, other, pos, width, f) for f in forms}
                    if any(v is not None for v in tried.values()):
                        rope, scores, head_dims[layer_type] = other, tried, head_dim
                        ropes[layer_type] = other
                        break
            fitting = [f for f, s in scores.items() if s is not None and s <= 0]
            if not fitting:  # (once the form is known, scores holds it alone)
                raise ValueError(_mismatch(where, layer_type, rope, theirs, scores, row))
            form = fitting[0]
            head_dims.setdefault(layer_type, None)
    return form, {t: d for t, d in head_dims.items() if d is not None}


def _layouts(ropes: dict) -> list[dict]:
    """The other mrope pair-axes layouts the sections allow: chunked, interleaved (modules that
    interleave whatever the config says) and ERNIE-4.5-VL's hw_pairs; [] for a plain rope."""
    out = []
    for kind in ("interleaved", "chunked", "hw_pairs"):
        alt = {}
        for t, rope in ropes.items():
            params = getattr(rope.encoding, "hf_rope_parameters", None) or {}
            section = params.get("mrope_section")
            if rope.axes is None or section is None:
                return []
            if kind == "hw_pairs" and section[0] != section[1]:
                break
            axes = PF.mrope_axes(section, kind == "interleaved", hw_pairs=kind == "hw_pairs")
            if axes == rope.axes:
                break
            alt[t] = Rope(rope.encoding, axes, rope.head_dim)
        else:
            out.append(alt)
    return out


def _identified(module: nn.Module, name: str, cfg: dict, ropes: dict) -> tuple:
    """(ropes, form, head dims) of identify(), trying the other mrope layouts (_layouts)
    where the config's does not match; the first error where none does."""
    try:
        return ropes, *identify(module, name, cfg, ropes)
    except ValueError as error:
        for other in _layouts(ropes):
            try:
                return other, *identify(module, name, cfg, other)
            except ValueError:
                continue
        raise error from None


def _other_head_dims(rope: Rope, width: int) -> list[int]:
    """Head dims whose rotary dim R could give an output `width` wide (R or R/2 wide)."""
    if is_nope(rope.encoding):
        return []
    prf = rope.rotary_dim() / rope.head_dim
    dims = [r for w in (width, 2 * width) for r in (w, round(w / prf)) if r % 2 == 0]
    return [d for d in dict.fromkeys(dims) if d != rope.head_dim]


def _mismatch(where, layer_type, rope, theirs, scores, row) -> str:
    enc = rope.encoding
    what = "NoPE" if is_nope(enc) else (
        f"{getattr(enc, 'rope_type', type(enc).__name__)} rope (R={rope.rotary_dim()}, "
        f"theta={getattr(enc, 'base', '?')}{', mrope' if rope.axes else ''})"
    )  # fmt: skip
    lt = f" layer_type {layer_type!r}:" if layer_type is not None else ""
    fitting = {f: s for f, s in scores.items() if s is not None}
    shapes = ", ".join(f"{t.dtype} {tuple(t.shape)}" for t in theirs)
    if not fitting:
        return (f"{where}:{lt} its output ({shapes}) has the shape of no form posenc "
                f"renders for its config's {what}; not patched")  # fmt: skip
    best = min(fitting, key=fitting.get)
    return (f"{where}:{lt} its output differs from posenc's {what} by up to "
            f"{fitting[best]:.2g} beyond float32 rounding (closest form {best!r}) at positions "
            f"{row[0, 0].item()}..{row[0, -1].item()}; not patched")  # fmt: skip


# ---------------------------------------------------------------------------------------------
# scaling= and encoding=


def _module_types(module: nn.Module, cfg: dict) -> list | None:
    """The layer types a module's forward takes (its own `layer_types`, else nested
    rope_parameters', else the config's); None for a module with one rope."""
    if "layer_type" not in inspect.signature(module.forward).parameters:
        return None
    own, params = getattr(module, "layer_types", None), cfg.get("rope_parameters") or {}
    if isinstance(own, list | tuple) and own and all(isinstance(t, str) for t in own):
        nested = layer_types_of(params) or []
        return [t for t in dict.fromkeys(own) if t not in nested or params[t] is not None]
    types = [t for t in layer_types_of(params) or [] if params[t] is not None]  # None: NoPE
    return types or list(dict.fromkeys(cfg.get("layer_types") or [])) or [None]


def _config_of(module: nn.Module, model) -> dict:
    own = getattr(module, "config", None)
    cfg = config_dict(own if own is not None and callable(getattr(own, "to_dict", None))
                      else model.config)  # fmt: skip
    sectioned = _with_module_sections(cfg, getattr(module, "mrope_section", None))
    if sectioned is cfg:
        return cfg
    try:  # the section the module's forward applies to the [3, B, T] positions it is given
        for t in _module_types(module, sectioned) or [None]:
            rope_of(sectioned, t)
    except (ValueError, TypeError) as error:  # a plain rope would crash in its attention
        raise ValueError(
            f"patch: {type(module).__name__} applies its default mrope_section "
            f"{getattr(module, 'mrope_section', None)} (the config names none) to (t, h, w) "
            f"positions, which does not fit the config's rotary dim: {error}; not patched"
        ) from None
    return sectioned


def _with_module_sections(cfg: dict, section) -> dict:
    """The config dict with the module's default mrope_section (a list, or per layer type)
    where rope_parameters name none (Qwen4-Exp, Cohere Compass, GLM-Image); else `cfg`."""
    params = cfg.get("rope_parameters")
    if section is None or not isinstance(params, dict):
        return cfg
    nested = layer_types_of(params)
    if nested is None:
        if params.get("mrope_section") is not None or not isinstance(section, list | tuple):
            return cfg
        return {**cfg, "rope_parameters": {**params, "mrope_section": list(section)}}
    if not isinstance(section, dict):
        return cfg
    new = {t: {**p, "mrope_section": list(section[t])}
           if isinstance(p, dict) and p.get("mrope_section") is None and t in section else p
           for t, p in params.items()}  # fmt: skip
    return {**cfg, "rope_parameters": new}


def _user_encodings(encoding, own: dict, form: str, head_dim: int) -> dict:
    """{layer_type: Rope} of encoding= over the module's own ropes `own` (output `form`)."""
    first, layout = next(iter(own.values())).encoding, None  # the pairs its attention rotates
    if form in ("interleaved", "complex"):
        layout = "interleaved"
    elif form == "half" and not is_nope(first):
        layout = first.layout  # DeepSeek-V3's rope_interleave: from_config says so
    types = [t for t in own if t is not None]
    if isinstance(encoding, dict):
        if not types or not set(encoding) <= set(types):
            allowed = types or "none: this model has one rope; pass one encoding"
            raise ValueError(f"encoding: a dict is keyed by layer type; allowed: {allowed}")
        given = encoding
    else:
        given = {t: encoding for t in own}
    out = dict(own)
    for t, enc in given.items():
        _check(enc, own[t], layout, head_dim)
        out[t] = Rope(enc, head_dim=head_dim)
    return out


def _check(encoding, own: Rope, layout: str | None, head_dim: int) -> None:
    """ValueError unless the module's form can carry `encoding` as the model applies it."""
    if not isinstance(encoding, PositionalEncoding):
        raise TypeError(f"encoding must be a posenc encoding, got {type(encoding).__name__}")
    if is_nope(encoding) and "rotate" not in encoding.provides:
        return  # NoPE: cos 1, sin 0 (nope_temperature scales queries: not expressible here)
    if not isinstance(encoding, RoPE) or encoding.position_dims != 1:
        raise ValueError(
            f"encoding: {type(encoding).__name__} cannot be applied as transformers' cos, sin; "
            "allowed: posenc 'rope' (any rope_type, the model's layout) or 'nope'"
        )
    if own.axes is not None:
        raise ValueError("encoding: this model's rope is mrope; pass scaling= to rescale it")
    if layout is None:
        raise ValueError("encoding: this model's rotary output does not tell its layout; "
                         "pass scaling= instead")  # fmt: skip
    if encoding.layout != layout:
        pairs = "(i, i + R/2)" if layout == "half" else "(2i, 2i + 1)"
        raise ValueError(
            f"encoding: layout={encoding.layout!r}; this model's attention rotates pairs "
            f"{pairs}: allowed layout {layout!r} (build the rope with layout={layout!r})"
        )
    if encoding.head_dim is not None and encoding.head_dim != head_dim:
        raise ValueError(f"encoding: head_dim={encoding.head_dim}, the model's is {head_dim}")
    rotary, theirs = encoding.rotary_dim(head_dim), own.rotary_dim()
    if rotary != theirs:
        raise ValueError(
            f"encoding: rotary_dim={rotary}, but this model's attention rotates {theirs} "
            f"channels (rotary_dim must be {theirs}); partial rotary: phi3, gpt_neox and other "
            "models built with it"
        )


def _rebuilt(cls, cfg_obj, new_params, *args):
    """cls(a copy of cfg_obj with rope_parameters new_params, *args), its warnings silenced."""
    new_cfg = copy.deepcopy(cfg_obj)
    new_cfg.rope_parameters = copy.deepcopy(new_params)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return cls(new_cfg, *args)


def _refuse_attention_keys(where: str, params: dict) -> None:
    """ValueError where the attention reads rope_parameters (ATTENTION_KEYS) at run time."""
    flat = [params] if not layer_types_of(params) else [p for p in params.values() if p]
    found = sorted({k for p in flat for k in p if k in ATTENTION_KEYS})
    if found:
        raise ValueError(
            f"{where}: its attention reads {', '.join(found)} (and the context) from "
            "config.rope_parameters at run time, which patch(scaling=...) would leave at the "
            "old values; rebuild the model with the new rope_parameters instead; not patched"
        )


def _attention_rescale(model, old_cfg, new_params) -> dict:
    """{module: {attribute: value}}: the floats attention modules derive from rope_parameters
    (DeepSeek's mscale), as their class computes them with the new ones."""
    changes = {}
    for module in model.modules():
        if getattr(module, "config", None) is not old_cfg or not hasattr(module, "layer_idx"):
            continue
        if type(module).__name__.endswith("RotaryEmbedding"):
            continue
        try:
            source = inspect.getsource(type(module).__init__)
        except (OSError, TypeError):
            continue
        if "rope_parameters" not in source and "rope_scaling" not in source:
            continue
        try:
            with torch.device("meta"):
                twin = _rebuilt(type(module), old_cfg, new_params, module.layer_idx)
        except Exception as error:
            raise ValueError(
                f"patch: scaling: {type(module).__name__} reads rope_parameters and cannot be "
                f"rebuilt to see what it derives from them ({type(error).__name__}); not patched"
            ) from None
        diff = {k: v for k, v in vars(twin).items() if isinstance(v, float)
                and vars(module).get(k) != v}  # fmt: skip
        if diff:
            changes[module] = diff
    return changes


def patch(model, encoding=None, *, scaling: dict | None = None):
    """Make a loaded transformers model take its rotary positions from posenc, in place; returns
    it, every rotary module confirmed first (module docstring). No arguments: its own config's
    encoding (the same logits). scaling: rope_parameters ({layer_type: dict} per layer type;
    rope_theta, partial and mrope keys default to the model's): the logits of the model
    transformers rebuilds with it (DeepSeek's mscale follows). encoding: a posenc rope (the
    model's layout and rotary dim) or nope, or {layer_type: encoding}. dynamic / longrope follow
    each call's largest position (transformers': the largest seen, the same from a fresh model)."""
    try:
        import transformers
    except ImportError as error:
        raise ImportError("posenc.hf.patch needs transformers: pip install posenc[hf]") from error
    if not isinstance(model, transformers.PreTrainedModel):
        raise TypeError(f"model must be a transformers PreTrainedModel, got {type(model).__name__}")
    if encoding is not None and scaling is not None:
        raise ValueError("pass encoding= or scaling=, not both")
    modules = rotary_modules(model)
    if not modules:
        raise ValueError(
            f"patch: model_type {getattr(model.config, 'model_type', None)!r} is not supported: "
            f"{type(model).__name__} has no rotary embedding module (a module whose class name "
            "ends in 'RotaryEmbedding', as transformers' RoPE models have)"
        )
    plan, rescale = [], {}
    for name, module in modules:
        if isinstance(module, PosencRotaryEmbedding):
            raise ValueError(f"patch: {name} is already patched; patch a fresh model")
        cfg = _config_of(module, model)
        types = _module_types(module, cfg)
        where = f"patch: {name} ({type(module).__name__})"
        try:
            own = {t: rope_of(cfg, t) for t in (types or [None])}
        except (ValueError, TypeError) as error:
            raise ValueError(f"{where}: its config: {error}; not patched") from None
        own, form, head_dims = _identified(module, name, cfg, own)
        ropes = own
        if scaling is not None:
            _refuse_attention_keys(where, cfg.get("rope_parameters") or {})
            nested = layer_types_of(cfg.get("rope_parameters") or {})
            new_cfg = with_scaling(cfg, scaling, nested)
            try:
                ropes = {t: rope_of(new_cfg, t, head_dims.get(t)) for t in own}
            except (ValueError, TypeError) as error:
                raise ValueError(f"scaling: {error}") from None
            for t, rope in ropes.items():  # the pair axes identified (ERNIE's hw_pairs)
                if rope.axes is not None and len(rope.axes) == len(own[t].axes or []):
                    rope.axes = own[t].axes
            cfg_obj = getattr(module, "config", None) or model.config
            try:  # transformers' module rebuilt with it (where it can be) must give the same
                ref = _rebuilt(type(module), cfg_obj, new_cfg["rope_parameters"])
            except Exception:
                ref = None
            if ref is not None:
                got, _ = identify(ref, f"{name} rebuilt with the scaling", new_cfg, dict(ropes))
                if got != form:
                    raise ValueError(f"patch: {name} rebuilt with the scaling gives form {got!r}, "
                                     f"the model's own {form!r}; not patched")  # fmt: skip
            rescale.update(_attention_rescale(model, cfg_obj, new_cfg["rope_parameters"]))
        elif encoding is not None:
            ropes = _user_encodings(encoding, own, form, head_dim_of(cfg))
        plan.append((name, module, ropes, form, cfg))
    for name, module, ropes, form, cfg in plan:
        new = PosencRotaryEmbedding(ropes, head_dim_of(cfg), form)
        for key in KEPT_ATTRIBUTES:
            if key in vars(module) or hasattr(type(module), key):
                setattr(new, key, getattr(module, key))
        model.set_submodule(name, new)
    for module, diff in rescale.items():
        for key, value in diff.items():
            setattr(module, key, value)
    return model
