"""The settings that make each serving engine apply a scaling, and a copy of the model that
loads with it by default (docs/stretch/engines.md: what each engine takes, and why)."""

from __future__ import annotations

import dataclasses
import json
import math
import os
import re
import shutil
import tempfile
from dataclasses import dataclass, field, replace
from functools import partial

from posenc.cliargs import check_writable
from posenc.functional.rope_scaling import default, llama3
from posenc.hf.config import (
    config_dict,
    from_config,
    head_dim_of,
    layer_types_of,
    rope_parameters_of,
    with_scaling,
)
from posenc.stretch import models
from posenc.stretch.scalings import FACTOR, Scaling, parse

ENGINES = ("transformers", "vllm", "sglang", "llama.cpp", "ollama")
SOURCES = {
    "transformers": "transformers 5.24.0 src/transformers/modeling_rope_utils.py "
    "(ROPE_INIT_FUNCTIONS, standardize_rope_params); 4.x reads rope_scaling + rope_theta",
    "vllm": "vllm-project/vllm vllm/model_executor/layers/rotary_embedding/__init__.py get_rope "
    "(926c71f) and vllm/config/model.py _get_and_verify_max_len (18ec662)",
    "sglang": "sgl-project/sglang python/sglang/srt/utils/hf_transformers_utils.py "
    "get_context_length (2aa2e2d), python/sglang/srt/layers/rotary_embedding.py (ed0774f); "
    "server flags --json-model-override-args, --context-length",
    "llama.cpp": "ggml-org/llama.cpp as vendored in llama-cpp-python 0.3.36, and a5410f0: "
    "common/arg.cpp (--rope-scale N sets rope_freq_scale = 1/N), src/llama-model.cpp "
    "load_hparams (rope keys, defaults), src/llama-context.cpp (yarn ext/attn factor), "
    "src/llama-arch.cpp (GGUF key names), src/models/*.cpp (rope_freqs, per-layer rules)",
    "ollama": "ollama/ollama docs/modelfile.mdx and api/types.go (Runner options) at v0.33.0-rc2 "
    "(fb30760), which runs its vendored llama.cpp (LLAMA_CPP_VERSION b10488) on a GGUF; "
    "rope_frequency_base / rope_frequency_scale removed in d5eec16 (#1983, 2024-05-09)",
}
DYNAMIC = ("dynamic", "dynamic_yarn")  # the frequencies follow each call's length
GGUF_TYPES = ("none", "linear", "yarn", "ntk", "llama3")  # what --export writes into a .gguf
ROPE_FREQS = "rope_freqs.weight"  # llama.cpp's per-pair divisors (Llama 3.1 in GGUF)
# GGUF architectures whose sliding-window layers llama.cpp leaves unscaled (their freq scale
# stays 1 and their base is rope.freq_base_swa: src/models/gemma3.cpp, llama-hparams.h), i.e.
# the layers transformers scales for a flat rope_scaling (full_attention)
FULL_ONLY = ("gemma3",)
# architectures whose llama.cpp graph loads rope_freqs.weight (src/models/*.cpp; a subset)
FREQS_ARCHS = ("llama", "llama4", "mistral3", "granite", "deci", "exaone", "exaone4",
               "minicpm", "arcee", "apertus")  # fmt: skip


@dataclass(frozen=True)
class ModelInfo:
    """A model's rope, from its config: rope_parameters in v5 form, rotary_dim R; gguf_rope the
    scaling llama.cpp reads from a GGUF where transformers' GGUF loader sees none."""

    name: str
    model_type: str
    context: int
    head_dim: int
    rotary_dim: int
    rope_parameters: dict
    gguf_arch: str | None = None
    gguf_rope: dict | None = None

    @property
    def layer_types(self) -> list[str] | None:
        return layer_types_of(self.rope_parameters)

    @classmethod
    def from_config(cls, config, name: str = "model", gguf_arch: str | None = None) -> ModelInfo:
        cfg = config_dict(config)
        context = cfg.get("max_position_embeddings")
        if not isinstance(context, int) or context < 1:
            raise ValueError("--model: its config gives no max_position_embeddings (its context)")
        params, head_dim = rope_parameters_of(cfg), head_dim_of(cfg)
        rotary = from_config(cfg, default_target(params)).rotary_dim(head_dim)
        model_type = str(cfg.get("model_type"))
        return cls(name, model_type, context, head_dim, rotary, params, gguf_arch)

    def own(self, target: str | None) -> dict:
        return dict(self.rope_parameters[target] if target else self.rope_parameters)


