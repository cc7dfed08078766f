"""posenc.stretch.engines: each engine's settings give the rope posenc measured, an exported
model loads with it by default (transformers: logits; GGUF: llama.cpp's keys read back), bad
input is one line and exit 2 with nothing written."""

import json
import math
import os
import shutil

import numpy as np
import pytest
import torch

from posenc.cli import main
from posenc.hf.config import with_scaling
from posenc.hf.patch import rope_of
from posenc.stretch import engines
from posenc.stretch.engines import ModelInfo, plan_for

transformers = pytest.importorskip("transformers")
gguf = pytest.importorskip("gguf")

LABELS = ["linear(factor=2)", "yarn(factor=4)", "yarn(factor=2.5,beta_fast=16,beta_slow=2)",
          "ntk(factor=2)", "llama3(factor=4)", "longrope(factor=2)", "dynamic(factor=2)",
          "none"]  # fmt: skip
CONTEXT = 128
POS = torch.arange(0, 4 * CONTEXT + 7)[None]  # [1, T]: inside and past the context


def llama_info(theta=10000.0, context=CONTEXT, head_dim=16, arch=None):
    return ModelInfo.from_config(
        {"model_type": "llama", "max_position_embeddings": context, "hidden_size": 4 * head_dim,
         "num_attention_heads": 4, "rope_theta": theta}, "tiny", arch)  # fmt: skip


def measured(plan, pos=POS):
    """What posenc measured for the plan: the model's config with Scaling.params, read by
    posenc.hf as patch(scaling=...) reads it -> (inv_freq [R/2], attention factor)."""
    info = plan.info
    cfg = engines._cfg(info)
    if plan.params is not None:
        scaling = {**info.rope_parameters, plan.target: plan.params} if plan.target else plan.params
        cfg = with_scaling(cfg, scaling, info.layer_types)
    return rope_of(cfg, plan.target).frequencies(pos)


def read(cfg: dict, layer_type=None, pos=POS):
    """The rope posenc.hf reads from a config dict as its model class would."""
    return rope_of(cfg, layer_type).frequencies(pos)


def same(a, b, rtol=2e-6):
    (fa, sa), (fb, sb) = a, b
    assert fa.shape == fb.shape
    torch.testing.assert_close(fa.double(), fb.double(), rtol=rtol, atol=0)
    assert math.isclose(sa, sb, rel_tol=1e-6)


# ------------------------------------------------------------------------- the settings


@pytest.mark.parametrize("label", LABELS)
def test_transformers_config_read_by_transformers_gives_the_measured_rope(label):
    """The printed config.json (rope_parameters, max_position_embeddings) in transformers' own
    rotary module gives the cos / sin of the rope posenc measured."""
    from transformers.models.llama.modeling_llama import LlamaRotaryEmbedding

    plan = plan_for(label, llama_info())
    setting = engines.transformers_setting(plan)
    config = transformers.LlamaConfig(hidden_size=64, num_attention_heads=4, **setting.config)
    cos, sin = LlamaRotaryEmbedding(config)(torch.zeros(1, POS.shape[1], 64), POS)
    inv_freq, factor = measured(plan)
    angles = POS[0, :, None].double() * inv_freq.double()  # [T, R/2]
    c, s = angles.cos() * factor, angles.sin() * factor
    torch.testing.assert_close(cos[0].double(), torch.cat((c, c), -1), atol=1e-4, rtol=0)
    torch.testing.assert_close(sin[0].double(), torch.cat((s, s), -1), atol=1e-4, rtol=0)
    if plan.scaling.name in engines.DYNAMIC or label == "none":
        assert config.max_position_embeddings == CONTEXT  # dynamic reads it as the original
    else:
        assert config.max_position_embeddings == round(CONTEXT * plan.factor)


