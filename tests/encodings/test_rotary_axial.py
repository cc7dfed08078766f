"""posenc.encodings.rotary_axial: rope_nd against rotary-embedding-torch's axial mode; one
axis is rope, two axes rope_2d; shift invariance per axis; 3-D / 4-D positions end to end."""

import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import posenc
from posenc.encodings.rotary_axial import RoPEND

PROPS = settings(max_examples=20, deadline=None)
B, H, DH = 2, 3, 16


def grid(sizes, values):
    """[N, P] cartesian product of per-axis coordinates (row-major, as get_axial_freqs)."""
    axes = [values(n) for n in sizes]
    return torch.stack(torch.meshgrid(*axes, indexing="ij"), -1).reshape(-1, len(sizes))


@pytest.mark.parametrize("freqs", ["lang", "pixel"])
@pytest.mark.parametrize("sizes", [(7,), (3, 5), (2, 3, 4)])
@pytest.mark.parametrize("offset", [1.0, 0.0, -3.0])
def test_matches_rotary_embedding_torch_axial(sizes, freqs, offset):
    """Negative coordinates too (pixel: linspace(-1, 1) as documented, offset 0 or -3), as
    rotary-embedding-torch takes them."""
    from rotary_embedding_torch import RotaryEmbedding, apply_rotary_emb

    P, R = len(sizes), 12  # R < Dh: the last channels pass through
    ref = RotaryEmbedding(dim=R // P, freqs_for=freqs, max_freq=7, cache_if_possible=False)
    offsets = (offset,) * P  # pixel coordinates linspace(-1, 1) + offset
    table = ref.get_axial_freqs(*sizes, offsets=offsets).reshape(-1, R)  # [N, R]
    if freqs == "pixel":
        pos = grid(sizes, lambda n: torch.linspace(-1, 1, n) + offset)
    else:
        pos = grid(sizes, lambda n: torch.arange(n) + offset)
    pos = pos[:, 0] if P == 1 else pos
    torch.manual_seed(0)
    q = torch.randn(B, H, len(table), DH)
    enc = RoPEND(head_dim=DH, axes=P, rotary_dim=R, freqs=freqs, max_freq=7, layout="interleaved")
    got, _ = enc.rotate(q, q, pos, pos)
    torch.testing.assert_close(got, apply_rotary_emb(table, q), atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("layout", ["half", "interleaved"])
def test_one_axis_is_rope_and_two_axes_are_rope_2d(layout):
    torch.manual_seed(0)
    q, k = torch.randn(B, H, 5, DH), torch.randn(B, 1, 9, DH)
    qp, kp = torch.rand(B, 5) * 100, torch.rand(B, 9) * 100  # [B, T] float positions
    rope = posenc.build("rope", head_dim=DH, layout=layout, rotary_dim=12)
    nd = posenc.build("rope_nd", head_dim=DH, layout=layout, rotary_dim=12)
    for a, b in zip(nd.rotate(q, k, qp, kp), rope.rotate(q, k, qp, kp), strict=True):
        torch.testing.assert_close(a, b, atol=1e-6, rtol=1e-6)
    torch.testing.assert_close(nd.angles(qp[0]), rope.angles(qp[0]))
    r2 = posenc.build("rope_2d", head_dim=DH, layout=layout, base=500.0)
    nd2 = posenc.build("rope_nd", head_dim=DH, layout=layout, base=500.0, axes=2)
    qp2, kp2 = torch.randint(0, 50, (5, 2)), torch.randint(0, 50, (9, 2))
    for a, b in zip(nd2.rotate(q, k, qp2, kp2), r2.rotate(q, k, qp2, kp2), strict=True):
        torch.testing.assert_close(a, b, atol=0, rtol=0)


@PROPS
@given(
    axes=st.integers(1, 4),
    shift=st.lists(st.integers(0, 10**6), min_size=4, max_size=4),
    seed=st.integers(0, 2**16),
)
def test_scores_depend_only_on_the_offset_along_each_axis(axes, shift, seed):
    g = torch.Generator().manual_seed(seed)
    q, k = torch.randn(1, 2, 4, DH, generator=g), torch.randn(1, 2, 6, DH, generator=g)
    qp = torch.randint(0, 100, (4, axes), generator=g)
    kp = torch.randint(0, 100, (6, axes), generator=g)
    s = torch.tensor(shift[:axes])
    if axes == 1:
        qp, kp, s = qp[:, 0], kp[:, 0], s[0]
    enc = RoPEND(head_dim=DH, axes=axes, rotary_dim=2 * axes * (DH // (2 * axes)))
    a = (lambda x, y: x @ y.transpose(-1, -2))(*enc.rotate(q, k, qp, kp))
    b = (lambda x, y: x @ y.transpose(-1, -2))(*enc.rotate(q, k, qp + s, kp + s))
    torch.testing.assert_close(a, b, atol=2e-4, rtol=1e-4)


@pytest.mark.parametrize("axes", [3, 4])
def test_multi_axis_backends_agree_and_cached_decoding_equals_the_full_forward(axes):
    torch.manual_seed(0)
    kw = {"axes": axes, "rotary_dim": 2 * axes * (DH // (2 * axes))}
    enc = posenc.build("rope_nd", dim=4 * DH, heads=4, head_dim=DH, **kw)
    q, k, v = torch.randn(B, 4, 6, DH), torch.randn(B, 2, 6, DH), torch.randn(B, 2, 6, DH)
    pos = torch.randint(0, 40, (B, 6, axes))  # [B, T, P]
    ref = posenc.attention(q, k, v, enc, pos, pos, backend="eager")
    for backend in ("sdpa", "chunked", "auto"):
        out = posenc.attention(q, k, v, enc, pos, pos, backend=backend)
        torch.testing.assert_close(out, ref, atol=1e-5, rtol=1e-5)
    model = posenc.TransformerLM(
        11, 32, 2, 2, encoding="rope_nd", encoding_kwargs=kw, max_len=64
    ).eval()
    tokens = torch.randint(0, 11, (B, 5))
    out, logits = model.generate(tokens, max_new_tokens=4, return_logits=True)
    with torch.no_grad():
        full = model(out[:, :-1])[:, 4:]
    torch.testing.assert_close(logits, full, atol=1e-4, rtol=1e-4)


def test_multi_axis_model_trains_a_step():
    torch.manual_seed(0)
    model = posenc.TransformerLM(11, 32, 1, 2, encoding="rope_nd", encoding_kwargs={"axes": 2})
    tokens = torch.randint(0, 11, (B, 8))
    loss = torch.nn.functional.cross_entropy(model(tokens).flatten(0, 1), tokens.flatten())
    loss.backward()
    assert math.isfinite(loss.item())
    assert model.tok_emb.weight.grad.abs().sum() > 0


@pytest.mark.parametrize(
    ("kwargs", "word"),
    [
        ({"axes": 0}, "axes"),
        ({"axes": 1.5}, "axes"),
        ({"axes": 3, "head_dim": 16}, "multiple of 6"),
        ({"freqs": "video"}, "freqs"),
        ({"max_freq": 0}, "max_freq"),
    ],
)
def test_bad_arguments_name_the_parameter(kwargs, word):
    with pytest.raises((ValueError, TypeError), match=word):
        posenc.build("rope_nd", **{"head_dim": 12, **kwargs})


def test_positions_without_the_axis_components_are_refused():
    enc = posenc.build("rope_nd", head_dim=12, axes=3)
    q = torch.randn(1, 1, 4, 12)
    with pytest.raises(ValueError, match="trailing axis of size 3"):
        enc.rotate(q, q, torch.arange(4), torch.arange(4))
