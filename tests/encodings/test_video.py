"""posenc.encodings.rotary_mrope / posenc.functional.video: VideoRoPE, HoPE and VRoPE against
their reference code (golden tensors written by tests/golden/make_video.py from the
repositories' own functions), the frequency allocation and layouts each paper assigns
(hypothesis), bad input."""

from pathlib import Path

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import posenc
from posenc.functional.video import (
    HOPE_SCALES,
    diagonal_positions,
    videorope_axes,
    vrope_axes,
    vrope_positions,
    vrope_streams,
)

GOLDEN = Path(__file__).parents[1] / "golden" / "video.pt"
PROPS = settings(max_examples=25, deadline=None)
DIAGONAL = ("videorope", "hope")


@pytest.fixture(scope="module")
def golden():
    return torch.load(GOLDEN, weights_only=True)


def grids(g):
    return g["token_types"], g["image_grid_thw"], g["video_grid_thw"], g["attention_mask"]


# --------------------------------------------------------------------- parity (reference run)


@pytest.mark.parametrize("scale", [1.0, 2.0])
def test_diagonal_positions_match_videorope_get_t_scale_rope_index(golden, scale):
    """Reference run: VideoRoPE's get_t_scale_rope_index on two left-padded rows (a video and an
    image between text; a video right after the first token, h and w below zero) gives our
    diagonal_positions exactly, for its temporal spacing 2 and for 1."""
    types, images, videos, mask = grids(golden)
    ours = diagonal_positions(types, images, videos, temporal_scale=scale, attention_mask=mask)
    assert ours.dtype == torch.int64
    ref = golden[f"videorope/positions/{scale}"].permute(1, 2, 0)  # [3, B, T] -> [B, T, 3]
    assert torch.equal(ours.double(), ref.double())


@pytest.mark.parametrize("scale", [0.75, 1.5])
def test_diagonal_positions_match_hope_get_dynamic_rope_index(golden, scale):
    """Reference run: HoPE's get_dynamic_rope_index with one choice of spacing (its draw made
    deterministic) gives diagonal_positions with that choice, fractional indices included."""
    types, images, videos, mask = grids(golden)
    ours = diagonal_positions(types, images, videos, temporal_scale=[scale], attention_mask=mask)
    assert ours.dtype == torch.float32
    assert torch.equal(ours, golden[f"hope/positions/{scale}"].permute(1, 2, 0))