@pytest.mark.parametrize("label", [lb for lb in LABELS if not lb.startswith("dynamic")])
@pytest.mark.parametrize("engine", ["vllm", "sglang"])
def test_engine_override_through_config_update_gives_the_measured_rope(label, engine):
    """vLLM's --hf-overrides and SGLang's --json-model-override-args are applied with
    transformers' config.update: the result holds the measured rope (rope_theta kept, though
    transformers 5 maps rope_scaling onto rope_parameters), and the engine's length rule
    derives at least the target length from it."""
    info = llama_info(theta=5e5)
    plan = plan_for(label, info)
    flags = engines.SETTINGS[engine](plan).flags
    length = int(flags[-1])
    assert length == plan.length and flags[-2] in ("--max-model-len", "--context-length")
    config = transformers.LlamaConfig(hidden_size=64, num_attention_heads=4,
                                      max_position_embeddings=CONTEXT, rope_theta=5e5)  # fmt: skip
    if label != "none":
        config.update(json.loads(flags[1]))
    cfg = config.to_dict()
    same(read(cfg), measured(plan))
    max_pos = cfg["max_position_embeddings"]
    rules = {"vllm": lambda: engines.vllm_length("llama", max_pos, cfg["rope_parameters"]),
             "sglang": lambda: engines.sglang_length(max_pos, config.rope_scaling)}  # fmt: skip
    assert rules[engine]() >= plan.length


def test_yarn_on_sglang_raises_max_position_embeddings_and_linear_does_not():
    """SGLang ignores the factor where original_max_position_embeddings is set (sglang#2943):
    yarn's override raises max_position_embeddings to the target; linear's needs not."""
    info = llama_info()
    yarn = json.loads(engines.SETTINGS["sglang"](plan_for("yarn(factor=4)", info)).flags[1])
    linear = json.loads(engines.SETTINGS["sglang"](plan_for("linear(factor=4)", info)).flags[1])
    assert yarn["max_position_embeddings"] == 4 * CONTEXT
    assert "max_position_embeddings" not in linear
    assert engines.sglang_length(CONTEXT, linear["rope_scaling"]) == 4 * CONTEXT


