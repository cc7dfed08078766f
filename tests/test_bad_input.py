"""Bad input, as a new user gives it: every case is a TypeError (wrong type) or a ValueError
(wrong value) whose message names the argument, never a torch internal error, an IndexError or
a silently wrong tensor; every CLI failure is one line on stderr and exit status 2."""

from __future__ import annotations

import pytest
import torch

import posenc
from posenc.cli import main as cli

NAN, INF = float("nan"), float("inf")


def qkv(B=1, H=2, T=4, Dh=8, Hkv=None, dtype=torch.float32):
    Hkv = H if Hkv is None else Hkv
    return (torch.randn(B, H, T, Dh, dtype=dtype), torch.randn(B, Hkv, T, Dh, dtype=dtype),
            torch.randn(B, Hkv, T, Dh, dtype=dtype))  # fmt: skip


def attn(*, q=None, k=None, v=None, **kw):
    q0, k0, v0 = qkv()
    return posenc.attention(q0 if q is None else q, k0 if k is None else k,
                            v0 if v is None else v, **kw)  # fmt: skip


def enc(name, **kw):
    return posenc.build(name, **{"dim": 16, "heads": 2, "head_dim": 8, **kw})


def rope(**scaling):
    return enc("rope", scaling=scaling)


def model(**kw):
    return posenc.TransformerLM(**{"vocab_size": 10, "dim": 16, "depth": 1, "heads": 2, **kw})


M = None


def fwd(tokens, **kw):
    global M
    M = M or model()
    return M(tokens, **kw)


def gen(tokens, n=2, **kw):
    global M
    M = M or model()
    return M.generate(tokens, n, **kw)