def default_target(rope_parameters: dict) -> str | None:
    """The layer type a flat label sets: full_attention where RoPE is per layer type."""

    types = layer_types_of(rope_parameters)
    if types is None:
        return None
    return "full_attention" if "full_attention" in types else types[-1]


@dataclass(frozen=True)
class Plan:
    """A scaling on a model: `params` the target layer type's rope_parameters (None for "none"),
    `length` the context it serves (context x factor; the context for none and dynamic)."""

    scaling: Scaling
    target: str | None
    params: dict | None
    factor: float
    length: int
    info: ModelInfo

    @property
    def label(self) -> str:
        return replace(self.scaling, layer_type=self.target).label


@dataclass
class Setting:
    """One engine's settings for a plan; `cannot`: what it cannot express."""

    engine: str
    config: dict = field(default_factory=dict)
    flags: list[str] = field(default_factory=list)
    lines: list[str] = field(default_factory=list)
    cannot: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    source: str = ""


def plan_for(label: str, info: ModelInfo) -> Plan:
    """The plan of a label on a model; ValueError naming the label."""
    scaling = parse(label)
    target, kw = scaling.layer_type, dict(scaling.kwargs)
    if scaling.name in FACTOR and "factor" not in kw:
        raise ValueError(
            f"{label!r}: give the factor, e.g. {scaling.name}(factor=2) "
            "(the target length over the context)"
        )
    factor = float(kw.get("factor", 1.0))
    if not (math.isfinite(factor) and factor >= 1):
        raise ValueError(f"{label!r}: factor must be a number >= 1, got {kw.get('factor')!r}")
    types = info.layer_types
    if target is not None and (types is None or target not in types):
        allowed = ", ".join(types) if types else "none (this model has one rope; drop @...)"
        raise ValueError(f"{label!r}: unknown layer type {target!r}; allowed: {allowed}")
    target = target or default_target(info.rope_parameters)
    params = scaling.params(context=info.context, head_dim=info.rotary_dim, factor=factor)
    if params is not None:
        own = info.own(target)
        params = {k: own[k] for k in ("rope_theta", "partial_rotary_factor") if k in own} | params
        nested = {**info.rope_parameters, target: params} if target else params
        try:
            cfg = with_scaling(_cfg(info), nested if target else params, types)
            from_config(cfg, target)
        except (ValueError, TypeError) as err:
            raise ValueError(f"{label!r}: {err}") from None
    static = scaling.name not in DYNAMIC and params is not None
    length = round(info.context * factor) if static else info.context
    return Plan(scaling, target, params, factor, length, info)


def _cfg(info: ModelInfo) -> dict:
    return {"model_type": info.model_type, "head_dim": info.head_dim,
            "max_position_embeddings": info.context,
            "rope_parameters": info.rope_parameters}  # fmt: skip


def ntk_theta(plan: Plan) -> float:
    """Static NTK (bloc97) as a base: theta * factor^(R / (R - 2)), R the rotary dim."""
    r = plan.info.rotary_dim
    return plan.params["rope_theta"] * plan.factor ** (r / (r - 2))


def hf_params(plan: Plan) -> dict | None:
    """The target layer type's rope_parameters for transformers 5 (None: no such rope_type)."""
    p, name = plan.params, plan.scaling.name
    if p is None:
        return plan.info.own(plan.target)
    if name == "dynamic_yarn":
        return None
    keep = {k: p[k] for k in ("rope_theta", "partial_rotary_factor") if k in p}
    if name == "ntk":
        return {"rope_type": "default", **keep, "rope_theta": ntk_theta(plan)}
    drop = {"original_max_position_embeddings"} if name in ("linear", "dynamic") else set()
    return {k: v for k, v in p.items() if k not in drop}