def llamacpp_rope(flags: list[str], n_rot: int, base: float, n_ctx_train: int,
                  freq_factors=None, kv: dict | None = None):  # fmt: skip
    """llama.cpp's rope from its command line (common/arg.cpp) or GGUF keys (kv, as
    llama-model.cpp reads them), as ggml's rope_yarn computes it: theta_extrap = p base^(-2i/R)
    / freq_factor, theta_interp = freq_scale theta_extrap, mixed by the YaRN ramp when
    ext_factor != 0, magnitude 1 + 0.1 ln(1 / freq_scale). -> (inv_freq [R/2], mscale)."""
    kv = dict(kv or {})
    opt = dict(zip(flags[::2], flags[1::2]))
    kind = opt.get("--rope-scaling", kv.get("rope.scaling.type", "linear"))
    factor = kv.get("rope.scaling.factor", 0.0)
    freq_scale = 1.0 / float(opt["--rope-scale"]) if "--rope-scale" in opt else (
        1.0 / factor if factor else 1.0)  # fmt: skip
    if kind == "none":
        freq_scale = 1.0
    base = float(opt.get("--rope-freq-base", kv.get("rope.freq_base", base)))
    orig = int(opt.get("--yarn-orig-ctx", kv.get("rope.scaling.original_context_length",
                                                 n_ctx_train)))  # fmt: skip
    beta_fast = float(opt.get("--yarn-beta-fast", kv.get("rope.scaling.yarn_beta_fast", 32)))
    beta_slow = float(opt.get("--yarn-beta-slow", kv.get("rope.scaling.yarn_beta_slow", 1)))
    ext = 1.0 if kind == "yarn" else 0.0
    i = np.arange(n_rot // 2, dtype=np.float64)
    extrap = base ** (-2 * i / n_rot)
    if freq_factors is not None:
        extrap = extrap / np.asarray(freq_factors, dtype=np.float64)
    interp = freq_scale * extrap
    inv, mscale = interp, 1.0
    if ext != 0:

        def corr(rot):
            return n_rot * math.log(orig / (rot * 2 * math.pi)) / (2 * math.log(base))

        low = max(0, math.floor(corr(beta_fast)))
        high = min(n_rot - 1, math.ceil(corr(beta_slow)))
        y = (i - low) / max(0.001, high - low)
        mix = (1 - np.clip(y, 0, 1)) * ext
        inv = interp * (1 - mix) + extrap * mix
        mscale = 1.0 + 0.1 * math.log(1.0 / freq_scale)
    return torch.from_numpy(inv), mscale


@pytest.mark.parametrize("label", ["none", "linear(factor=2)", "yarn(factor=4)", "ntk(factor=2)",
                                   "yarn(factor=3,beta_fast=16,beta_slow=2)"])  # fmt: skip
def test_llamacpp_flags_give_the_measured_rope(label):
    """llama.cpp's flags, read as common/arg.cpp reads them (--rope-scale N: freq_scale 1/N),
    through ggml's YaRN rope, give posenc's frequencies and attention factor."""
    info = llama_info(theta=1e5)
    plan = plan_for(label, info)
    flags = engines.llamacpp_setting(plan).flags
    assert flags[flags.index("-c") + 1] == str(plan.length)
    inv, mscale = llamacpp_rope(flags, 16, 1e5, CONTEXT)
    same((inv, mscale), measured(plan), rtol=2e-6)


@pytest.mark.parametrize("label", ["dynamic(factor=2)", "dynamic_yarn", "longrope(factor=2)"])
def test_what_llamacpp_and_ollama_cannot_express_carries_no_flags(label):
    plan = plan_for(label, llama_info())
    for engine in ("llama.cpp", "ollama"):
        s = engines.SETTINGS[engine](plan)
        assert s.cannot and not s.flags and not s.lines
    text = engines.settings_text(label, llama_info())
    assert "cannot: llama.cpp" in text or "llama.cpp has no dynamic" in text


def test_gemma3_like_per_layer_rope_scales_the_full_attention_layers_only():
    """A flat label on a model with rope per layer type sets its full_attention layers (as
    transformers applies a flat rope_scaling); the override keeps the sliding layers' rope,
    and vLLM (no factor for Gemma 3) gets max_position_embeddings raised."""
    cfg = {"model_type": "gemma3_text", "max_position_embeddings": 256, "hidden_size": 64,
           "num_attention_heads": 4, "head_dim": 16, "num_hidden_layers": 2,
           "layer_types": ["sliding_attention",
           "full_attention"], "rope_parameters": {
               "sliding_attention": {"rope_type": "default", "rope_theta": 10000.0},
               "full_attention": {"rope_type": "default", "rope_theta": 1e6}}}  # fmt: skip
    info = ModelInfo.from_config(cfg, "gemma-like")
    plan = plan_for("yarn(factor=4)", info)
    assert plan.target == "full_attention" and plan.length == 1024
    assert plan_for("yarn@full_attention(factor=4)", info).params == plan.params
    vllm = json.loads(engines.SETTINGS["vllm"](plan).flags[1])
    assert vllm["max_position_embeddings"] == 1024
    config = transformers.Gemma3TextConfig(**{k: v for k, v in cfg.items() if k != "model_type"})
    config.update(vllm)
    new = config.to_dict()
    same(read(new, "full_attention"), measured(plan))
    same(read(new, "sliding_attention"), read(engines._cfg(info), "sliding_attention"))
    sliding = plan_for("linear@sliding_attention(factor=2)", info)
    assert engines.legacy_config(sliding) is None  # 4.x: one rope_scaling for the global layers
    assert "full_attention" in engines.settings_text("yarn(factor=4)", info)


def test_a_model_with_its_own_scaling_is_told_it_is_replaced():
    info = ModelInfo.from_config(
        {"model_type": "llama", "max_position_embeddings": 8192, "hidden_size": 64,
         "num_attention_heads": 4, "rope_parameters": {"rope_type": "llama3", "factor": 8.0,
         "low_freq_factor": 1.0, "high_freq_factor": 4.0, "rope_theta": 5e5,
         "original_max_position_embeddings": 8192}}, "llama31-like")  # fmt: skip
    text = engines.settings_text("linear(factor=2)", info)
    assert "replaces the model's own llama3 scaling" in text and "unsloth PR 7028" in text
    plan = plan_for("linear(factor=2)", info)
    assert engines.hf_params(plan)["rope_theta"] == 5e5  # the model's theta kept


# ------------------------------------------------------------------------- --export


def model_logits(path, ids, scaling=None):
    from posenc.hf import patch

    model = transformers.AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32).eval()
    if scaling is not None:
        patch(model, scaling=scaling)
    with torch.no_grad():
        return model(ids).logits


