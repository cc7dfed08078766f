"""posenc golden / conform (issue 26, point 5): the float64 reference against an independent
float64 computation and against transformers' rotary module computed in double, for every rope
type transformers has and both layouts; conform passes transformers' float32 caches and rotated
q / k, and fails the silent bugs engines shipped (sin padded with 1, a cache cast to bf16, a
dynamic NTK cache of the wrong length, the wrong layout); the budget rule against float32
computations (hypothesis); the CLI end to end."""

import math
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from posenc.cli import main
from posenc.hf import golden as G

transformers = pytest.importorskip("transformers")
from transformers import LlamaConfig  # noqa: E402
from transformers.models.llama import modeling_llama  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
L0 = 64  # original context of the scaled configs
HEAD = 16  # head dim: R/2 = 8 pairs
SMALL = dict(hidden_size=64, num_attention_heads=4, num_key_value_heads=2, num_hidden_layers=1,
             intermediate_size=64, vocab_size=32, max_position_embeddings=L0)  # fmt: skip
SHORT = [1.0, 1.0, 1.1, 1.3, 1.6, 2.0, 2.5, 3.0]
LONG = [1.1, 1.4, 2.0, 3.5, 6.0, 9.0, 12.0, 16.0]
ROPES = {
    "default": {"rope_type": "default", "rope_theta": 500000.0},
    "linear": {"rope_type": "linear", "rope_theta": 10000.0, "factor": 4.0},
    "dynamic": {"rope_type": "dynamic", "rope_theta": 10000.0, "factor": 4.0},
    "yarn": {"rope_type": "yarn", "rope_theta": 10000.0, "factor": 8.0,
             "original_max_position_embeddings": L0},
    "llama3": {"rope_type": "llama3", "rope_theta": 500000.0, "factor": 8.0,
               "low_freq_factor": 1.0, "high_freq_factor": 4.0,
               "original_max_position_embeddings": L0},
    "longrope": {"rope_type": "longrope", "rope_theta": 10000.0, "short_factor": SHORT,
                 "long_factor": LONG, "original_max_position_embeddings": L0},
}  # fmt: skip
MAX_LEN = {"longrope": 4 * L0, "yarn": 8 * L0, "llama3": 8 * L0}  # max_position_embeddings


def config(rope: str, layout: str = "half") -> dict:
    cfg = {"model_type": "llama", **SMALL, "rope_parameters": dict(ROPES[rope])}
    cfg["max_position_embeddings"] = MAX_LEN.get(rope, L0)
    if layout == "interleaved":
        cfg["rope_interleave"] = True
    return cfg


POSITIONS = torch.cat([torch.arange(0, 3 * L0), torch.tensor([1000, 4095, 131071])])


# ------------------------------------------------------------------------- independent math