def hf_rope_parameters(plan: Plan) -> dict | None:
    """The scaled model's whole rope_parameters (nested per layer type where the model's are)."""
    p = hf_params(plan)
    if p is None or plan.target is None:
        return p
    return {**plan.info.rope_parameters, plan.target: p}


def legacy_config(plan: Plan) -> dict | None:
    """transformers 4.x keys (rope_scaling + rope_theta), or None where 4.x cannot say it."""
    p = hf_params(plan)
    if p is None or p.get("rope_type") == "proportional":
        return None
    if plan.target not in (None, "full_attention"):
        return None
    rest = {k: v for k, v in p.items() if k not in ("rope_theta", "partial_rotary_factor")}
    out = {"rope_scaling": None if rest.get("rope_type") == "default" else rest,
           "rope_theta": p.get("rope_theta")}  # fmt: skip
    if plan.target:  # Gemma 3's 4.x form: rope_local_base_freq for the sliding layers
        local = plan.info.rope_parameters.get("sliding_attention") or {}
        out["rope_local_base_freq"] = local.get("rope_theta")
    return out


def vllm_length(model_type: str, max_pos: int, rope_parameters: dict) -> float:
    """The max_model_len vLLM derives (_get_and_verify_max_len)."""
    types = layer_types_of(rope_parameters)
    flat = [rope_parameters[t] for t in types if rope_parameters[t]] if types else [rope_parameters]
    if "gemma3" in model_type:
        return max_pos
    derived, factor = max_pos, 1.0
    for rp in flat:
        if rp.get("rope_type") not in ("su", "longrope", "llama3"):
            factor = rp.get("factor", factor)
            if rp.get("rope_type") == "yarn":
                derived = rp["original_max_position_embeddings"]
    return derived * factor


def sglang_length(max_pos: int, rope_scaling: dict | None) -> float:
    """The context length SGLang derives (get_context_length; sglang#2943)."""
    rs = rope_scaling or {}
    factor = rs.get("factor", 1) or 1
    if "original_max_position_embeddings" in rs or rs.get("rope_type") == "llama3":
        factor = 1
    return max_pos * factor


def engine_override(plan: Plan) -> dict | None:
    """The config override vLLM and SGLang apply with config.update: rope_scaling with
    rope_theta inside (transformers 5 keeps no rope_theta not given); per layer type the whole
    nested rope_parameters (a flat rope_scaling would replace them all)."""
    params = hf_rope_parameters(plan)
    if params is None:
        return None
    if plan.target is not None:
        return {"rope_parameters": params}
    return {"rope_scaling": params, "rope_theta": params["rope_theta"]}


def _json(value) -> str:
    return json.dumps(value, separators=(",", ":"))


CANNOT = {  # (engine, scaling) -> why the engine cannot express it
    ("transformers", "dynamic_yarn"): "transformers has no Dynamic-YaRN rope_type",
    ("vllm", "dynamic"): "vLLM's rope_type 'dynamic' is not dynamic: it sets one base for "
    "max_position_embeddings x factor and applies it to every prompt, short ones too "
    "(vllm#3488); posenc's dynamic NTK is not expressible",
    ("vllm", "dynamic_yarn"): "vLLM has no Dynamic-YaRN rope_type",
    ("vllm", "proportional"): "vLLM's get_rope has no 'proportional' rope_type",
    ("sglang", "dynamic"): "SGLang's rope_type 'dynamic' (layers/rotary_embedding.py, adapted "
    "from vLLM's) sets one base for max_position_embeddings x factor and applies it to every "
    "prompt; posenc's dynamic NTK is not expressible",
    ("sglang", "dynamic_yarn"): "SGLang has no Dynamic-YaRN rope_type",
    ("sglang", "proportional"): "'proportional' is not among the scalings checked for SGLang",
}
RUNTIME_NOTE = (
    "transformers 5 warns that rope_scaling is deprecated and maps it onto rope_parameters "
    "(rope_theta included, as given here); the same dict under rope_parameters works there too"
)