EXPORTED = ["yarn(factor=4)", "linear(factor=2)", "llama3(factor=4)", "ntk(factor=2)",
            "dynamic(factor=2)", "longrope(factor=2)"]  # fmt: skip


@pytest.mark.parametrize("label", EXPORTED)
def test_exported_folder_loads_with_the_scaling_posenc_measured(tmp_path, tiny_lm_folder, label):
    """transformers loading the exported folder gives the logits of the original model patched
    with the scaling (posenc.hf.patch), within 1e-4, past the context too."""
    from posenc.stretch import models

    spec = models.resolve(tiny_lm_folder)
    info = engines.model_info(spec)
    plan = plan_for(label, info)
    out = engines.export(plan, spec, str(tmp_path / "out"))
    cfg = json.loads((tmp_path / "out" / "config.json").read_text())
    assert cfg["max_position_embeddings"] == plan.length
    ids = torch.randint(0, 500, (1, 3 * CONTEXT), generator=torch.Generator().manual_seed(0))
    got = model_logits(out, ids)
    want = model_logits(tiny_lm_folder, ids, scaling=plan.params)
    assert (got - want).abs().max().item() <= 1e-4
    assert not any(p.name.startswith(".posenc-export") for p in tmp_path.iterdir())


def test_export_keeps_a_4x_style_config_in_its_own_form(tmp_path, tiny_lm_folder):
    """A config.json with rope_scaling + rope_theta (transformers 4.x) is rewritten in that
    form, and transformers 5 loads it with the same logits as the patched model; a tokenizer
    model_max_length below the new length is raised to it."""
    from posenc.stretch import models

    legacy = tmp_path / "legacy"
    shutil.copytree(tiny_lm_folder, legacy)
    cfg = json.loads((legacy / "config.json").read_text())
    theta = cfg.pop("rope_parameters")["rope_theta"]
    (legacy / "config.json").write_text(json.dumps({**cfg, "rope_theta": theta}))
    tok = json.loads((legacy / "tokenizer_config.json").read_text())
    (legacy / "tokenizer_config.json").write_text(json.dumps({**tok, "model_max_length": 128}))
    spec = models.resolve(str(legacy))
    plan = plan_for("yarn(factor=2)", engines.model_info(spec))
    out = engines.export(plan, spec, str(tmp_path / "out"))
    new = json.loads((tmp_path / "out" / "config.json").read_text())
    assert "rope_parameters" not in new and new["rope_theta"] == theta
    assert new["rope_scaling"] == {"rope_type": "yarn", "factor": 2.0,
                                   "original_max_position_embeddings": CONTEXT}  # fmt: skip
    tok = json.loads((tmp_path / "out" / "tokenizer_config.json").read_text())
    assert tok["model_max_length"] == 2 * CONTEXT  # vLLM caps at it: raised with the length
    ids = torch.randint(0, 500, (1, 2 * CONTEXT), generator=torch.Generator().manual_seed(1))
    got = model_logits(out, ids)
    assert (got - model_logits(str(legacy), ids, scaling=plan.params)).abs().max() <= 1e-4


def tiny_gguf(path, *, extra=None, rope_freqs=False, alignment=None):
    """A small llama GGUF: F32, F16 and Q8_0 tensors, context 128, rope dim 16, base 1e4."""
    from gguf.quants import quantize

    rng = np.random.default_rng(0)
    w = gguf.GGUFWriter(str(path), arch="llama")
    if alignment:
        w.add_custom_alignment(alignment)
    w.add_context_length(CONTEXT)
    w.add_embedding_length(64)
    w.add_block_count(1)
    w.add_head_count(4)
    w.add_head_count_kv(2)
    w.add_rope_dimension_count(16)
    w.add_rope_freq_base(10000.0)
    w.add_layer_norm_rms_eps(1e-5)
    w.add_array("tokenizer.ggml.tokens", ["a", "b", "c"])
    for key, (value, vtype) in (extra or {}).items():
        w.add_key_value(key, value, vtype)
    w.add_tensor("token_embd.weight", rng.standard_normal((3, 64), dtype=np.float32))
    w.add_tensor("blk.0.attn_q.weight", rng.standard_normal((64, 64)).astype(np.float16))
    q = quantize(rng.standard_normal((64, 64), dtype=np.float32), gguf.GGMLQuantizationType.Q8_0)
    w.add_tensor("blk.0.attn_k.weight", q, raw_dtype=gguf.GGMLQuantizationType.Q8_0)
    if rope_freqs:
        w.add_tensor(engines.ROPE_FREQS, np.full(8, 2.0, dtype=np.float32))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return str(path)


