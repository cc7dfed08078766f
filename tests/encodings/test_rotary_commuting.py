"""posenc.encodings.rotary_lie: ComRoPE against golden rotations from the authors'
reference code (tests/golden/make_comrope.py), its scores depend only on the offset for
random N-D positions (hypothesis), its angle matrices commute, and bad input."""

from pathlib import Path

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import posenc
from posenc.encodings.rotary_lie import ComRoPE

PROPS = settings(max_examples=12, deadline=None)
GOLDEN = Path(__file__).parents[1] / "golden" / "comrope.pt"


def scores(enc, q, k, qp, kp):
    rq, rk = enc.rotate(q, k, qp, kp)
    return rq @ rk.repeat_interleave(q.shape[1] // k.shape[1], 1).transpose(-1, -2)


@pytest.mark.parametrize("case", range(4))
def test_matches_the_authors_rotations(case):
    """Parity with the reference code (golden file): the authors' ComRoPEAPAttention /
    ComRoPELDAttention get_rotation_matrix R(p), applied to random q at random 2-D and 3-D
    positions, equals posenc's rotate with their parameters loaded."""
    c = torch.load(GOLDEN)[case]
    enc = ComRoPE(heads=c["heads"], head_dim=c["head_dim"], axes=c["axes"],
                  variant=c["variant"], block_dim=c["block_dim"], per_head=True)  # fmt: skip
    with torch.no_grad():
        enc.weight.copy_(c["freqs"].flatten(0, 2))  # [H, 1, G, g, g] -> [H * G, g, g]
        if c["variant"] == "ld":
            enc.multiplier.copy_(c["multiplier"][0, :, :, 0, 0])  # [1, P, G, 1, 1] -> [P, G]
    q, pos = c["q"], c["positions"]
    rq, rk = enc.rotate(q, q, pos, pos)
    torch.testing.assert_close(rq, c["rotated"], atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(rk, c["rotated"], atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("variant", ["ap", "ld"])
@pytest.mark.parametrize("axes", [1, 2, 3])
def test_the_angle_matrices_commute_and_are_skew(variant, axes):
    torch.manual_seed(axes)
    enc = ComRoPE(heads=2, head_dim=12, axes=axes, variant=variant, block_dim=2 if axes == 3
                  else 3 if axes == 1 else 6, per_head=True)  # fmt: skip
    A = enc.generator_tensor()  # [P, G, g, g] float64
    torch.testing.assert_close(A, -A.transpose(-1, -2))
    assert A.abs().sum() > 0
    for a in range(axes):
        for b in range(axes):
            torch.testing.assert_close(A[a] @ A[b], A[b] @ A[a], atol=1e-10, rtol=1e-10)


@PROPS
@given(
    variant=st.sampled_from(["ap", "ld"]),
    axes=st.integers(1, 3),
    block_dim=st.sampled_from([2, 3, 4]),
    shift=st.lists(st.floats(0, 20), min_size=3, max_size=3),
    seed=st.integers(0, 2**16),
)
def test_scores_depend_only_on_the_offset(variant, axes, block_dim, shift, seed):
    """Shifting every query and key position by the same vector leaves q.k unchanged, for
    random real N-D positions: R(p)^T R(m) = R(m - p) (the paper's RoPE-equivariance)."""
    torch.manual_seed(seed)
    enc = ComRoPE(heads=4, head_dim=axes * block_dim * 2, axes=axes, variant=variant,
                  block_dim=block_dim, per_head=True).double()  # fmt: skip
    q, k = torch.randn(2, 4, 3, enc.head_dim).double(), torch.randn(2, 4, 5, enc.head_dim).double()
    qp = torch.rand(2, 3, axes).double() * 10
    kp = torch.rand(2, 5, axes).double() * 10
    if axes == 1:
        qp, kp = qp[..., 0], kp[..., 0]
    s = torch.tensor(shift[:axes], dtype=torch.float64)
    s = s[0] if axes == 1 else s
    base = scores(enc, q, k, qp, kp)
    torch.testing.assert_close(scores(enc, q, k, qp + s, kp + s), base, atol=1e-8, rtol=1e-8)
    # explicitly: q^T exp(sum_a (m - p)_a A_a) k, with the full block-diagonal A_a per head
    A = torch.stack([torch.block_diag(*blocks) for blocks in enc.generator_tensor().double()
                     .unflatten(1, (4, -1)).flatten(0, 1)]).unflatten(0, (axes, 4))  # fmt: skip
    off = (kp[:, None, :] - qp[:, :, None]).reshape(2, 3, 5, axes)  # [B, Tq, Tk, P]
    arg = off[:, None, :, :, :, None, None] * A.transpose(0, 1)[None, :, None, None]
    R = torch.linalg.matrix_exp(arg.sum(4))  # [B, H, Tq, Tk, Dh, Dh]
    want = torch.einsum("bhix,bhijxy,bhjy->bhij", q, R, k)
    torch.testing.assert_close(base, want, atol=1e-8, rtol=1e-8)


def test_rotations_are_orthogonal_and_grouped_keys_work():
    torch.manual_seed(0)
    enc = ComRoPE(dim=32, heads=4, axes=2, variant="ld", block_dim=4)
    rot = enc.rotations(torch.rand(7, 2) * 9, torch.float64)  # [1, 1, 7, G, g, g]
    eye = torch.eye(4, dtype=torch.float64).expand_as(rot)
    torch.testing.assert_close(rot @ rot.transpose(-1, -2), eye, atol=1e-9, rtol=1e-9)
    q, k, v = torch.randn(2, 4, 6, 8), torch.randn(2, 2, 6, 8), torch.randn(2, 2, 6, 8)
    pos = torch.rand(6, 2) * 5
    out = {b: posenc.attention(q, k, v, enc, pos, pos, backend=b) for b in ("eager", "sdpa")}
    torch.testing.assert_close(out["sdpa"], out["eager"], atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        (dict(head_dim=8, variant="xy"), "variant must be one of ap, ld"),
        (dict(head_dim=8, axes=3, block_dim=2), "multiple of block_dim \\* axes"),
        (dict(head_dim=9, variant="ld", block_dim=2), "multiple of block_dim=2"),
        (dict(head_dim=8, block_dim=1), "block_dim"),
        (dict(head_dim=8, init_std=0), "init_std"),
        (dict(head_dim=8, per_head=True), "per_head=True needs heads"),
        (dict(), "needs the head dim"),
    ],
)
def test_bad_arguments_name_the_parameter(kwargs, match):
    with pytest.raises(ValueError, match=match):
        ComRoPE(**kwargs)


def test_per_head_refuses_grouped_keys():
    enc = ComRoPE(heads=4, head_dim=8, per_head=True)
    with pytest.raises(ValueError, match="per_head=True"):
        enc.rotate(torch.randn(1, 4, 3, 8), torch.randn(1, 2, 3, 8), torch.arange(3),
                   torch.arange(3))  # fmt: skip
