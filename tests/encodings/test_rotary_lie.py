"""posenc.encodings.rotary_lie: LieRE against golden rotations worked out by hand (2x2 blocks:
RoPE; 3x3 blocks: Rodrigues' formula); relative for one axis or commuting generators, and
not for non-commuting ones; orthogonality; per-head generators; backends; cached decoding."""

import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import posenc
from posenc.encodings.rotary_lie import LieRE

PROPS = settings(max_examples=15, deadline=None)
B, H, DH = 2, 2, 8


def scores(enc, q, k, qp, kp):
    rq, rk = enc.rotate(q, k, qp, kp)
    return rq @ rk.repeat_interleave(q.shape[1] // k.shape[1], 1).transpose(-1, -2)


def test_two_by_two_blocks_are_rope():
    """A = [[0, -w], [w, 0]] gives exp(pA) = [[cos pw, -sin pw], [sin pw, cos pw]]: the pair
    (2b, 2b + 1) turned by p * w_b, which is RoPE's interleaved layout."""
    enc = LieRE(head_dim=DH, block_dim=2)
    w = posenc.functional.rope_inv_freq(DH)[0]
    with torch.no_grad():
        enc.generators.zero_()
        enc.generators[0, :, 0, 1] = -w  # A = U - U^T: A[0, 1] = -w, A[1, 0] = w
    rope = posenc.build("rope", head_dim=DH, layout="interleaved")
    torch.manual_seed(0)
    q, k = torch.randn(B, 4, 5, DH), torch.randn(B, 2, 9, DH)
    qp, kp = torch.randint(0, 3000, (B, 5)), torch.randint(0, 3000, (B, 9))
    for a, b in zip(enc.rotate(q, k, qp, kp), rope.rotate(q, k, qp, kp), strict=True):
        torch.testing.assert_close(a, b, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(enc.angles(qp[0]), rope.angles(qp[0]).abs(), atol=1e-9, rtol=1e-9)


def rodrigues(raw, pos):
    """exp(K) of the 3x3 skew K = sum_a p_a (U_a - U_a^T), by Rodrigues' formula:
    I + sin(t)/t K + (1 - cos t)/t^2 K^2, t = |(K[2][1], K[0][2], K[1][0])|."""
    K = [[0.0] * 3 for _ in range(3)]
    for a, p in enumerate(pos):
        for i in range(3):
            for j in range(i + 1, 3):
                K[i][j] += p * raw[a][i][j]
                K[j][i] -= p * raw[a][i][j]
    t = math.sqrt(K[2][1] ** 2 + K[0][2] ** 2 + K[1][0] ** 2)
    K2 = [[sum(K[i][m] * K[m][j] for m in range(3)) for j in range(3)] for i in range(3)]
    s, c = math.sin(t) / t, (1 - math.cos(t)) / t**2
    return [[(i == j) + s * K[i][j] + c * K2[i][j] for j in range(3)] for i in range(3)]


@pytest.mark.parametrize("axes", [1, 2, 3])
def test_three_by_three_blocks_follow_rodrigues(axes):
    torch.manual_seed(axes)
    enc = LieRE(head_dim=DH, block_dim=3, axes=axes)  # 2 blocks of 3, channels 6, 7 pass
    pos = torch.rand(4, axes, dtype=torch.float64) * 5
    q = torch.randn(1, 1, 4, DH, dtype=torch.float64)
    rq, _ = enc.rotate(q, q, pos[:, 0] if axes == 1 else pos, pos[:, 0] if axes == 1 else pos)
    for t in range(4):
        for b in range(2):
            raw = enc.generators[:, b].tolist()
            R = torch.tensor(rodrigues(raw, pos[t].tolist()), dtype=torch.float64)
            want = R @ q[0, 0, t, 3 * b : 3 * b + 3]
            torch.testing.assert_close(rq[0, 0, t, 3 * b : 3 * b + 3], want, atol=1e-9, rtol=0)
    torch.testing.assert_close(rq[..., 6:], q[..., 6:])


@PROPS
@given(
    shift=st.integers(0, 10**4),
    seed=st.integers(0, 2**16),
    case=st.sampled_from([(1, None), (1, 4), (2, 2), (3, 2)]),  # (axes, block_dim)
)
def test_relative_for_one_axis_or_commuting_generators(shift, seed, case):
    """R(i)^T R(j) = R(j - i) when the generators commute: one axis, or 2x2 blocks."""
    axes, block = case
    torch.manual_seed(seed)
    enc = LieRE(head_dim=DH, heads=H, axes=axes, block_dim=block, position_scale=0.01)
    q, k = torch.randn(1, H, 3, DH), torch.randn(1, 1, 5, DH)
    kp = torch.randint(0, 500, (5, axes)) if axes > 1 else torch.randint(0, 500, (5,))
    qp = kp[:3]
    a, b = scores(enc, q, k, qp, kp), scores(enc, q, k, qp + shift, kp + shift)
    torch.testing.assert_close(a, b, atol=2e-4, rtol=2e-4)


def test_not_relative_for_non_commuting_generators():
    """Two axes, one 4x4 block: exp(-A(p)) exp(A(m)) != exp(A(m - p)), so shifting both
    positions by (3, 0) changes the scores; with A_2 = A_1 / 2 (commuting) it does not."""
    torch.manual_seed(0)
    enc = LieRE(head_dim=4, axes=2, position_scale=0.1)
    A1, A2 = (posenc.functional.rotary_learned.skew(g) for g in enc.generators.detach()[:, 0])
    assert (A1 @ A2 - A2 @ A1).abs().max() > 1.0  # they do not commute
    q, k = torch.randn(1, 1, 4, 4), torch.randn(1, 1, 6, 4)
    kp = torch.randint(0, 30, (6, 2))
    qp, s = kp[:4], torch.tensor([3, 0])
    change = (scores(enc, q, k, qp, kp) - scores(enc, q, k, qp + s, kp + s)).abs().max()
    assert change > 0.05
    with torch.no_grad():
        enc.generators[1] = enc.generators[0] / 2
    change = (scores(enc, q, k, qp, kp) - scores(enc, q, k, qp + s, kp + s)).abs().max()
    assert change < 1e-4


def test_rotations_are_orthogonal_and_scale_positions():
    torch.manual_seed(0)
    enc = LieRE(head_dim=DH, axes=2, block_dim=3, train_len=50)
    assert enc.position_scale == pytest.approx(1 / 50)
    R = enc.rotations(torch.randint(0, 100, (7, 2)), torch.float64)  # [1, 1, 7, 2, 3, 3]
    eye = torch.eye(3, dtype=torch.float64).expand_as(R)
    torch.testing.assert_close(R.transpose(-1, -2) @ R, eye)
    unscaled = LieRE(head_dim=DH, axes=2, block_dim=3)
    with torch.no_grad():
        unscaled.generators.copy_(enc.generators)
    pos = torch.randint(0, 100, (7, 2))
    torch.testing.assert_close(enc.rotations(pos, torch.float64),
                               unscaled.rotations(pos.double() / 50, torch.float64))  # fmt: skip


def test_per_head_generators_and_grouped_keys():
    torch.manual_seed(0)
    enc = LieRE(head_dim=DH, heads=H, per_head=True)
    assert enc.generators.shape == (1, H, DH, DH)
    q = torch.randn(1, 1, 3, DH).expand(1, H, 3, DH)  # the same vector in both heads
    rq, _ = enc.rotate(q, q, torch.arange(3), torch.arange(3))
    assert not torch.allclose(rq[:, 0, 1:], rq[:, 1, 1:])  # each head its own rotation
    torch.testing.assert_close(rq[:, 0, 0], rq[:, 1, 0])  # position 0: the identity
    with pytest.raises(ValueError, match="per_head=True"):
        enc.rotate(q, q[:, :1], torch.arange(3), torch.arange(3))


@pytest.mark.parametrize(("axes", "per_head"), [(1, True), (2, False), (3, True)])
def test_backends_agree_cached_decoding_and_training(axes, per_head):
    torch.manual_seed(0)
    kw = {"axes": axes, "block_dim": 4, "per_head": per_head}
    enc = posenc.build("liere", dim=4 * DH, heads=4, head_dim=DH, train_len=32, **kw)
    kv = 4 if per_head else 2
    q, k, v = torch.randn(B, 4, 6, DH), torch.randn(B, kv, 6, DH), torch.randn(B, kv, 6, DH)
    pos = torch.randint(0, 40, (B, 6, axes) if axes > 1 else (B, 6)).sort(1).values
    ref = posenc.attention(q, k, v, enc, pos, pos, backend="eager")
    for backend in ("sdpa", "chunked", "auto"):
        out = posenc.attention(q, k, v, enc, pos, pos, backend=backend)
        torch.testing.assert_close(out, ref, atol=1e-5, rtol=1e-5)
    ref.sum().backward()
    assert enc.generators.grad.abs().sum() > 0
    model = posenc.TransformerLM(11, 32, 2, 2, encoding="liere", encoding_kwargs=kw, max_len=64)
    tokens, _ = torch.randint(0, 11, (B, 5)), model.eval()
    out, logits = model.generate(tokens, max_new_tokens=3, return_logits=True)
    with torch.no_grad():
        torch.testing.assert_close(logits, model(out[:, :-1])[:, 4:], atol=1e-4, rtol=1e-4)


@pytest.mark.parametrize(
    ("kwargs", "word"),
    [
        ({"head_dim": None}, "head dim"),
        ({"axes": 0}, "axes"),
        ({"block_dim": 1}, "block_dim"),
        ({"block_dim": 9}, "block_dim"),
        ({"per_head": True, "heads": None}, "heads"),
        ({"per_head": "no"}, "per_head"),
        ({"position_scale": 0.0}, "position_scale"),
    ],
)
def test_bad_arguments_name_the_parameter(kwargs, word):
    with pytest.raises((ValueError, TypeError), match=word):
        posenc.build("liere", **{"head_dim": DH, "heads": H, **kwargs})