def gguf_kv(path) -> dict:
    reader = gguf.GGUFReader(path)
    return {k: f.contents() for k, f in reader.fields.items() if not k.startswith("GGUF.")}


def tensors(path) -> dict:
    return {t.name: (t.tensor_type, tuple(t.shape), t.data.tobytes())
            for t in gguf.GGUFReader(path).tensors}  # fmt: skip


@pytest.mark.parametrize("label", ["linear(factor=2)", "yarn(factor=4)", "ntk(factor=2)",
                                   "llama3(factor=4)", "yarn(factor=2,beta_fast=16,beta_slow=2)",
                                   "none"])  # fmt: skip
def test_exported_gguf_holds_llamacpp_keys_that_read_back_as_the_measured_rope(tmp_path, label):
    """The exported GGUF has llama.cpp's key names (src/llama-arch.cpp) with the scaling, the
    other keys and every tensor byte for byte; its keys read back by posenc (gguf_config) and
    by llama.cpp's rope (the reference above) give the rope posenc measured."""
    from posenc.stretch.models import ModelSpec

    src = tiny_gguf(tmp_path / "m.gguf")
    spec = ModelSpec("m", str(tmp_path), "m.gguf")
    plan = plan_for(label, llama_info(arch="llama"))
    out = engines.export(plan, spec, str(tmp_path / "out"))
    kv, before = gguf_kv(out), gguf_kv(src)
    name = plan.scaling.name
    assert kv["llama.context_length"] == plan.length
    want_type = {"linear": "linear", "yarn": "yarn"}.get(name, "none")
    if name != "none":
        assert kv["llama.rope.scaling.type"] == want_type
    if name in ("linear", "yarn"):
        assert kv["llama.rope.scaling.factor"] == pytest.approx(plan.factor)
    if name == "yarn":
        assert kv["llama.rope.scaling.original_context_length"] == CONTEXT
    rope = {k for k in kv if ".rope." in k or k.endswith("context_length")}
    assert {k for k in before if k not in rope} == {k for k in kv if k not in rope}
    for k in before:
        if k not in rope:
            assert kv[k] == before[k]
    old, new = tensors(src), tensors(out)
    assert {k: v for k, v in new.items() if k != engines.ROPE_FREQS} == old
    assert (engines.ROPE_FREQS in new) == (name == "llama3")
    # posenc's reading of the keys
    cfg = {"model_type": "llama", "head_dim": 16, **engines.gguf_config(out)}
    same(read(cfg), measured(plan))
    # llama.cpp's reading of the same keys
    short = {k.removeprefix("llama."): v for k, v in kv.items() if k.startswith("llama.")}
    factors = None
    if name == "llama3":
        factors = np.frombuffer(new[engines.ROPE_FREQS][2], dtype=np.float32)
    inv, mscale = llamacpp_rope([], 16, 10000.0, kv["llama.context_length"], factors, short)
    same((inv, mscale), measured(plan), rtol=2e-6)


