"""Positions of every integer dtype give the int64 result (one normalization point,
posenc.checks.check_positions), across every encoding, backend and public entry point; and
position checks need no values where there are none (a model on the meta device runs)."""

from __future__ import annotations

from inspect import signature

import pytest
import torch

import posenc
from posenc import TransformerLM
from posenc.encodings import build_for

NAMES = sorted(posenc.ENCODINGS)
NARROW = [torch.uint8, torch.int8, torch.int16, torch.int32]
BACKENDS = ["eager", "sdpa", "chunked", "distance"]  # flex: test_flex_narrow_positions (slow)
B, H, HKV, DH, D, V = 2, 4, 2, 8, 32, 11
Tq, Tk = 5, 9
# [B, T] positions with gaps (every entry point but distance) and consecutive [T] positions
# (distance's case), all below 128: int8 holds them, uint8 `i - j` would wrap
GAPPY = (
    torch.tensor([[3, 10, 20, 50, 100], [4, 5, 6, 7, 8]]),
    torch.tensor([[0, 2, 3, 7, 10, 20, 30, 50, 100], [0, 1, 2, 3, 4, 5, 6, 7, 8]]),
)
# encodings with an encoder form of their own (bidirectional=True): encoder ALiBi, T5
ENCODER_FORMS = [n for n in NAMES if "bidirectional" in signature(posenc.ENCODINGS[n]).parameters]
CONSECUTIVE = (torch.arange(24, 29), torch.arange(20, 29))


def encoding(name: str, causal: bool):
    """The trained-looking encoding (parameters off their init), or None where `name` has no
    form for `causal` (xPos, CoPE, FoX are decoder-only)."""
    torch.manual_seed(0)
    try:
        enc = build_for(name, causal=causal, dim=D, heads=H, head_dim=DH, max_len=128)
    except ValueError as err:
        assert not causal and "one-directional" in str(err)
        return None
    with torch.no_grad():
        for p in enc.parameters():
            p.add_(0.1 * torch.randn_like(p))
    return enc.eval()


def grid(pos: torch.Tensor, P: int) -> torch.Tensor:
    return pos if P == 1 else pos[..., None].expand(*pos.shape, P)


def inputs():
    torch.manual_seed(1)
    q, k, v = torch.randn(B, H, Tq, DH), torch.randn(B, HKV, Tk, DH), torch.randn(B, HKV, Tk, DH)
    mask = torch.ones(B, 1, 1, Tk, dtype=torch.bool)
    mask[0, ..., :2] = False  # left padding in the first row
    return q, k, v, mask


def attend(enc, positions, dtype, causal, backend, mask):
    q, k, v, _ = inputs()
    qp, kp = (grid(p, enc.position_dims).to(dtype) for p in positions)
    with torch.no_grad():
        return posenc.attention(q, k, v, enc, qp, kp, causal=causal, backend=backend, mask=mask)


def check_dtypes(enc, positions, causal, backend, use_mask):
    mask = inputs()[3] if use_mask else None
    try:
        ref = attend(enc, positions, torch.long, causal, backend, mask)
    except (ValueError, NotImplementedError):
        return False  # the backend does not run this call (its own tests say why)
    for dtype in NARROW:
        out = attend(enc, positions, dtype, causal, backend, mask)
        torch.testing.assert_close(out, ref, rtol=0, atol=0, msg=f"{dtype}")
    return True


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize(
    ("name", "causal"), [(n, True) for n in NAMES] + [(n, False) for n in ENCODER_FORMS]
)
def test_every_integer_dtype_gives_the_int64_attention(name, causal, backend):
    enc = encoding(name, causal)
    if enc is None:
        pytest.skip("no form for causal=False")
    ran = [check_dtypes(enc, GAPPY, causal, backend, True)]  # gaps and left padding
    ran.append(check_dtypes(enc, CONSECUTIVE, causal, backend, False))
    if backend == "distance" and "distance" in enc.provides:
        assert ran[1], "the distance backend must run consecutive positions without a mask"
    if not any(ran):
        pytest.skip(f"{backend} runs no call of {name}")