T = torch.tensor
API = [
    # attention: tensors
    ("q not a tensor", lambda: attn(q=[[1.0]]), TypeError, "q"),
    ("q 3-D", lambda: attn(q=torch.randn(2, 4, 8)), ValueError, "q"),
    ("int q", lambda: attn(q=torch.ones(1, 2, 4, 8, dtype=torch.long)), TypeError, "q"),
    ("bool k", lambda: attn(k=torch.ones(1, 2, 4, 8, dtype=torch.bool)), TypeError, "k"),
    ("int v", lambda: attn(v=torch.ones(1, 2, 4, 8, dtype=torch.int32)), TypeError, "v"),
    ("H = 0", lambda: posenc.attention(*qkv(H=0, Hkv=0)), ValueError, "H"),
    ("Dh = 0", lambda: posenc.attention(*qkv(Dh=0)), ValueError, "Dh"),
    ("k, v shapes differ", lambda: attn(v=torch.randn(1, 2, 5, 8)), ValueError, "k and v"),
    (
        "k batch",
        lambda: attn(k=torch.randn(2, 2, 4, 8), v=torch.randn(2, 2, 4, 8)),
        ValueError,
        "k",
    ),
    ("H % Hkv", lambda: posenc.attention(*qkv(H=3, Hkv=2)), ValueError, "heads"),
    (
        "dtypes differ",
        lambda: attn(k=torch.randn(1, 2, 4, 8, dtype=torch.float64)),
        TypeError,
        "dtype",
    ),
    ("encoding a string", lambda: attn(encoding="rope"), TypeError, "encoding"),
    ("encoding heads", lambda: attn(encoding=enc("alibi", heads=4)), ValueError, "heads"),
    ("backend", lambda: attn(backend="flash"), ValueError, "backend"),
    ("block_size 0", lambda: attn(backend="chunked", block_size=0), ValueError, "block_size"),
    ("block_size float", lambda: attn(block_size=2.0), TypeError, "block_size"),
    (
        "q_pos NaN",
        lambda: attn(encoding=enc("rope"), q_pos=T([0.0, 1, NAN, 3]), k_pos=T([0.0, 1, 2, 3])),
        ValueError,
        "q_pos",
    ),  # fmt: skip
    (
        "k_pos inf",
        lambda: attn(encoding=enc("alibi"), q_pos=T([0.0, 1, 2, 3]), k_pos=T([0.0, 1, 2, INF])),
        ValueError,
        "k_pos",
    ),  # fmt: skip
    (
        "k_pos negative",
        lambda: attn(encoding=enc("t5"), k_pos=T([-1, 0, 1, 2])),
        ValueError,
        "k_pos",
    ),
    ("q_pos length", lambda: attn(encoding=enc("rope"), q_pos=T([0, 1])), ValueError, "q_pos"),
    (
        "q_pos bool",
        lambda: attn(encoding=enc("rope"), q_pos=T([True] * 4), k_pos=T([0, 1, 2, 3])),
        TypeError,
        "q_pos",
    ),
    (
        "t5 float positions",
        lambda: attn(encoding=enc("t5"), q_pos=T([0.5, 1, 2, 3]), k_pos=T([0.5, 1, 2, 3])),
        ValueError,
        "q_pos",
    ),  # fmt: skip
    (
        "Tq > Tk default positions",
        lambda: posenc.attention(
            torch.randn(1, 2, 5, 8), torch.randn(1, 2, 3, 8), torch.randn(1, 2, 3, 8)
        ),
        ValueError,
        "q_pos",
    ),  # fmt: skip
    ("mask shape", lambda: attn(mask=torch.ones(3, 3, dtype=torch.bool)), ValueError, "mask"),
    (
        "alibi decoder form, causal=False",
        lambda: attn(encoding=enc("alibi"), causal=False),
        ValueError,
        "bidirectional=True",
    ),
    (
        "t5 decoder form, causal=False",
        lambda: attn(encoding=enc("t5"), causal=False),
        ValueError,
        "bidirectional=True",
    ),
    (
        "xpos, causal=False",
        lambda: attn(encoding=enc("xpos"), causal=False),
        ValueError,
        "causal=False",
    ),
    (
        "cope, causal=False",
        lambda: attn(encoding=enc("cope"), causal=False),
        ValueError,
        "causal=False",
    ),
    # build: names and standard keywords
    ("unknown encoding", lambda: posenc.build("ropee"), ValueError, "rope"),
    ("alibi without heads", lambda: posenc.build("alibi"), ValueError, "heads"),
    ("alibi heads float", lambda: posenc.build("alibi", heads=2.0), TypeError, "heads"),
    ("t5 heads 0", lambda: posenc.build("t5", heads=0), ValueError, "heads"),
    ("alibi bidirectional int", lambda: enc("alibi", bidirectional=1), TypeError, "bidirectional"),
    ("t5 bidirectional str", lambda: enc("t5", bidirectional="yes"), TypeError, "bidirectional"),
    (
        "t5 odd buckets",
        lambda: enc("t5", bidirectional=True, num_buckets=7),
        ValueError,
        "num_buckets",
    ),
    ("rope base 0", lambda: enc("rope", base=0), ValueError, "base"),
    ("rope base -1", lambda: enc("rope", base=-1), ValueError, "base"),
    ("rope base 1", lambda: enc("rope", base=1), ValueError, "base"),
    ("rope base nan", lambda: enc("rope", base=NAN), ValueError, "base"),
    ("rope base inf", lambda: enc("rope", base=INF), ValueError, "base"),
    ("rope base str", lambda: enc("rope", base="1e4"), TypeError, "base"),
    ("xpos base 0", lambda: enc("xpos", base=0), ValueError, "base"),
    ("rope layout", lambda: enc("rope", layout="zigzag"), ValueError, "layout"),
    ("rope rotary_dim odd", lambda: enc("rope", rotary_dim=3), ValueError, "rotary_dim"),
    ("rope rotary_dim too big", lambda: enc("rope", rotary_dim=16), ValueError, "rotary_dim"),
    ("learned max_len 0", lambda: enc("learned", max_len=0), ValueError, "max_len"),
    # rope scaling dicts
    (
        "scaling a list",
        lambda: enc("rope", scaling=[("rope_type", "linear")]),
        TypeError,
        "scaling",
    ),
    ("rope_type unknown", lambda: rope(rope_type="yarnn", factor=2), ValueError, "rope_type"),
    ("linear factor 0", lambda: rope(rope_type="linear", factor=0), ValueError, "factor"),
    ("linear factor -2", lambda: rope(rope_type="linear", factor=-2), ValueError, "factor"),
    ("linear factor str", lambda: rope(rope_type="linear", factor="2"), TypeError, "factor"),
    ("linear factor bool", lambda: rope(rope_type="linear", factor=True), TypeError, "factor"),
    ("linear factor nan", lambda: rope(rope_type="linear", factor=NAN), ValueError, "factor"),
    ("linear factor missing", lambda: rope(rope_type="linear"), ValueError, "factor"),
    ("ntk factor 0.5", lambda: rope(rope_type="ntk", factor=0.5), ValueError, "factor"),
    (
        "dynamic factor inf",
        lambda: rope(rope_type="dynamic", factor=INF, original_max_position_embeddings=64),
        ValueError,
        "factor",
    ),
    (
        "dynamic without original",
        lambda: rope(rope_type="dynamic", factor=2),
        ValueError,
        "original_max_position_embeddings",
    ),
    (
        "yarn factor 0.5",
        lambda: rope(rope_type="yarn", factor=0.5, original_max_position_embeddings=64),
        ValueError,
        "factor",
    ),
    (
        "yarn original 0",
        lambda: rope(rope_type="yarn", factor=4, original_max_position_embeddings=0),
        ValueError,
        "original_max_position_embeddings",
    ),  # fmt: skip
    (
        "yarn original 64.5",
        lambda: rope(rope_type="yarn", factor=4, original_max_position_embeddings=64.5),
        ValueError,
        "original_max_position_embeddings",
    ),  # fmt: skip
    (
        "yarn beta_fast <= beta_slow",
        lambda: rope(
            rope_type="yarn",
            factor=4,
            beta_fast=1,
            beta_slow=32,
            original_max_position_embeddings=64,
        ),
        ValueError,
        "beta_fast",
    ),  # fmt: skip
    (
        "yarn attention_factor -1",
        lambda: rope(
            rope_type="yarn", factor=4, attention_factor=-1, original_max_position_embeddings=64
        ),
        ValueError,
        "attention_factor",
    ),  # fmt: skip
    (
        "llama3 original -5",
        lambda: rope(
            rope_type="llama3",
            factor=8,
            low_freq_factor=1,
            high_freq_factor=4,
            original_max_position_embeddings=-5,
        ),
        ValueError,
        "original_max_position_embeddings",
    ),  # fmt: skip
    (
        "llama3 high < low",
        lambda: rope(
            rope_type="llama3",
            factor=8,
            low_freq_factor=4,
            high_freq_factor=2,
            original_max_position_embeddings=64,
        ),
        ValueError,
        "high_freq_factor",
    ),  # fmt: skip
    (
        "llama3 low_freq_factor missing",
        lambda: rope(
            rope_type="llama3", factor=8, high_freq_factor=4, original_max_position_embeddings=64
        ),
        ValueError,
        "low_freq_factor",
    ),  # fmt: skip
    (
        "longrope 3 factors",
        lambda: rope(
            rope_type="longrope",
            short_factor=[1, 1, 1],
            long_factor=[1, 1, 1],
            factor=2,
            original_max_position_embeddings=16,
        ),
        ValueError,
        "short_factor",
    ),  # fmt: skip
    (
        "longrope negative factor",
        lambda: rope(
            rope_type="longrope",
            short_factor=[1, 1, 1, -1],
            long_factor=[1] * 4,
            factor=2,
            original_max_position_embeddings=16,
        ),
        ValueError,
        "short_factor",
    ),  # fmt: skip
    (
        "partial_rotary_factor 1.5",
        lambda: rope(rope_type="linear", factor=2, partial_rotary_factor=1.5),
        ValueError,
        "partial_rotary_factor",
    ),  # fmt: skip
    (
        "rope_theta 0 in the dict",
        lambda: rope(rope_type="linear", factor=2, rope_theta=0),
        ValueError,
        "rope_theta",
    ),
    # TransformerLM
    ("vocab_size 0", lambda: model(vocab_size=0), ValueError, "vocab_size"),
    ("dim 0", lambda: model(dim=0), ValueError, "dim"),
    ("depth -1", lambda: model(depth=-1), ValueError, "depth"),
    ("heads not dividing dim", lambda: model(heads=3), ValueError, "heads"),
    ("kv_heads not dividing heads", lambda: model(heads=4, kv_heads=3), ValueError, "kv_heads"),
    ("encoding not a name", lambda: model(encoding=enc("rope")), TypeError, "encoding"),
    ("encoding unknown", lambda: model(encoding="alibii"), ValueError, "alibi"),
    ("encoder with xpos", lambda: model(encoding="xpos", causal=False), ValueError, "causal=False"),
    ("encoder with cope", lambda: model(encoding="cope", causal=False), ValueError, "causal=False"),
    ("tokens 1-D", lambda: fwd(T([1, 2, 3])), ValueError, "tokens"),
    ("tokens a list", lambda: fwd([[1, 2]]), ValueError, "tokens"),
    ("tokens float", lambda: fwd(T([[1.0, 2.0]])), TypeError, "tokens"),
    ("tokens bool", lambda: fwd(T([[True, False]])), TypeError, "tokens"),
    ("token id = vocab_size", lambda: fwd(T([[1, 2, 10]])), ValueError, "tokens"),
    ("token id negative", lambda: fwd(T([[1, -2, 3]])), ValueError, "tokens"),
    (
        "positions wrong length",
        lambda: fwd(T([[1, 2, 3]]), positions=T([0, 1])),
        ValueError,
        "positions",
    ),
    (
        "positions negative",
        lambda: fwd(T([[1, 2, 3]]), positions=T([0, -1, 2])),
        ValueError,
        "positions",
    ),
    ("doc_ids shape", lambda: fwd(T([[1, 2, 3]]), doc_ids=T([0, 0])), ValueError, "doc_ids"),
    (
        "learned past its table",
        lambda: model(encoding="learned", max_len=4)(torch.zeros(1, 6, dtype=torch.long)),
        ValueError,
        "max_len",
    ),  # fmt: skip
    # generate
    (
        "generate empty prompt",
        lambda: gen(torch.zeros(1, 0, dtype=torch.long)),
        ValueError,
        "tokens",
    ),
    ("generate 1-D prompt", lambda: gen(T([1, 2])), ValueError, "tokens"),
    (
        "generate nan temperature",
        lambda: gen(T([[1, 2]]), temperature=NAN),
        ValueError,
        "temperature",
    ),
    (
        "generate inf temperature",
        lambda: gen(T([[1, 2]]), temperature=INF),
        ValueError,
        "temperature",
    ),
    (
        "generate negative temperature",
        lambda: gen(T([[1, 2]]), temperature=-1.0),
        ValueError,
        "temperature",
    ),
    (
        "generate str temperature",
        lambda: gen(T([[1, 2]]), temperature="hot"),
        TypeError,
        "temperature",
    ),
    ("generate max_new_tokens -1", lambda: gen(T([[1, 2]]), n=-1), ValueError, "max_new_tokens"),
    ("generate max_new_tokens 2.5", lambda: gen(T([[1, 2]]), n=2.5), TypeError, "max_new_tokens"),
    ("generate top_k 0", lambda: gen(T([[1, 2]]), top_k=0), ValueError, "top_k"),
    (
        "generate with an encoder",
        lambda: model(causal=False).generate(T([[1, 2]]), 2),
        ValueError,
        "causal",
    ),
    # encodings called directly
    (
        "sinusoidal embed NaN",
        lambda: enc("sinusoidal").embed(torch.randn(1, 3, 16), T([0.0, NAN, 2.0])),
        ValueError,
        "positions",
    ),  # fmt: skip
    (
        "learned embed past max_len",
        lambda: enc("learned", max_len=4).embed(torch.randn(1, 6, 16), torch.arange(6)),
        ValueError,
        "max_len",
    ),  # fmt: skip
    ("rope_inv_freq odd dim", lambda: posenc.functional.rope_inv_freq(7), ValueError, "dim"),
    ("rope_inv_freq dim bool", lambda: posenc.functional.rope_inv_freq(True), TypeError, "dim"),
]