def test_export_replaces_the_source_gguf_scaling_and_its_freq_tensor(tmp_path):
    """A source GGUF with its own yarn x8 keys and rope_freqs tensor: a linear export leaves
    neither (the scaling is replaced, not stacked); its data alignment (64) is kept."""
    from posenc.stretch.models import ModelSpec

    vt = gguf.GGUFValueType
    tiny_gguf(tmp_path / "m.gguf", rope_freqs=True, alignment=64, extra={
        "llama.rope.scaling.type": ("yarn", vt.STRING),
        "llama.rope.scaling.factor": (8.0, vt.FLOAT32),
        "llama.rope.scaling.yarn_beta_fast": (64.0, vt.FLOAT32)})  # fmt: skip
    spec = ModelSpec("m", str(tmp_path), "m.gguf")
    out = engines.export(plan_for("linear(factor=2)", llama_info()), spec, str(tmp_path / "o"))
    kv = gguf_kv(out)
    assert kv["llama.rope.scaling.type"] == "linear" and kv["llama.rope.scaling.factor"] == 2.0
    assert "llama.rope.scaling.yarn_beta_fast" not in kv
    assert engines.ROPE_FREQS not in tensors(out)
    assert gguf.GGUFReader(out).alignment == 64 and kv["general.alignment"] == 64
    old = tensors(str(tmp_path / "m.gguf"))
    assert tensors(out) == {k: v for k, v in old.items() if k != engines.ROPE_FREQS}
    with pytest.raises(ValueError, match="rope_freqs.weight together with a yarn"):
        engines.gguf_config(str(tmp_path / "m.gguf"))


@pytest.mark.slow
def test_export_of_the_embedded_smollm2_gguf(tmp_path, capsys):
    """The embedded SmolLM2 GGUF exported with yarn x2 from the command line: llama.cpp's keys,
    every tensor byte for byte, transformers' GGUF loader reading the new context."""
    from posenc.stretch.models import embedded_gguf

    try:
        src = embedded_gguf()
    except ValueError as err:
        pytest.skip(str(err))
    assert main(["stretch", "settings", "yarn(factor=2)", "--export", str(tmp_path / "x")]) == 0
    out = capsys.readouterr().out
    assert "--rope-scaling yarn --rope-scale 2 --yarn-orig-ctx 8192 -c 16384" in out
    (path,) = [str(p) for p in (tmp_path / "x").iterdir()]
    kv = gguf_kv(path)
    assert kv["llama.rope.scaling.type"] == "yarn" and kv["llama.context_length"] == 16384
    assert kv["llama.rope.scaling.original_context_length"] == 8192
    assert tensors(path) == tensors(src)
    assert engines.gguf_config(path)["rope_parameters"] == {
        "rope_type": "yarn", "rope_theta": 100000.0, "factor": 2.0,
        "original_max_position_embeddings": 8192}  # fmt: skip
    config = transformers.AutoConfig.from_pretrained(str(tmp_path / "x"),
                                                     gguf_file=os.path.basename(path))  # fmt: skip
    assert config.max_position_embeddings == 16384


# ------------------------------------------------------------------------- bad input


def test_settings_prints_every_engine(tmp_path, tiny_lm_folder, capsys):
    assert main(["stretch", "settings", "yarn(factor=2)", "--model", tiny_lm_folder]) == 0
    out = capsys.readouterr().out
    for engine in engines.ENGINES:
        assert f"\n{engine} (" in out
    assert "--max-model-len 256" in out and "PARAMETER num_ctx 256" in out


BAD = [
    (["yarn"], "LABEL", "give the factor"),
    (["yran(factor=2)"], "LABEL", "unknown scaling"),
    (["yarn(factor=0.5)"], "LABEL", "factor must be"),
    (["yarn@sliding_attention(factor=2)"], "LABEL", "unknown layer type"),
    (["yarn@(factor=2)"], "LABEL", "name a layer type"),
    (["dynamic_yarn", "--export", "{out}"], "--export", "no transformers rope_type"),
    (["yarn(factor=2)", "--export", "{file}"], "--export", "not an empty folder"),
    (["yarn(factor=2)", "--export", "{full}"], "--export", "not an empty folder"),
    (["yarn(factor=2)", "--export", ""], "--export", "empty value"),
    (["yarn(factor=2)", "--model", "{missing}"], "--model", "no such file"),
    ([], "LABEL", "required"),
]