def _setting(engine: str, plan: Plan) -> Setting:
    s = Setting(engine, source=SOURCES[engine])
    if (engine, plan.scaling.name) in CANNOT:
        s.cannot.append(CANNOT[engine, plan.scaling.name])
    return s


def transformers_setting(plan: Plan) -> Setting:
    s = _setting("transformers", plan)
    if s.cannot:
        return s
    length = {"max_position_embeddings": plan.length}
    s.config = {"rope_parameters": hf_rope_parameters(plan), **length}
    legacy = legacy_config(plan)
    if legacy is None:
        s.notes.append("transformers 4.x cannot express this (rope_parameters needs 5.x)")
    else:
        s.lines.append(f"transformers 4.x config.json: {_json({**legacy, **length})}")
    name = plan.scaling.name
    if name == "dynamic":
        s.notes.append(
            "dynamic reads max_position_embeddings as the original length: keep it "
            f"at {plan.info.context}; the frequencies grow with the longest input "
            "seen and stay grown (cached keys keep the older base: transformers#25104)"
        )
    if name == "ntk":
        s.notes.append(
            "static NTK has no rope_type in transformers: it is the base change "
            f"rope_theta {plan.params['rope_theta']:g} -> {ntk_theta(plan):.6g}"
        )
    if name in FACTOR and name != "ntk":
        s.notes.append(
            f"factor {plan.factor:g} is the target length over the original "
            f"length ({plan.length} / {plan.info.context}); "
            "original_max_position_embeddings is the trained context, not the target "
            "(LongLoRA#81)"
        )
    return s


SERVED = {  # engine: (override flag, length flag, static note, length note)
    "vllm": (
        "--hf-overrides",
        "--max-model-len",
        "the scaling is static: it applies to short prompts too (static YaRN x4 cost Qwen3 "
        "Arena-Hard 39 -> 26.5: QwenLM/Qwen3#1567)",
        "vLLM also caps the length at tokenizer_config.json's model_max_length; above its "
        "derived length it refuses --max-model-len unless VLLM_ALLOW_LONG_MAX_MODEL_LEN=1 "
        "(vllm#2565)",
    ),
    "sglang": (
        "--json-model-override-args",
        "--context-length",
        "the scaling is static: it applies to short prompts too",
        "above its derived length SGLang refuses --context-length unless "
        "SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN=1",
    ),
}


def served_setting(engine: str, plan: Plan) -> Setting:
    """A server's flags: engine_override, raising max_position_embeddings where the engine
    would derive a length below plan.length, and the length flag."""
    s = _setting(engine, plan)
    if s.cannot:
        return s
    name, context, over = plan.scaling.name, plan.info.context, engine_override(plan)
    override, length, static, limit = SERVED[engine]
    rs = over.get("rope_scaling")

    def derive(m: int) -> float:  # the engine's length for max_position_embeddings m
        if engine == "vllm":
            return vllm_length(plan.info.model_type, m, hf_rope_parameters(plan))
        return sglang_length(m, rs)

    got = derive(context)
    if got < plan.length:
        per = got / context  # the engine's length per max_position_embeddings
        need = math.ceil(plan.length / per) if derive(context * 2) > got else plan.length
        over = {**over, "max_position_embeddings": need}
        if engine == "sglang" and "original_max_position_embeddings" in (rs or {}):
            s.notes.append(
                "max_position_embeddings is raised too: SGLang's get_context_length "
                "ignores the factor when original_max_position_embeddings is set and "
                "would cap the length at the old context (sglang#2943)"
            )
        elif engine == "sglang":
            s.notes.append(
                "max_position_embeddings is raised too: SGLang derives the length from "
                "it times rope_scaling's factor (none here)"
            )
    s.flags = [override, _json(over)] if name != "none" else []
    s.flags += [length, str(plan.length)]
    if name != "none":
        s.notes.append(static)
    if name == "ntk" and engine == "vllm":
        s.notes.append(
            "vLLM's own rope_type 'ntk' is another formula (base x factor, then "
            "inv_freq / factor^(2/R)); posenc's ntk is the base change above"
        )
    s.notes.append(limit)
    if name != "none" and "rope_scaling" in over:
        s.notes.append(RUNTIME_NOTE)
    return s