@pytest.mark.parametrize(("case", "call", "kind", "names"), API, ids=[c[0] for c in API])
def test_api(case, call, kind, names):
    with pytest.raises(kind) as info:
        call()
    assert names in str(info.value), f"{case}: {info.value}"


CLI = [
    (["bogus"], "unknown command"),
    (["list", "--family", "bogus"], "--family"),
    (["show", "ropee"], "rope"),
    (["show", "rope", "--positions", "5:2"], "--positions"),
    (["show", "rope", "--positions", "-1:3"], "--positions"),
    (["show", "rope", "--positions", "a:b"], "--positions"),
    (["show", "rope", "--dim", "x"], "--dim"),
    (["bench", "--sections", ""], "--sections"),
    (["bench", "--sections", "rope,warp"], "--sections"),
    (["explain", "ropee", "--out", "{tmp}/e"], "rope"),
    (["explain", "rope", "--out", "{file}"], "--out"),
    (["explain", "rope", "--checkpoint", "{file}", "--out", "{tmp}/e"], "checkpoint"),
    (["explain", "rope", "--checkpoint", "{tmp}/missing.pt", "--out", "{tmp}/e"], "missing.pt"),
    (["arena", "--seeds", "0", "--db", "{tmp}/a.sqlite"], "--seeds"),
    (["arena", "--steps", "-3", "--db", "{tmp}/a.sqlite"], "--steps"),
    (["arena", "--tasks", "copyy", "--db", "{tmp}/a.sqlite"], "copy"),
    (["arena", "--tasks", ",", "--db", "{tmp}/a.sqlite"], "--tasks"),
    (["arena", "--encodings", "ropee", "--db", "{tmp}/a.sqlite"], "rope"),
    (["arena", "--eval-lens", "4,x", "--db", "{tmp}/a.sqlite"], "--eval-lens"),
    (["arena", "--eval-lens", "-4", "--db", "{tmp}/a.sqlite"], "--eval-lens"),
    (["arena", "--device", "tpu", "--db", "{tmp}/a.sqlite"], "--device"),
    (["arena", "--workers", "0", "--db", "{tmp}/a.sqlite"], "--workers"),
    (["arena", "--out", "{file}", "--db", "{tmp}/a.sqlite"], "--out"),
    (["arena", "--db", "{tmp}"], "--db"),
    (["arena", "--cpus-per-cell", "2", "--db", "{tmp}/a.sqlite"], "--ray"),
    (["arena", "report", "--db", "{tmp}/none.sqlite"], "none.sqlite"),
]


@pytest.mark.parametrize(("argv", "names"), CLI, ids=[" ".join(a) for a, _ in CLI])
def test_cli(argv, names, tmp_path, capsys):
    file = tmp_path / "a-file"
    file.write_bytes(b"not a checkpoint, not a directory")
    argv = [a.format(tmp=tmp_path, file=file) for a in argv]
    try:
        rc = cli(argv)
    except SystemExit as stop:  # argparse's usage errors exit from inside
        rc = stop.code
    assert rc == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "Traceback" not in err, err  # one line
    assert names in err, err
    assert not (tmp_path / "a.sqlite").exists()  # nothing ran


def test_the_battery_is_large():
    assert len(API) + len(CLI) >= 100