def inv_freq_float64(rope: str, seq_len: int) -> tuple[torch.Tensor, float]:
    """The rope types' inverse frequencies from their formulas, all in float64 (the papers'
    and transformers' definitions: written here, not taken from posenc)."""
    p, r = ROPES[rope], HEAD
    theta, x = p["rope_theta"], torch.arange(0, r, 2, dtype=torch.float64) / r
    w = theta**-x
    if rope == "linear":
        return w / p["factor"], 1.0
    if rope == "dynamic":
        length = max(seq_len, L0)
        base = theta * (p["factor"] * length / L0 - (p["factor"] - 1)) ** (r / (r - 2))
        return base**-x, 1.0
    if rope == "yarn":
        f = p["factor"]

        def dim_of(turns):  # the pair turning `turns` times over L0
            return r * math.log(L0 / (turns * 2 * math.pi)) / (2 * math.log(theta))

        low, high = max(math.floor(dim_of(32)), 0), min(math.ceil(dim_of(1)), r - 1)
        ramp = ((torch.arange(r // 2, dtype=torch.float64) - low) / (high - low)).clamp(0, 1)
        return w / f * ramp + w * (1 - ramp), 0.1 * math.log(f) + 1
    if rope == "llama3":
        f, lo, hi = p["factor"], p["low_freq_factor"], p["high_freq_factor"]
        wavelen = 2 * math.pi / w
        smooth = (L0 / wavelen - lo) / (hi - lo)
        mid = (1 - smooth) * w / f + smooth * w
        return torch.where(wavelen > L0 / lo, w / f, torch.where(wavelen < L0 / hi, w, mid)), 1.0
    if rope == "longrope":
        ext = torch.tensor(LONG if seq_len > L0 else SHORT, dtype=torch.float64)
        factor = MAX_LEN["longrope"] / L0
        return w / ext, math.sqrt(1 + math.log(factor) / math.log(L0))
    return w, 1.0


def rotate_float64(x, cos, sin, layout):
    """x [T, H, Dh] by cos, sin [T, R/2]: pairs (i, i + R/2) or (2i, 2i + 1)."""
    r, out = 2 * cos.shape[-1], x.clone()
    cos, sin = cos[:, None], sin[:, None]
    ia = torch.arange(r // 2) if layout == "half" else torch.arange(0, r, 2)
    ib = ia + r // 2 if layout == "half" else ia + 1
    a, b = x[..., ia], x[..., ib]
    out[..., ia], out[..., ib] = a * cos - b * sin, b * cos + a * sin
    return out


@pytest.mark.parametrize("layout", ["half", "interleaved"])
@pytest.mark.parametrize("rope", list(ROPES))
def test_golden_matches_an_independent_float64_computation(rope, layout):
    seq_len = int(POSITIONS.max()) + 1
    qk = G.random_qk(POSITIONS, HEAD, 2, seed=1)
    g = G.golden(config(rope, layout), POSITIONS, qk=qk)
    w, af = inv_freq_float64(rope, seq_len)
    # golden's frequencies are the float32 ones transformers computes, exact in float64: within
    # the budget's frequency clause (3 + |ln w|) u of the float64 formula
    assert ((g.inv_freq - w).abs() <= w * 2**-24 * (3 + w.log().abs())).all()
    assert g.attention_factor == pytest.approx(af, rel=1e-6)
    angles = POSITIONS.double()[:, None] * g.inv_freq  # from there all is float64
    torch.testing.assert_close(g.cos, angles.cos() * g.attention_factor, rtol=0, atol=1e-12)
    torch.testing.assert_close(g.sin, angles.sin() * g.attention_factor, rtol=0, atol=1e-12)
    assert g.layout == layout and g.meta["seq_len"] == seq_len and g.meta["dtype"] == "float64"
    for name in ("q", "k"):
        want = rotate_float64(qk[name], g.cos, g.sin, layout)
        torch.testing.assert_close(g.qk[f"{name}_rot"], want, rtol=0, atol=1e-12)


def llama_config(cfg: dict) -> LlamaConfig:
    return LlamaConfig(**{k: v for k, v in cfg.items() if k != "model_type"})


def transformers_rotary(cfg: dict, positions: torch.Tensor):
    """transformers' LlamaRotaryEmbedding of the config, called at the positions (so dynamic and
    longrope pick their frequencies), and its float32 cos, sin [T, R] (half layout)."""
    rotary = modeling_llama.LlamaRotaryEmbedding(llama_config(cfg))
    cos, sin = rotary(torch.zeros(1, dtype=torch.float32), positions[None])
    return rotary, cos[0], sin[0]


@pytest.mark.parametrize("rope", list(ROPES))
def test_golden_matches_transformers_in_float64(rope):
    """transformers' own frequencies and attention factor, the angles, cos, sin and the rotation
    (apply_rotary_pos_emb) computed in double: golden equals them."""
    cfg = config(rope)
    rotary, _, _ = transformers_rotary(cfg, POSITIONS)
    qk = G.random_qk(POSITIONS, HEAD, 2, seed=2)
    g = G.golden(cfg, POSITIONS, qk=qk)
    w = rotary.inv_freq.double()
    torch.testing.assert_close(g.inv_freq, w, rtol=0, atol=0)
    assert g.attention_factor == rotary.attention_scaling
    angles = POSITIONS.double()[:, None] * w
    cos = torch.cat((angles, angles), -1).cos() * rotary.attention_scaling  # [T, R]
    sin = torch.cat((angles, angles), -1).sin() * rotary.attention_scaling
    torch.testing.assert_close(torch.cat((g.cos, g.cos), -1), cos, rtol=0, atol=1e-12)
    torch.testing.assert_close(torch.cat((g.sin, g.sin), -1), sin, rtol=0, atol=1e-12)
    q, k = (qk[n].transpose(0, 1)[None] for n in ("q", "k"))  # [1, H, T, Dh]
    q_rot, k_rot = modeling_llama.apply_rotary_pos_emb(q, k, cos[None], sin[None])
    torch.testing.assert_close(g.qk["q_rot"], q_rot[0].transpose(0, 1), rtol=0, atol=1e-12)
    torch.testing.assert_close(g.qk["k_rot"], k_rot[0].transpose(0, 1), rtol=0, atol=1e-12)


# ------------------------------------------------------------------------------ conform


LONG_POSITIONS = torch.cat([torch.arange(0, 4096), torch.arange(4096, 131072, 61)])


@pytest.mark.parametrize("rope", list(ROPES))
def test_conform_passes_transformers_float32_and_bf16_caches(rope):
    cfg = config(rope)
    _, cos, sin = transformers_rotary(cfg, LONG_POSITIONS)
    dump = {"cos": cos, "sin": sin, "positions": LONG_POSITIONS}
    result = G.conform(cfg, dump)
    assert result.ok, "\n".join(result.lines())
    assert "layout half (detected)" in result.lines()[0]
    assert [b.label() for b in result.bands] == ["[0, 2k)", "[2k, 8k)", "[8k, 32k)", "[32k, 128k)"]
    assert sum(b.count for b in result.bands) == len(LONG_POSITIONS)
    # float32's drift grows with the position, and is no float64 rounding
    assert result.bands[-1].max_err > 10 * result.bands[0].max_err > 1e-7
    stored = {"cos": cos.bfloat16(), "sin": sin.bfloat16(), "positions": LONG_POSITIONS}
    assert G.conform(cfg, stored).ok  # bf16 storage of a float32 computation: its budget
    # the same bf16 values judged as a float32 cache: over where float32 is far more accurate
    as_f32 = G.conform(cfg, stored, dtype=torch.float32)
    assert not as_f32.ok and not as_f32.bands[0].ok
    assert as_f32.bands[0].worst > 100


def corrupt_sin_padded_with_one(cos, sin):
    """FoPE's bug: sin padded with 1 for the last pairs (both halves of the half layout)."""
    sin = sin.clone()
    sin[:, HEAD // 2 - 2 : HEAD // 2] = 1.0
    sin[:, HEAD - 2 :] = 1.0
    return cos, sin


def test_conform_fails_the_silent_bugs():
    cfg = config("default")
    _, cos, sin = transformers_rotary(cfg, LONG_POSITIONS)
    pos = {"positions": LONG_POSITIONS}
    cos_bad, sin_bad = corrupt_sin_padded_with_one(cos, sin)
    padded = G.conform(cfg, {"cos": cos_bad, "sin": sin_bad, **pos})
    assert not any(b.ok for b in padded.bands)
    assert padded.lines()[-1].startswith("over budget in 4 of 4 bands")
    # a bf16 cast hidden in a float32 file (an mrope cache cast to bf16): judged as float32
    cast = {"cos": cos.bfloat16().float(), "sin": sin.bfloat16().float(), **pos}
    assert not G.conform(cfg, cast).ok
    assert G.conform(cfg, cast, dtype=torch.bfloat16).ok


def test_conform_fails_a_dynamic_cache_of_the_wrong_length():
    """vLLM's dynamic NTK: a cache built once for the longest length, used below it."""
    cfg = config("dynamic")
    positions = torch.arange(0, 2 * L0)
    rotary = modeling_llama.LlamaRotaryEmbedding(llama_config(cfg))
    rotary(torch.zeros(1), torch.arange(0, 16 * L0)[None])  # grown for 16 * L0 ...
    cos, sin = rotary(torch.zeros(1), positions[None])  # ... and kept for 2 * L0
    dump = {"cos": cos[0], "sin": sin[0]}
    wrong = G.conform(cfg, dump)  # the golden of a call at 2 * L0
    assert not wrong.ok
    assert G.conform(cfg, dump, seq_len=16 * L0).ok  # what it was computed for
    fresh = transformers_rotary(cfg, positions)
    assert G.conform(cfg, {"cos": fresh[1], "sin": fresh[2]}).ok


@pytest.mark.parametrize("layout", ["half", "interleaved"])
def test_conform_rotated_qk_in_float32_and_the_wrong_layout(layout, tmp_path):
    cfg = config("yarn", layout)
    positions = LONG_POSITIONS[::8]
    g = G.golden(cfg, positions, qk=G.random_qk(positions, HEAD, 2, seed=3))
    cos, sin = (c.float() for c in (g.cos, g.sin))
    other = "interleaved" if layout == "half" else "half"
    rotated = {n: rotate_float64(g.qk[n].float(), cos, sin, layout) for n in ("q", "k")}
    dump = {"q_rot": rotated["q"].transpose(0, 1)[None], "k_rot": rotated["k"]}  # [1,H,T,Dh]
    result = G.conform(cfg, dump, golden_file=g)
    assert result.ok, "\n".join(result.lines())
    assert f"layout {layout} (the config's)" in result.lines()[0]
    wrong = {f"{n}_rot": rotate_float64(g.qk[n].float(), cos, sin, other) for n in ("q", "k")}
    result = G.conform(cfg, {**wrong, "q": g.qk["q"], "k": g.qk["k"], "positions": positions})
    assert not result.ok
    assert f"note: the dump is within budget in the {other} layout" in result.lines()
    # yarn's attention factor left out of the cache: over, and said
    bare = {f"{n}_rot": rotate_float64(g.qk[n].float(), cos, sin, layout) for n in ("q", "k")}
    bare = {k: v / g.attention_factor for k, v in bare.items()}
    result = G.conform(cfg, bare, golden_file=g)
    assert not result.ok
    assert "note: the dump is within budget with the attention factor excluded" in result.lines()
    assert G.conform(cfg, bare, golden_file=g, attention_factor="excluded").ok


THETAS = st.sampled_from([10000.0, 500000.0, 1000000.0]) | st.floats(100.0, 1e7)
DIMS = st.sampled_from([16, 32, 64, 80, 96, 128, 256])
POSITION_LISTS = st.lists(st.integers(0, 2**20), min_size=1, max_size=64)


@settings(max_examples=25, deadline=None)
@given(theta=THETAS, r=DIMS, positions=POSITION_LISTS, frequencies=st.sampled_from(["32", "64"]))
def test_budget_covers_float32_computations(theta, r, positions, frequencies):
    """A cache computed in float32 as engines do (frequencies in float32 as transformers, or in
    float64 then rounded; p * w and cos / sin in float32) is within the float32 budget at every
    position and dimension; stored in bf16 it is within the bf16 budget, but over the float32
    one at position 0."""
    cfg = {"head_dim": r, "num_attention_heads": 1, "hidden_size": r, "rope_theta": theta}
    pos = torch.tensor([0, 1, 2, 3, *positions])
    x = torch.arange(0, r, 2, dtype=torch.int64)
    if frequencies == "32":
        w = 1.0 / (theta ** (x.float() / r))
    else:
        w = (1.0 / (theta ** (x.double() / r))).float()
    angles = pos.float()[:, None] * w  # float32 product
    cos, sin = angles.cos(), angles.sin()
    assert G.conform(cfg, {"cos": cos, "sin": sin, "positions": pos}).ok
    stored = {"cos": cos.bfloat16(), "sin": sin.bfloat16(), "positions": pos}
    assert G.conform(cfg, stored).ok
    over = G.conform(cfg, stored, dtype=torch.float32)
    assert not over.ok and not over.bands[0].ok


@settings(max_examples=25, deadline=None)
@given(theta=THETAS, r=DIMS, positions=POSITION_LISTS, store=st.sampled_from(["64", "32"]))
def test_an_exact_float64_cache_passes_its_budget(theta, r, positions, store):
    """A cache computed all in float64 (frequencies too: exact, not the golden's float32 ones)
    is within the float64 budget, and stored in float32 within the float32 one: the frequency
    clause is float32's for every engine. Frequencies rounded to bfloat16 are over it, and so
    is the float32 copy judged as float64."""
    cfg = {"head_dim": r, "num_attention_heads": 1, "hidden_size": r, "rope_theta": theta}
    pos = torch.tensor([0, 1, 2, 3, 1000, *positions])
    w = 1.0 / theta ** (torch.arange(0, r, 2, dtype=torch.float64) / r)
    angles = pos.double()[:, None] * w
    cos, sin = angles.cos(), angles.sin()
    dump = {"cos": cos, "sin": sin, "positions": pos}
    if store == "32":
        dump = {"cos": cos.float(), "sin": sin.float(), "positions": pos}
        assert not G.conform(cfg, dump, dtype=torch.float64).ok
    result = G.conform(cfg, dump)
    assert result.ok, "\n".join(result.lines())
    assert ("frequencies within float32's rounding" in result.lines()[0]) == (store == "64")
    coarse = pos.double()[:, None] * w.bfloat16().double()
    assert not G.conform(cfg, {"cos": coarse.cos(), "sin": coarse.sin(), "positions": pos}).ok


def test_conform_refuses_a_dump_of_no_positions():
    for empty in (torch.zeros(0, HEAD), torch.zeros(1, 0, HEAD), torch.tensor(1.0)):
        with pytest.raises(ValueError, match="holds 0 positions"):
            G.conform(config("default"), {"cos": empty, "sin": empty})
    x = torch.zeros(0, 1, HEAD)
    with pytest.raises(ValueError, match="holds 0 positions"):
        G.conform(config("default"), {"q_rot": x, "q": x})


@settings(max_examples=40, deadline=None)
@given(
    positions=st.lists(st.integers(0, 10**6), min_size=1, max_size=200),
    edges=st.lists(st.integers(1, 10**6), max_size=6, unique=True).map(sorted),
    errs=st.data(),
)
def test_bands_partition_the_positions(positions, edges, errs):
    """Every position falls in exactly one band of the edges; a band's max error and worst
    ratio are those of its positions."""
    pos = torch.tensor(positions)
    bands = G.parse_bands(",".join(map(str, edges))) if edges else G.BAND_EDGES
    rows = G._Rows(len(pos))
    err = torch.tensor(errs.draw(st.lists(st.floats(0, 1), min_size=len(pos), max_size=len(pos))))
    half = torch.full((len(pos), 1), 0.5, dtype=torch.float64)
    rows.add(slice(None), err[:, None].double(), torch.zeros(len(pos), 1), half)
    out = rows.bands(pos, bands)
    assert sum(b.count for b in out) == len(pos)
    for b in out:
        inside = (pos >= b.lo) & ((pos < b.hi) if b.hi is not None else True)
        assert b.count == int(inside.sum()) > 0
        assert b.max_err == float(err[inside].max()) and b.worst == 2 * b.max_err
        assert b.ok == bool((err[inside] <= 0.5).all())


@pytest.mark.parametrize(
    ("store", "compute", "e_f"),
    [(torch.bfloat16, torch.float32, 2.0**-23), (torch.float64, torch.float64, 2.0**-23),
     (torch.float16, torch.float16, 2.0**-10)],
)  # fmt: skip
def test_budget_rule(store, compute, e_f):
    """posenc.hf.golden's rule: af * r * (eps_s + 2 eps_c + p w (eps_f (3 + |ln w|) + 2 eps_c)
    / 2), eps_f = max(eps_c, float32's)."""
    pos, w = torch.tensor([0, 1000]), torch.tensor([1.0, 1e-3, 0.0], dtype=torch.float64)
    b = G.budget(pos, w, store, compute)
    e_s, e_c = torch.finfo(store).eps, torch.finfo(compute).eps
    ln = torch.tensor([0.0, math.log(1e3), 0.0], dtype=torch.float64)
    want = e_s + 2 * e_c + 1000 * w * (e_f * (3 + ln) + 2 * e_c) / 2
    torch.testing.assert_close(b[0], torch.full((3,), e_s + 2 * e_c, dtype=torch.float64))
    torch.testing.assert_close(b[1], want, rtol=1e-12, atol=0)


# ------------------------------------------------------------------------------ CLI


def write_config(tmp_path, rope="llama3", layout="half") -> str:
    import json

    path = tmp_path / "config.json"
    path.write_text(json.dumps(config(rope, layout)))
    return str(path)


@pytest.mark.parametrize("suffix", [".npz", ".safetensors"])
def test_golden_then_conform_on_its_own_file(tmp_path, suffix, capsys):
    cfg = write_config(tmp_path)
    out = str(tmp_path / f"golden{suffix}")
    argv = ["golden", cfg, "--positions", "0:100,1000:5000:7,131071", "--out", out, "--q-k", "5",
            "--heads", "3"]  # fmt: skip
    assert main(argv) == 0
    said = capsys.readouterr().out
    assert said.startswith(f"posenc golden: wrote {out}: cos/sin [") and "llama3" in said
    g = G.read_golden(out)
    assert g.meta["formula_version"] == G.FORMULA_VERSION and g.qk["q"].shape[1:] == (3, HEAD)
    assert g.meta["rope_parameters"]["rope_type"] == "llama3"
    assert main(["conform", cfg, out]) == 0  # cos / sin per pair, float64
    lines = capsys.readouterr().out.splitlines()
    assert "layout pairs" in lines[0] and lines[-1].startswith("within budget in all 3 bands")
    assert main(["conform", cfg, out, "--golden", out, "--bands", "0,64,4096"]) == 0
    assert [line.split()[0] for line in capsys.readouterr().out.splitlines()[3:6]] == [
        "[0,", "[64,", "[4k,"]  # fmt: skip
    dump = tmp_path / "qk.pt"
    torch.save({"q_rot": g.qk["q_rot"].float(), "k_rot": g.qk["k_rot"].float()}, dump)
    assert main(["conform", cfg, str(dump), "--golden", out]) == 0
    torch.save({"q_rot": g.qk["q_rot"].float()}, dump)
    assert main(["conform", cfg, str(dump), "--golden", out, "--dtype", "float64"]) == 1


def test_golden_reads_a_model_folder_and_a_qk_file(tmp_path, capsys):
    write_config(tmp_path, "yarn", "interleaved")
    qk = G.random_qk(torch.arange(10), HEAD, 1, seed=0)
    torch.save(qk, tmp_path / "qk.pt")
    out = tmp_path / "g.npz"
    argv = ["golden", str(tmp_path), "--positions", "0:10", "--out", str(out), "--q-k",
            str(tmp_path / "qk.pt")]  # fmt: skip
    assert main(argv) == 0
    g = G.read_golden(out)
    assert g.layout == "interleaved" and torch.equal(g.qk["q"], qk["q"])
    assert "layout interleaved" in capsys.readouterr().out


def write_bad_files(tmp_path) -> None:
    write_config(tmp_path)
    (tmp_path / "junk.npz").write_bytes(b"not a zip")
    torch.save({"cos": torch.zeros(4, 5), "sin": torch.zeros(4, 5)}, tmp_path / "wide.pt")
    torch.save({"other": torch.zeros(4, 5)}, tmp_path / "none.pt")
    (tmp_path / "notjson.json").write_text("{")
    (tmp_path / "empty").mkdir(exist_ok=True)
    torch.save({"k_rot": torch.zeros(4, 1, HEAD), "q": torch.zeros(4, 1, HEAD)}, tmp_path / "k.pt")
    torch.save({"cos": torch.ones(4, HEAD), "sin": torch.zeros(4, HEAD)}, tmp_path / "cache.pt")
    G.write_golden(G.golden(config("default"), torch.arange(4)), tmp_path / "default.npz")
    torch.save({"cos": torch.zeros(0, HEAD), "sin": torch.zeros(0, HEAD)}, tmp_path / "zero.pt")
    refused = {**config("default"), "hidden_size": 62}  # not a multiple of 4 heads
    (tmp_path / "refused.json").write_text(__import__("json").dumps(refused))


def bad_inputs(tmp_path) -> dict:
    """case -> (argv, words the one line says), on the files write_bad_files writes."""
    cfg, g = str(tmp_path / "config.json"), str(tmp_path / "g.npz")
    return {
        "no config": (["golden", str(tmp_path / "nope.json"), "--positions", "0:4"], "no such"),
        "folder without config": (["golden", str(tmp_path / "empty"), "--positions", "0:4"],
                                  "without config.json"),
        "config not json": (["golden", str(tmp_path / "notjson.json"), "--positions", "0:4"],
                            "not a readable JSON"),
        "positions reversed": (["golden", cfg, "--positions", "5:3"], "0 <= A < B"),
        "positions words": (["golden", cfg, "--positions", "a:b"], "not N, A:B or A:B:S"),
        "positions negative": (["golden", cfg, "--positions", "-4"], "0 <= A < B"),
        "positions past 2^31": (["golden", cfg, "--positions", "0:4,2147483648"], "2^31"),
        "out suffix": (["golden", cfg, "--positions", "0:4", "--out", g[:-4] + ".txt"],
                       "must end in .npz, .safetensors"),
        "out folder missing": (["golden", cfg, "--positions", "0:4", "--out",
                                str(tmp_path / "no" / "g.npz")], "no such directory"),
        "q-k neither": (["golden", cfg, "--positions", "0:4", "--q-k", "x.pt"], "a seed"),
        "dump unreadable": (["conform", cfg, str(tmp_path / "junk.npz")], "not a readable .npz"),
        "dump missing": (["conform", cfg, str(tmp_path / "gone.pt")], "no such file"),
        "dump suffix": (["conform", cfg, cfg], "must end in .npz"),
        "dump without cos": (["conform", cfg, str(tmp_path / "none.pt")], "conform reads cos"),
        "dump shapes": (["conform", cfg, str(tmp_path / "wide.pt")], "fit neither"),
        "dump of 0 positions": (["conform", cfg, str(tmp_path / "zero.pt")], "holds 0 positions"),
        "config transformers refuses": (["golden", str(tmp_path / "refused.json"), "--positions",
                                         "0:4"], "not a multiple of the number of attention"),
        "conform on it": (["conform", str(tmp_path / "refused.json"),
                           str(tmp_path / "cache.pt")], "refuses this llama config"),
        "dump positions": (["conform", cfg, str(tmp_path / "wide.pt"), "--positions", "0:3"],
                           "hold 3 positions"),
        "bands": (["conform", cfg, str(tmp_path / "wide.pt"), "--bands", "5,3"], "increasing"),
        "golden not golden": (["conform", cfg, str(tmp_path / "wide.pt"), "--golden",
                               str(tmp_path / "junk.npz")], "not a readable .npz"),
        "dtype": (["conform", cfg, str(tmp_path / "wide.pt"), "--dtype", "int8"], "--dtype"),
        "rotated without input": (["conform", cfg, str(tmp_path / "k.pt")], "no input k"),
        "golden of another config": (["conform", cfg, str(tmp_path / "cache.pt"), "--golden",
                                      str(tmp_path / "default.npz")], "written for scaling"),
    }  # fmt: skip


BAD = list(bad_inputs(Path("/nonexistent")))


@pytest.mark.parametrize("case", BAD)
def test_bad_input_is_one_line_exit_2(case, tmp_path, capsys):
    write_bad_files(tmp_path)
    argv, words = bad_inputs(tmp_path)[case]
    try:
        code = main(argv)
    except SystemExit as exit_:  # argparse's own refusals
        code = exit_.code
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and words in err, err


def test_the_commands_run_and_load_no_lab_dependency(tmp_path):
    """`posenc golden` with a bad config path, as a user runs it: one line, exit 2; importing
    the commands loads none of the lab's dependencies."""
    env = {"PYTHONPATH": str(ROOT / "src"), "PATH": "/usr/bin:/bin"}
    argv = [
        sys.executable,
        "-m",
        "posenc",
        "golden",
        str(tmp_path / "x.json"),
        "--positions",
        "0:8",
    ]
    bad = subprocess.run(argv, capture_output=True, text=True, env=env)
    assert bad.returncode == 2 and bad.stderr.count("\n") == 1 and "no such" in bad.stderr
    code = ("import sys, torch; before = set(sys.modules); import posenc.hf.cli; "
            "print([m for m in ('matplotlib', 'tqdm', 'sqlite3', 'numpy') "
            "if m in sys.modules and m not in before])")  # fmt: skip
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
    assert out.returncode == 0 and out.stdout.strip() == "[]", out.stderr


def test_golden_of_a_config_with_rope_per_layer_type(tmp_path, capsys):
    """Gemma 3: rope parameters per layer type; --layer-type picks one, none is one line."""
    import json

    cfg = {"model_type": "gemma3_text", **SMALL, "head_dim": HEAD, "num_hidden_layers": 2,
           "layer_types": ["sliding_attention", "full_attention"],
           "rope_local_base_freq": 10000.0, "rope_theta": 1000000.0,
           "rope_scaling": {"factor": 8.0, "rope_type": "linear"}}  # fmt: skip
    path = tmp_path / "config.json"
    path.write_text(json.dumps(cfg))
    out = str(tmp_path / "g.npz")
    assert main(["golden", str(path), "--positions", "0:8", "--out", out]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "layer_type" in err
    x = torch.arange(0, HEAD, 2).float() / HEAD
    for layer_type, want in (("sliding_attention", 1 / 10000.0**x),
                             ("full_attention", 1 / 1000000.0**x / 8)):  # fmt: skip
        argv = ["golden", str(path), "--positions", "0:8", "--out", out, "--layer-type", layer_type]
        assert main(argv) == 0
        g = G.read_golden(out)
        assert g.meta["layer_type"] == layer_type
        torch.testing.assert_close(g.inv_freq, want.double(), rtol=2**-22, atol=0)
        assert main(["conform", str(path), out, "--layer-type", layer_type]) == 0