def llamacpp_setting(plan: Plan) -> Setting:
    s = _setting("llama.cpp", plan)
    name, p = plan.scaling.name, plan.params or {}
    if name in DYNAMIC:
        s.cannot.append(
            "llama.cpp has no dynamic scaling: its rope is fixed when the context "
            "is created (--rope-scaling takes none, linear, yarn)"
        )
        return s
    why = {
        "longrope": "longrope takes rope_factors_long / rope_factors_short tensors and picks "
        "the long ones by -c, not by the prompt's length",
        "proportional": "no proportional (p-RoPE) scaling type",
    }.get(name)
    if why:
        s.cannot.append(f"llama.cpp: {why}; not expressible by flags")
        return s
    flags = ["-c", str(plan.length)]
    if name == "linear":
        flags = ["--rope-scaling", "linear", "--rope-scale", f"{plan.factor:g}", *flags]
    elif name == "yarn":
        flags = ["--rope-scaling", "yarn", "--rope-scale", f"{plan.factor:g}",
                 "--yarn-orig-ctx", str(p["original_max_position_embeddings"]), *flags]  # fmt: skip
        for key, flag, default in (("beta_fast", "--yarn-beta-fast", 32),
                                   ("beta_slow", "--yarn-beta-slow", 1)):  # fmt: skip
            if p.get(key) not in (None, default):
                flags += [flag, f"{p[key]:g}"]
        s.notes.append(
            "--yarn-ext-factor (default: 1 for yarn) and --yarn-attn-factor (default: "
            "0.1 ln(factor) + 1, as transformers) are left at their defaults"
        )
    elif name == "ntk":
        flags = ["--rope-scaling", "none", "--rope-freq-base", f"{ntk_theta(plan):.9g}", *flags]
    elif name == "llama3":
        s.cannot.append(
            "llama3 has no flag: llama.cpp reads it as the GGUF tensor "
            f"{ROPE_FREQS} (per-pair divisors); write it with --export"
        )
        flags = []
    s.flags = flags
    if plan.info.gguf_arch is None:
        s.notes.append(
            "the flags act on a GGUF: convert the folder first (llama.cpp's "
            "convert_hf_to_gguf.py), or export a .gguf model with --export"
        )
    if name in ("linear", "yarn"):
        s.notes.append(
            f"--rope-scale takes the factor ({plan.factor:g}); --rope-freq-scale "
            f"takes its inverse ({1 / plan.factor:.6g}) (llama.cpp#2402)"
        )
    if plan.target is not None and plan.info.gguf_arch in FULL_ONLY:
        s.notes.append(
            f"llama.cpp's {plan.info.gguf_arch} scales its global layers only (the sliding ones "
            "keep freq scale 1 and rope.freq_base_swa): the full_attention layers, as here"
        )
        if plan.target != "full_attention":
            s.cannot.append("llama.cpp cannot scale this model's sliding layers")
            s.flags = []
    elif plan.target is not None:
        s.notes.append(
            "per-layer-type rope: which layers llama.cpp scales is the architecture's "
            "code (src/models/*), not checked here"
        )
    return s


def ollama_setting(plan: Plan) -> Setting:
    s = _setting("ollama", plan)
    s.cannot.append(
        "a Modelfile sets no rope scaling or base: PARAMETER takes num_ctx and "
        "sampling options only (rope_frequency_base / _scale were removed in 2024); "
        "the GGUF's rope keys decide"
    )
    name = plan.scaling.name
    if name in DYNAMIC or name in ("longrope", "proportional"):
        s.cannot.append(f"{name} cannot be written into a GGUF llama.cpp reads, so not in Ollama")
        return s
    s.lines = ["FROM ./<the .gguf written by --export>", f"PARAMETER num_ctx {plan.length}"]
    return s