@pytest.mark.parametrize("argv,flag,words", BAD)
def test_bad_input_is_one_line_naming_the_flag_exit_2_nothing_written(
    tmp_path, tiny_lm_folder, capsys, argv, flag, words
):
    (tmp_path / "file").write_text("x")
    (tmp_path / "full").mkdir()
    (tmp_path / "full" / "a").write_text("x")
    before = sorted(os.listdir(tmp_path))
    paths = {"out": str(tmp_path / "out"), "file": str(tmp_path / "file"),
             "full": str(tmp_path / "full"), "missing": str(tmp_path / "missing")}  # fmt: skip
    argv = [a.format(**paths) for a in argv]
    if "--model" not in argv:
        argv += ["--model", tiny_lm_folder]
    try:
        code = main(["stretch", "settings", *argv])
    except SystemExit as exit:  # argparse's own errors: one line, status 2
        code = exit.code
    assert code == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and flag in err and words in err, err
    assert sorted(os.listdir(tmp_path)) == before


def test_a_gguf_export_of_what_llamacpp_cannot_read_is_refused(tmp_path, capsys):
    tiny_gguf(tmp_path / "m.gguf")
    before = sorted(os.listdir(tmp_path))
    from posenc.stretch.models import ModelSpec

    spec = ModelSpec("m", str(tmp_path), "m.gguf")
    for label in ("dynamic(factor=2)", "longrope(factor=2)"):
        with pytest.raises(ValueError, match="^--export: .* cannot be written into a GGUF"):
            engines.check_export(plan_for(label, llama_info()), spec, str(tmp_path / "out"))
    assert sorted(os.listdir(tmp_path)) == before


def test_settings_and_export_of_a_gguf_with_its_own_scaling(tmp_path, capsys):
    """A GGUF whose keys carry yarn x8 (which transformers' GGUF loader ignores): the output says
    so, --export replaces it; a dynamic export of it is refused with nothing written."""
    vt = gguf.GGUFValueType
    src = tiny_gguf(tmp_path / "m.gguf", extra={
        "llama.rope.scaling.type": ("yarn", vt.STRING),
        "llama.rope.scaling.factor": (8.0, vt.FLOAT32)})  # fmt: skip
    argv = ["stretch", "settings", "linear(factor=2)", "--model", src]
    assert main([*argv, "--export", str(tmp_path / "out")]) == 0
    out = capsys.readouterr().out
    assert "this GGUF carries its own scaling" in out and '"factor":8.0' in out
    (path,) = (tmp_path / "out").iterdir()
    assert path.name == "m.linear_factor=2.gguf"
    kv = gguf_kv(str(path))
    assert (kv["llama.rope.scaling.type"], kv["llama.rope.scaling.factor"]) == ("linear", 2.0)
    assert main(["stretch", "settings", "dynamic(factor=2)", "--model", src,
                 "--export", str(tmp_path / "out2")]) == 2  # fmt: skip
    err = capsys.readouterr().err.strip()
    assert err.startswith("posenc stretch settings: error: --export") and "\n" not in err
    assert not (tmp_path / "out2").exists()


def test_gguf_export_rules_per_architecture(tmp_path):
    """llama.cpp's gemma3 scales its global layers only, as transformers does for a flat
    label: a Gemma 3 GGUF export of the full_attention layers is allowed, of the sliding ones
    or for another per-layer architecture refused; llama3 needs an architecture that loads
    rope_freqs.weight."""
    from posenc.stretch.models import ModelSpec

    cfg = {"model_type": "gemma3_text", "max_position_embeddings": 256, "hidden_size": 64,
           "num_attention_heads": 4, "head_dim": 16, "rope_parameters": {
               "sliding_attention": {"rope_type": "default", "rope_theta": 10000.0},
               "full_attention": {"rope_type": "default", "rope_theta": 1e6}}}  # fmt: skip
    spec, out = ModelSpec("g", str(tmp_path), "g.gguf"), str(tmp_path / "out")
    gemma3 = ModelInfo.from_config(cfg, "g", "gemma3")
    engines.check_export(plan_for("yarn(factor=2)", gemma3), spec, out)
    for label, info in (("yarn@sliding_attention(factor=2)", gemma3),
                        ("yarn(factor=2)", ModelInfo.from_config(cfg, "c", "cohere2")),
                        ("llama3(factor=2)", gemma3)):  # fmt: skip
        with pytest.raises(ValueError, match="^--export: "):
            engines.check_export(plan_for(label, info), spec, out)
    text = engines.settings_text("yarn(factor=2)", gemma3)
    assert "llama.cpp's gemma3 scales its global layers only" in text
    assert not os.path.exists(out)