@pytest.mark.slow
@pytest.mark.parametrize("name", ["alibi", "t5", "kerple", "fire", "sandwich"])
def test_flex_narrow_positions(name):
    """FlexAttention compiles per encoding (seconds each): the position-only biases."""
    pytest.importorskip("torch.nn.attention.flex_attention")
    enc = encoding(name, causal=True)
    assert check_dtypes(enc, GAPPY, True, "flex", True)


@pytest.mark.parametrize("name", NAMES)
def test_every_integer_dtype_gives_the_int64_hooks(name):
    """The encodings' public entry points normalize too, called directly."""
    enc = encoding(name, causal=True)
    P = enc.position_dims
    q, k, _, _ = inputs()
    x = torch.randn(B, Tk, D)
    kv = k.repeat_interleave(H // HKV, dim=1)
    probs = torch.softmax(torch.randn(B, H, Tq, Tk), dim=-1)
    logits = torch.randn(B, H, Tq, Tk)

    def hooks(qp, kp):
        rq, rk = enc.rotate(q, k, qp, kp)
        return [
            enc.embed(x, kp), rq, rk, enc.bias(q, kv, qp, kp), enc.values(probs, qp, kp),
            enc.transform_logits(logits, q, kv, qp, kp), enc.normalize(logits, None, qp, kp),
            enc.angles(kp[0]),
        ]  # fmt: skip

    qp, kp = (grid(p, P) for p in GAPPY)
    with torch.no_grad():
        ref = hooks(qp, kp)
        for dtype in NARROW:
            for got, want in zip(hooks(qp.to(dtype), kp.to(dtype)), ref, strict=True):
                torch.testing.assert_close(got, want, rtol=0, atol=0, msg=f"{dtype}")
    ref_mod = enc.score_mod(qp[0], kp[0])
    if ref_mod is not None:  # (score, b, h, q_idx, kv_idx): query 50 against key 100
        idx = (
            torch.tensor(0.0),
            torch.tensor(0),
            torch.tensor(1),
            torch.tensor(3),
            torch.tensor(8),
        )
        for dtype in NARROW:
            mod = enc.score_mod(qp[0].to(dtype), kp[0].to(dtype))
            assert mod(*idx) == ref_mod(*idx), dtype


@pytest.mark.parametrize("name", NAMES)
def test_model_positions_of_every_integer_dtype(name):
    """Model positions and a padded (doc_ids) batch: T5's decoder bias with left padding."""
    torch.manual_seed(0)
    model = TransformerLM(V, D, 2, H, encoding=name, max_len=128).eval()
    tokens = torch.randint(0, V, (B, Tk))
    positions = grid(GAPPY[1], model.encoding.position_dims)
    doc_ids = torch.tensor([[0, 0, 1, 1, 1, 1, 1, 1, 1], [0] * 9])  # two pads before row 0
    with torch.no_grad():
        ref = model(tokens, positions=positions)
        padded = model(tokens, doc_ids=doc_ids.to(torch.uint8))
        torch.testing.assert_close(padded, model(tokens, doc_ids=doc_ids), rtol=0, atol=0)
        for dtype in NARROW:
            out = model(tokens, positions=positions.to(dtype))
            torch.testing.assert_close(out, ref, rtol=0, atol=0, msg=f"{dtype}")


def test_sample_positions_of_every_integer_dtype():
    enc = posenc.build("randomized", encoding="alibi", heads=H, sample_len=200).train()
    pos = GAPPY[1]
    for dtype in NARROW:
        torch.manual_seed(0)
        want = enc.sample_positions(pos)
        torch.manual_seed(0)
        got = enc.sample_positions(pos.to(dtype))
        assert got.dtype == torch.long and torch.equal(got, want), dtype


@pytest.mark.parametrize("name", NAMES)
def test_a_model_on_the_meta_device_runs_forward(name):
    """No host sync in the position checks: a meta model (shapes only) runs, train and eval."""
    with torch.device("meta"):
        model = TransformerLM(V, D, 2, H, encoding=name, max_len=64)
        tokens = torch.zeros(B, Tk, dtype=torch.long)
        for training in (False, True):
            out = model.train(training)(tokens)
            assert out.is_meta and out.shape == (B, Tk, V)
        positions = grid(torch.zeros(Tk, dtype=torch.uint8), model.encoding.position_dims)
        out = model(tokens, positions=positions)
        assert out.shape == (B, Tk, V)