SETTINGS = {"transformers": transformers_setting, "vllm": partial(served_setting, "vllm"),
            "sglang": partial(served_setting, "sglang"), "llama.cpp": llamacpp_setting,
            "ollama": ollama_setting}  # fmt: skip


def engine_settings(plan: Plan) -> dict[str, Setting]:
    return {engine: SETTINGS[engine](plan) for engine in ENGINES}


def _quote(arg: str) -> str:
    return f"'{arg}'" if re.search(r"[^\w@%+=:,./-]", arg) else arg


def settings_text(label: str, info: ModelInfo) -> str:
    """What `posenc stretch settings` prints: every engine's settings for `label`."""
    plan = plan_for(label, info)
    where = f" on its {plan.target} layers" if plan.target else ""
    size = f"context {info.context}" + (f" -> {plan.length}" if plan.length > info.context else "")
    out = [f"Engine settings for {plan.label} on {info.name}{where}: {size} tokens"]
    own = info.own(plan.target)
    if plan.params is not None and own.get("rope_type", "default") != "default":
        out.append(
            f"  note: this replaces the model's own {own['rope_type']} scaling "
            f"({_json(own)}); what posenc measured is the replacement, not the two "
            "combined (a linear override over Llama 3.1's own: perplexity 13.8 -> "
            "11,316, unsloth PR 7028)"
        )
    if info.gguf_rope is not None:
        out.append(
            f"  note: this GGUF carries its own scaling, which llama.cpp applies "
            f"({_json(info.gguf_rope)}) and transformers' GGUF loader ignores: posenc measured "
            "the model without it, and the settings below replace it"
        )
    if plan.scaling.name in DYNAMIC:
        out.append(
            "  note: a dynamic scaling follows each call's length; engines that "
            "cannot follow it are marked 'cannot'"
        )
    for engine, s in engine_settings(plan).items():
        out.append(f"{engine} ({s.source}):")
        if s.config:
            out.append("  config.json: " + _json(s.config))
        if s.flags:
            out.append("  flags: " + " ".join(_quote(f) for f in s.flags))
        out += [f"  {line}" for line in s.lines]
        out += [f"  cannot: {c}" for c in s.cannot]
        out += [f"  note: {n}" for n in s.notes]
    return "\n".join(out)


def model_info(spec) -> ModelInfo:
    """The ModelInfo of a stretch.models.ModelSpec, from its config (no weights loaded)."""
    config = models.read_config(spec)
    if not spec.gguf:
        return ModelInfo.from_config(config, spec.name)
    reader = models.need("gguf").GGUFReader(os.path.join(spec.path, spec.gguf))
    arch = reader.fields["general.architecture"].contents()
    info = ModelInfo.from_config(config, spec.name, arch)
    try:
        own = gguf_config(reader)["rope_parameters"]
    except ValueError as err:
        own = {"rope_type": str(err)}
    if own.get("rope_type") == "default" or info.layer_types is not None:
        return info
    return dataclasses.replace(info, gguf_rope=own)


def check_new_folder(out: str) -> None:
    if os.path.exists(out) and (not os.path.isdir(out) or os.listdir(out)):
        raise ValueError(f"--export {out}: exists and is not an empty folder; give a new one")


def check_export(plan: Plan, spec, out: str) -> None:
    """ValueError naming --export unless `out` is new and the scaling can be written there."""
    check_new_folder(out)
    check_writable(out, "--export")
    name = plan.scaling.name
    if spec.gguf:
        if name not in GGUF_TYPES:
            raise ValueError(
                f"--export: {plan.label} cannot be written into a GGUF (llama.cpp "
                f"reads {', '.join(GGUF_TYPES)}), see the llama.cpp settings"
            )
        if name == "llama3" and plan.info.gguf_arch not in FREQS_ARCHS:
            raise ValueError(
                f"--export: llama.cpp's {plan.info.gguf_arch} reads no {ROPE_FREQS}; llama3 "
                f"is written for {', '.join(FREQS_ARCHS)}"
            )
        full_only = plan.info.gguf_arch in FULL_ONLY and plan.target == "full_attention"
        if plan.info.layer_types is not None and name != "none" and not full_only:
            raise ValueError(
                "--export: a GGUF with rope per layer type is not written here "
                "(which layers llama.cpp scales is per architecture)"
            )
    elif hf_rope_parameters(plan) is None:
        raise ValueError(f"--export: {plan.label} has no transformers rope_type; not exported")