def test_vrope_positions_match_vrope_generate_nd_positions(golden):
    """Reference run: VRoPE's own VRoPE object (its per-channel position ids [B, T, Dh/2],
    left-padded by its pad_position_ids) equals our four streams spread over the pairs."""
    types, images, videos, mask = grids(golden)
    ours = vrope_positions(types, images, videos, attention_mask=mask)
    for head_dim in (16, 12):
        ref = golden[f"vrope/rotate/{head_dim}"]["positions"]
        assert torch.equal(vrope_streams(ours)[..., vrope_axes(head_dim // 2)], ref)


@pytest.mark.parametrize("name", ["videorope", "hope", "vrope"])
@pytest.mark.parametrize("head_dim", [16, 12])
def test_rotation_matches_the_reference(golden, name, head_dim):
    """Reference run: the repositories' rotary application (VideoRoPE's
    apply_m_modify_multimodal_rotary_pos_emb, HoPE's apply_hybrid_multimodal_rotary_pos_emb,
    VRoPE's per-channel ids through RoPE's rotate_half) on random q, k in float64, with a
    section whose h and w differ and bases 1e4 / 1e6: posenc's float32 within 1e-5."""
    ref = golden[f"{name}/rotate/{head_dim}"]
    types, images, videos, mask = grids(golden)
    if name == "vrope":
        pos = vrope_positions(types, images, videos, attention_mask=mask)
        enc = posenc.build(name, head_dim=head_dim, base=ref["base"])
    else:
        pos = golden[f"{name}/positions/{2.0 if name == 'videorope' else 1.5}"].permute(1, 2, 0)
        enc = posenc.build(name, head_dim=head_dim, base=ref["base"], mrope_section=ref["section"])
    q, k = enc.rotate(ref["q"], ref["k"], pos, pos)
    assert (q - ref["q_out"]).abs().max() <= 1e-5
    assert (k - ref["k_out"]).abs().max() <= 1e-5


# ------------------------------------------------------------------ frequency allocation


@st.composite
def sections(draw):
    half = draw(st.integers(2, 24))
    t = draw(st.integers(0, half))
    h = draw(st.integers(0, half - t))
    return [t, h, half - t - h]


def moved_pairs(enc, axis: int, P: int) -> set[int]:
    """The rotary pairs whose angle changes when only position axis `axis` moves."""
    pos = torch.randint(0, 50, (4, P))
    moved = pos.clone()
    moved[:, axis] += torch.randint(1, 20, (4,))
    diff = (enc.angles(moved) - enc.angles(pos)).abs().amax(0)
    return {j for j, d in enumerate(diff.tolist()) if d > 0}


@PROPS
@given(sections())
def test_videorope_time_takes_the_lowest_frequencies(section):
    """Hand-derived (paper, LTA): with section (t, h, w), only the last t pairs - the lowest
    frequencies - follow time; the h + w before them alternate h, w, h, w, ... Each pair's
    angle is its axis' position times RoPE's base^(-2j / Dh)."""
    t, h, w = section
    enc = posenc.build("videorope", head_dim=2 * sum(section), mrope_section=section)
    half = sum(section)
    assert moved_pairs(enc, 0, 3) == set(range(h + w, half))
    assert moved_pairs(enc, 1, 3) == set(range(0, h + w, 2))
    assert moved_pairs(enc, 2, 3) == set(range(1, h + w, 2))
    pos = torch.randint(-30, 60, (5, 3))
    inv_freq = 10000.0 ** (-torch.arange(half, dtype=torch.float64) * 2 / (2 * half))
    axes = [1 + j % 2 if j < h + w else 0 for j in range(half)]  # the paper's allocation
    expect = torch.stack([pos[:, a].double() * inv_freq[j] for j, a in enumerate(axes)], -1)
    # RoPE's frequencies are float32 (as transformers'): within 1e-6 of the float64 formula
    torch.testing.assert_close(enc.angles(pos), expect, rtol=1e-6, atol=1e-9)
    assert videorope_axes(section) == axes


@PROPS
@given(sections())
def test_hope_time_has_frequency_zero(section):
    """Hand-derived (paper, HFA): HoPE's temporal pairs do not turn at any position (cos 1,
    sin 0), so moving the time axis moves nothing; h and w as VideoRoPE's."""
    t, h, w = section
    enc = posenc.build("hope", head_dim=2 * sum(section), mrope_section=section)
    ref = posenc.build("videorope", head_dim=2 * sum(section), mrope_section=section)
    assert moved_pairs(enc, 0, 3) == set()
    pos = torch.randint(-30, 60, (6, 3))
    angles = enc.angles(pos)
    assert torch.equal(angles[:, h + w :], torch.zeros(6, t, dtype=torch.float64))
    torch.testing.assert_close(angles[:, : h + w], ref.angles(pos)[:, : h + w])


@PROPS
@given(st.integers(1, 24))
def test_vrope_pair_j_follows_stream_j_mod_4(half):
    """Hand-derived (reference's channel allocation): pair j turns by stream j % 4 of (a, b, c,
    b + c - a) times RoPE's base^(-2j / Dh): moving a moves streams 0 and 3, b 1 and 3, c 2
    and 3."""
    enc = posenc.build("vrope", head_dim=2 * half)
    for s in range(3):
        assert moved_pairs(enc, s, 3) == {j for j in range(half) if j % 4 in (s, 3)}
    pos = torch.randint(0, 60, (5, 3))
    a, b, c = pos.double().unbind(-1)
    streams = [a, b, c, b + c - a]
    inv_freq = 10000.0 ** (-torch.arange(half, dtype=torch.float64) * 2 / (2 * half))
    expect = torch.stack([streams[j % 4] * inv_freq[j] for j in range(half)], -1)
    torch.testing.assert_close(enc.angles(pos), expect, rtol=1e-6, atol=1e-9)


@pytest.mark.parametrize("name", ["videorope", "hope", "vrope"])
def test_text_positions_are_rope(name):
    """Text tokens (one index on every axis): videorope and vrope are plain RoPE; hope is RoPE
    with its temporal pairs (the last t, default section) unrotated."""
    torch.manual_seed(0)
    enc = posenc.build(name, head_dim=32)
    q, k = torch.randn(2, 3, 9, 32), torch.randn(2, 3, 9, 32)
    pos = torch.arange(9)
    grid = pos[:, None].expand(9, enc.position_dims)
    q2, k2 = enc.rotate(q, k, grid, grid)
    q_ref, k_ref = posenc.build("rope", head_dim=32).rotate(q, k, pos, pos)
    keep = []  # channels of unrotated pairs: HoPE's temporal pairs (pair j: j, j + 16)
    if name == "hope":
        t = enc.section(32)[0]
        keep = [*range(16 - t, 16), *range(32 - t, 32)]
        torch.testing.assert_close(q2[..., keep], q[..., keep], rtol=0, atol=0)
        torch.testing.assert_close(k2[..., keep], k[..., keep], rtol=0, atol=0)
    spin = [c for c in range(32) if c not in keep]
    torch.testing.assert_close(q2[..., spin], q_ref[..., spin], rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(k2[..., spin], k_ref[..., spin], rtol=1e-5, atol=1e-5)


@PROPS
@given(
    st.sampled_from(["videorope", "hope", "vrope"]),
    st.integers(0, 10**4),
    st.lists(st.integers(-50, 50), min_size=4, max_size=4),
)
def test_scores_depend_on_each_axis_offset_only(name, seed, shift):
    """Relative property within each axis: shifting every query and key position by the same
    vector (any axes, independently) leaves every score q.k unchanged."""
    torch.manual_seed(seed)
    enc = posenc.build(name, head_dim=16)
    P = enc.position_dims
    q = torch.randn(1, 1, 5, 16, dtype=torch.float64)
    k = torch.randn(1, 1, 7, 16, dtype=torch.float64)
    qp, kp = torch.randint(0, 100, (5, P)), torch.randint(0, 100, (7, P))
    d = torch.tensor(shift[:P]) + 50  # positions stay >= 0

    def scores(q_pos, k_pos):
        q2, k2 = enc.rotate(q, k, q_pos, k_pos)
        return q2 @ k2.transpose(-1, -2)  # [1, 1, 5, 7]

    torch.testing.assert_close(scores(qp + d, kp + d), scores(qp, kp), rtol=1e-9, atol=1e-9)


# ---------------------------------------------------------------------------------- layouts


@st.composite
def layouts(draw):
    """A row of text runs and vision blocks: token types [T], image / video grids, and the
    blocks as (kind, merged (t, h, w), first token)."""
    types, images, videos, blocks = [0] * draw(st.integers(1, 4)), [], [], []
    for _ in range(draw(st.integers(1, 3))):
        kind = draw(st.sampled_from([1, 2]))
        t = 1 if kind == 1 else draw(st.integers(1, 4))
        h, w = draw(st.integers(1, 5)), draw(st.integers(1, 5))
        (images if kind == 1 else videos).append([t, 2 * h, 2 * w])
        blocks.append((kind, (t, h, w), len(types)))
        types += [kind] * (t * h * w) + [0] * draw(st.integers(1, 3))
    grid = lambda g: torch.tensor(g) if g else None  # noqa: E731
    return torch.tensor(types), grid(images), grid(videos), blocks


@PROPS
@given(layouts(), st.sampled_from([1, 2, 0.5, 1.25]))
def test_diagonal_layout(layout, scale):
    """VideoRoPE's layout (paper, DL + ATS): a block starts right after the text before it;
    frame i sits at time start + i * delta; its rows and columns are centred on that time;
    text after the block goes on from the last frame's time + 1."""
    types, images, videos, blocks = layout
    pos = diagonal_positions(types, images, videos, temporal_scale=scale).double()
    for _, (t, h, w), at in blocks:
        n = t * h * w
        block = pos[at : at + n].reshape(t, h, w, 3)
        start = pos[at - 1, 0] + 1
        times = start + torch.arange(t, dtype=torch.float64) * scale
        assert torch.equal(block[..., 0], times[:, None, None].expand(t, h, w))
        rows = torch.arange(h, dtype=torch.float64) - (h - 1) // 2
        cols = torch.arange(w, dtype=torch.float64) - (w - 1) // 2
        assert torch.equal(block[..., 1] - block[..., 0], rows[None, :, None].expand(t, h, w))
        assert torch.equal(block[..., 2] - block[..., 0], cols[None, None, :].expand(t, h, w))
        assert torch.equal(pos[at + n], torch.full((3,), float(times[-1]) + 1, dtype=torch.float64))
    text = types == 0
    assert torch.equal(pos[text, 0], pos[text, 1]) and torch.equal(pos[text, 0], pos[text, 2])


@PROPS
@given(layouts())
def test_vrope_layout_is_symmetric_and_continuous(layout):
    """VRoPE's layout: a block's indices run from right after the text before it to right
    before the text after it (continuity); each frame takes h + w - 1 indices; the four
    streams read the same rotated grid from its four corners (r + c, r + c', r' + c, r' + c')."""
    types, images, videos, blocks = layout
    pos = vrope_positions(types, images, videos)
    for _, (t, h, w), at in blocks:
        n = t * h * w
        block = vrope_streams(pos[at : at + n]).reshape(t, h, w, 4)
        assert block.min() == pos[at - 1, 0] + 1
        assert block.max() + 1 == pos[at + n, 0]
        for i in range(t):
            frame = block[i] - pos[at - 1, 0] - 1 - i * (h + w - 1)  # [h, w, 4] from 0
            assert frame.min() == 0 and frame.max() == h + w - 2
            r, c = torch.arange(h)[:, None], torch.arange(w)[None, :]
            assert torch.equal(frame[..., 0], (r + c).expand(h, w))
            assert torch.equal(frame[..., 1], frame[..., 0].flip(1))
            assert torch.equal(frame[..., 2], frame[..., 0].flip(0))
            assert torch.equal(frame[..., 3], frame[..., 0].flip(0, 1))
    text = types == 0
    assert (pos[text] == pos[text, :1]).all()


def test_dynamic_temporal_scaling_draws_a_spacing_per_video():
    """HoPE's DTS: a list of spacings draws one per block from the generator (reproducible);
    every video's frame spacing is one of the choices, and more than one is drawn."""
    types = torch.tensor(([0] + [2] * 3 * 4) * 12 + [0])
    videos = torch.tensor([[3, 4, 4]] * 12)
    draw = lambda seed: diagonal_positions(  # noqa: E731
        types, video_grid_thw=videos, temporal_scale=list(HOPE_SCALES),
        generator=torch.Generator().manual_seed(seed),
    )  # fmt: skip
    pos = draw(0)
    assert torch.equal(pos, draw(0))
    spacings = {float(pos[2 + 13 * v + 4, 0] - pos[1 + 13 * v, 0]) for v in range(12)}
    assert spacings <= set(HOPE_SCALES) and len(spacings) > 1


# -------------------------------------------------------------------------------- bad input


@pytest.mark.parametrize(
    "kwargs, error, match",
    [
        ({"temporal_scale": 0}, ValueError, "temporal_scale"),
        ({"temporal_scale": -1.0}, ValueError, "temporal_scale"),
        ({"temporal_scale": []}, ValueError, "temporal_scale"),
        ({"temporal_scale": "2"}, TypeError, "temporal_scale"),
        ({"video_grid_thw": torch.tensor([[2, 4, 6]])}, ValueError, "video_grid_thw"),
        ({"spatial_merge_size": 0}, ValueError, "spatial_merge_size"),
        ({"attention_mask": torch.ones(3)}, ValueError, "attention_mask"),
    ],
)
def test_layouts_reject_bad_input(kwargs, error, match):
    types = torch.tensor([0, 2, 2, 2, 2, 0])
    args = {"video_grid_thw": torch.tensor([[1, 4, 4]])} | kwargs
    with pytest.raises(error, match=match):
        diagonal_positions(types, **args)
    if "temporal_scale" not in kwargs:
        with pytest.raises(error, match=match):
            vrope_positions(types, **args)


def test_encodings_reject_bad_input():
    with pytest.raises(ValueError, match="mrope_section"):
        posenc.build("videorope", head_dim=16, mrope_section=[2, 2, 2])
    with pytest.raises(ValueError, match="mrope_section"):
        posenc.build("hope", head_dim=16, mrope_section=[2, 3])
    with pytest.raises(ValueError, match="head_dim"):
        posenc.build("vrope", head_dim=7)
    enc = posenc.build("vrope", head_dim=8)
    q = torch.randn(1, 1, 3, 8)
    with pytest.raises(ValueError, match="trailing axis of size 3"):
        enc.rotate(q, q, torch.zeros(3, 4), torch.zeros(3, 4))