def export(plan: Plan, spec, out: str) -> str:
    """Write the model with the plan's scaling as its default into the new folder `out` (via a
    temporary folder: a failure leaves nothing); returns the model's path."""
    check_export(plan, spec, out)
    parent = os.path.dirname(os.path.abspath(out))
    os.makedirs(parent, exist_ok=True)
    tmp = tempfile.mkdtemp(prefix=".posenc-export-", dir=parent)
    try:
        if spec.gguf:
            slug = re.sub(r"[^\w.=@-]+", "_", plan.label).strip("_")
            name = f"{spec.gguf.removesuffix('.gguf')}.{slug}.gguf"
            write_gguf(plan, os.path.join(spec.path, spec.gguf), os.path.join(tmp, name))
        else:
            name = None
            write_folder(plan, spec.path, tmp)
        if os.path.isdir(out):
            os.rmdir(out)  # empty, checked
        os.replace(tmp, out)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return os.path.join(out, name) if name else out


def write_folder(plan: Plan, src: str, dst: str) -> None:
    """A copy of the folder `src` in `dst`, config.json saying the scaling in the source's form
    (v5, or 4.x where it can), tokenizer_config.json's model_max_length raised to the length."""
    shutil.copytree(src, dst, dirs_exist_ok=True)
    with open(os.path.join(src, "config.json")) as f:
        cfg = json.load(f)
    text = cfg.get("text_config") if "max_position_embeddings" not in cfg else None
    body = text if isinstance(text, dict) else cfg
    legacy = legacy_config(plan)
    if "rope_parameters" not in body and legacy is not None:
        body.update(legacy)
        if legacy.get("rope_local_base_freq") is None:
            body.pop("rope_local_base_freq", None)
    else:
        body.pop("rope_scaling", None)
        body["rope_parameters"] = hf_rope_parameters(plan)
    body["max_position_embeddings"] = plan.length
    with open(os.path.join(dst, "config.json"), "w") as f:
        json.dump(cfg, f, indent=2)
    tok = os.path.join(dst, "tokenizer_config.json")
    if os.path.isfile(tok):
        with open(tok) as f:
            tcfg = json.load(f)
        limit = tcfg.get("model_max_length")
        if isinstance(limit, int | float) and limit < plan.length:
            tcfg["model_max_length"] = plan.length
            with open(tok, "w") as f:
                json.dump(tcfg, f, indent=2)


def gguf_keys(plan: Plan, arch: str) -> dict:
    """{key: (value, GGUFValueType)} of the rope keys llama.cpp reads (src/llama-arch.cpp)."""
    vt = models.need("gguf").GGUFValueType
    name, p = plan.scaling.name, plan.params or {}
    if name == "none":
        return {}
    keys = {f"{arch}.context_length": (plan.length, vt.UINT32)}
    if name in ("linear", "yarn"):
        keys[f"{arch}.rope.scaling.type"] = (name, vt.STRING)
        keys[f"{arch}.rope.scaling.factor"] = (plan.factor, vt.FLOAT32)
    else:
        keys[f"{arch}.rope.scaling.type"] = ("none", vt.STRING)
    if name == "yarn":
        orig = p["original_max_position_embeddings"]
        keys[f"{arch}.rope.scaling.original_context_length"] = (orig, vt.UINT32)
        for key in ("beta_fast", "beta_slow"):  # read by llama.cpp for some architectures only
            if p.get(key) is not None:
                keys[f"{arch}.rope.scaling.yarn_{key}"] = (float(p[key]), vt.FLOAT32)
    if name == "ntk":
        keys[f"{arch}.rope.freq_base"] = (ntk_theta(plan), vt.FLOAT32)
    return keys


def llama3_freq_factors(plan: Plan):
    """Llama 3.1's scaling as llama.cpp's per-pair divisors f_i = unscaled / scaled [R / 2]."""
    r, base = plan.info.rotary_dim, plan.params["rope_theta"]
    return (default(r, base, {})[0] / llama3(r, base, plan.params)[0]).numpy()


def write_gguf(plan: Plan, src: str, dst: str) -> None:
    """A copy of the GGUF `src` at `dst` with gguf_keys' rope keys (and rope_freqs.weight for
    llama3)."""
    import numpy as np

    gguf = models.need("gguf")
    reader = gguf.GGUFReader(src)
    arch = reader.fields["general.architecture"].contents()
    new = gguf_keys(plan, arch)
    scaled = plan.scaling.name != "none"
    stale = re.compile(rf"^{re.escape(arch)}\.rope\.(scaling\.|scale_linear$)")
    writer = gguf.GGUFWriter(dst, arch=arch, endianess=reader.endianess)
    writer.data_alignment = reader.alignment
    for fld in reader.fields.values():
        key = fld.name
        if key.startswith("GGUF.") or key == "general.architecture":
            continue
        if key in new or (scaled and stale.match(key)):
            continue
        main = fld.types[0]
        sub = fld.types[-1] if main == gguf.GGUFValueType.ARRAY else None
        writer.add_key_value(key, fld.contents(), main, sub_type=sub)
    for key, (value, vtype) in new.items():
        writer.add_key_value(key, value, vtype)
    for t in reader.tensors:
        if t.name == ROPE_FREQS and scaled:
            continue
        writer.add_tensor(t.name, t.data, raw_dtype=t.tensor_type)
    if plan.scaling.name == "llama3":
        writer.add_tensor(ROPE_FREQS, np.asarray(llama3_freq_factors(plan), dtype=np.float32))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()


def gguf_config(path) -> dict:
    """A GGUF's rope as llama.cpp reads it (src/llama-model.cpp defaults), as config.json keys
    {max_position_embeddings, rope_parameters}; rope_freqs.weight becomes longrope with short =
    long factors. `path` may be an open gguf.GGUFReader."""
    gguf = models.need("gguf")
    reader = gguf.GGUFReader(path) if isinstance(path, str | os.PathLike) else path
    arch = reader.fields["general.architecture"].contents()

    def key(name, default=None):
        fld = reader.fields.get(f"{arch}.{name}")
        return default if fld is None else fld.contents()

    context = int(key("context_length"))
    base = float(key("rope.freq_base", 10000.0))
    kind = key("rope.scaling.type", "linear")
    factor = float(key("rope.scaling.factor", key("rope.scale_linear", 0.0)))
    orig = int(key("rope.scaling.original_context_length", context))
    freqs = [t for t in reader.tensors if t.name == ROPE_FREQS]
    scaled = kind in ("linear", "yarn") and factor not in (0.0, 1.0)
    params: dict = {"rope_type": "default", "rope_theta": base}
    if kind not in ("none", "linear", "yarn"):
        raise ValueError(f"{path}: rope.scaling.type {kind!r} is not read here")
    if freqs and scaled:
        raise ValueError(f"{path}: {ROPE_FREQS} together with a {kind} scaling is not read here")
    if freqs:
        ff = [float(x) for x in freqs[0].data.reshape(-1)]
        params = {"rope_type": "longrope", "rope_theta": base, "short_factor": ff,
                  "long_factor": ff, "attention_factor": 1.0, "factor": 1.0,
                  "original_max_position_embeddings": context}  # fmt: skip
    elif scaled and kind == "linear":
        params = {"rope_type": "linear", "rope_theta": base, "factor": factor}
    elif scaled:
        params = {"rope_type": "yarn", "rope_theta": base, "factor": factor,
                  "original_max_position_embeddings": orig}  # fmt: skip
        for name in ("beta_fast", "beta_slow"):
            value = key(f"rope.scaling.yarn_{name}")
            if value is not None:
                params[name] = float(value)
    return {"max_position_embeddings": context, "rope_parameters": params}
