"""posenc.encodings.rotary_mrope / posenc.functional.mrope: multimodal RoPE against transformers'
Qwen2-VL (chunked) and Qwen3-VL (interleaved) rotary embeddings, mrope_positions against their
get_rope_index (Qwen2-VL, Qwen2.5-VL, Qwen3-VL) on random layouts; properties; bad input."""

import random

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import posenc
from posenc.encodings.rotary_mrope import MRoPE
from posenc.functional import mrope_angles, mrope_axes, mrope_positions, omni_positions
from posenc.functional.absolute import position_angles

LAYOUTS = {"chunked": False, "interleaved": True}


def random_section(rng, half):
    t = rng.randint(0, half)
    h = rng.randint(0, half - t)
    return [t, h, half - t - h]


# ----------------------------------------------------------------------------------- rotation


@pytest.fixture(scope="module")
def hf_mrope_module():
    """hf_mrope_module(Dh, base, section, interleaved) -> transformers' text rotary module:
    Qwen2-VL's (chunked sections) or Qwen3-VL's (interleaved)."""
    pytest.importorskip("transformers")
    from transformers import Qwen2VLTextConfig, Qwen3VLTextConfig
    from transformers.models.qwen2_vl import modeling_qwen2_vl as qwen2
    from transformers.models.qwen3_vl import modeling_qwen3_vl as qwen3

    def build(head_dim, base, section, interleaved):
        config = Qwen3VLTextConfig if interleaved else Qwen2VLTextConfig
        rope = {"rope_type": "default", "mrope_section": section, "rope_theta": base}
        rope |= {"mrope_interleaved": True} if interleaved else {}
        cfg = config(hidden_size=2 * head_dim, num_attention_heads=2, head_dim=head_dim,
                     rope_parameters=rope)  # fmt: skip
        module = qwen3.Qwen3VLTextRotaryEmbedding if interleaved else qwen2.Qwen2VLRotaryEmbedding
        return module(cfg), (qwen3 if interleaved else qwen2).apply_rotary_pos_emb

    return build


def hf_cos_sin64(module, position_ids):
    """transformers' cos, sin [B, T, Dh] for position_ids [3, B, T], angles in float64 (its
    forward takes them in float32), recomposed by the module's own section logic."""
    freqs = position_ids.double()[..., None] * module.inv_freq.double()  # [3, B, T, Dh/2]
    cos, sin = freqs.cos() * module.attention_scaling, freqs.sin() * module.attention_scaling
    return module.recomposition_frequencies(cos), module.recomposition_frequencies(sin)


@pytest.mark.parametrize("layout", LAYOUTS)
def test_rotation_matches_transformers(layout, hf_mrope_module):
    """Random head dims, bases and sections; [B, T, 3] positions up to 10^5 (t, h, w apart),
    grouped-query k: posenc's float32 q, k within 1e-5 of transformers' formula in float64."""
    rng, interleaved = random.Random(layout), LAYOUTS[layout]
    for trial in range(6):
        torch.manual_seed(trial)
        if trial == 0:  # the published models' head dim and sections
            head_dim, section = 128, [24, 20, 20] if interleaved else [16, 24, 24]
        else:
            head_dim = rng.randrange(8, 129, 2)
            section = random_section(rng, head_dim // 2)
        base = 10 ** rng.uniform(4, 6.5)
        module, apply = hf_mrope_module(head_dim, base, section, interleaved)
        pos = torch.randint(0, 10**5, (2, 7, 3))  # posenc's trailing axis
        cos, sin = hf_cos_sin64(module, pos.permute(2, 0, 1))  # transformers' [3, B, T]
        q, k = torch.randn(2, 4, 7, head_dim), torch.randn(2, 2, 7, head_dim)
        q_ref, _ = apply(q.double(), k.repeat_interleave(2, 1).double(), cos, sin)
        _, k_ref = apply(q[:, :2].double(), k.double(), cos, sin)
        enc = posenc.build("mrope", head_dim=head_dim, base=base, mrope_section=section,
                           mrope_interleaved=interleaved)  # fmt: skip
        q2, k2 = enc.rotate(q, k, pos, pos)
        assert q2.dtype == torch.float32
        assert (q2 - q_ref).abs().max() <= 1e-5, (layout, head_dim, section)
        assert (k2 - k_ref).abs().max() <= 1e-5, (layout, head_dim, section)


def test_defaults_are_qwen2_vl_and_qwen3_vl_sections():
    assert MRoPE(head_dim=128).section(128) == [16, 24, 24]
    assert MRoPE(head_dim=128, mrope_interleaved=True).section(128) == [24, 20, 20]
    assert mrope_axes([2, 3, 3], interleaved=False) == [0, 0, 1, 1, 1, 2, 2, 2]
    assert mrope_axes([3, 3, 2], interleaved=True) == [0, 1, 2, 0, 1, 2, 0, 1]
    # transformers' strided pattern: w's pair 8 would be past the 8 pairs, t takes the rest
    assert mrope_axes([2, 3, 3], interleaved=True) == [0, 1, 2, 0, 1, 2, 0, 1]
    # ERNIE-4.5-VL: section (h, w, t), h and w alternating, then t
    assert mrope_axes([3, 3, 2], hw_pairs=True) == [1, 2, 1, 2, 1, 2, 0, 0]


@pytest.mark.parametrize("layout", LAYOUTS)
def test_text_positions_are_plain_rope(layout):
    """t = h = w = p: every pair turns by p * w_j, RoPE's angles exactly."""
    enc = MRoPE(head_dim=32, mrope_section=[4, 6, 6], mrope_interleaved=LAYOUTS[layout])
    pos = torch.tensor([0, 3, 17, 10**6, 2**31 - 1])
    grid = pos[:, None].expand(-1, 3)
    assert torch.equal(enc.angles(grid), posenc.build("rope", head_dim=32).angles(pos))
    q = torch.randn(1, 2, 5, 32)
    rope_q, _ = posenc.build("rope", head_dim=32).rotate(q, q, pos, pos)
    torch.testing.assert_close(enc.rotate(q, q, grid, grid)[0], rope_q, atol=1e-6, rtol=0)


@pytest.mark.parametrize("layout", LAYOUTS)
def test_each_pair_follows_its_axis_and_scores_follow_the_3d_offset(layout):
    torch.manual_seed(0)
    section, interleaved = [3, 2, 3], LAYOUTS[layout]
    enc = MRoPE(head_dim=16, mrope_section=section, mrope_interleaved=interleaved)
    axes = torch.tensor(mrope_axes(section, interleaved))
    pos = torch.randint(0, 50, (6, 3))
    angles = enc.angles(pos)
    for axis in range(3):  # moving one axis turns exactly that axis' pairs
        moved = pos.clone()
        moved[:, axis] += 5
        changed = (enc.angles(moved) != angles).any(0)
        assert torch.equal(changed, axes == axis)
    q, k = torch.randn(1, 2, 6, 16, dtype=torch.float64), torch.randn(1, 2, 6, 16).double()
    shift = torch.tensor([7, 100, 3])
    q0, k0 = enc.rotate(q, k, pos, pos)
    q1, k1 = enc.rotate(q, k, pos + shift, pos + shift)  # the same 3-D offsets
    torch.testing.assert_close(q1 @ k1.transpose(-1, -2), q0 @ k0.transpose(-1, -2))


@settings(max_examples=40, deadline=None)
@given(st.integers(1, 5), st.integers(0, 2**31 - 1), st.data())
def test_mrope_angles_turn_each_pair_with_its_axis_for_any_number_of_axes(P, seed, data):
    """mrope_angles over positions [..., P] (mrope's 3 axes, VRoPE's 4 streams, any P): pair j
    gets position_angles of axis axes[j] at frequency j, in any order of the axes, float32
    (reduced) and float64 alike."""
    half = data.draw(st.integers(1, 12))
    axes = data.draw(st.lists(st.integers(0, P - 1), min_size=half, max_size=half))
    g = torch.Generator().manual_seed(seed)
    positions = torch.randint(-(10**6), 10**6, (2, 5, P), generator=g)  # [B, T, P]
    inv_freq = torch.rand(half, generator=g) + 1e-3  # [R/2]
    for dtype in (torch.float32, torch.float64):
        want = torch.stack(
            [position_angles(positions[..., a], inv_freq[j : j + 1], dtype)[..., 0]
             for j, a in enumerate(axes)], dim=-1,
        )  # fmt: skip
        got = mrope_angles(positions, inv_freq, axes, dtype)
        assert got.dtype == dtype and torch.equal(got, want)


# ---------------------------------------------------------------------------------- positions


@pytest.fixture(scope="module")
def hf_vl_models():
    """Tiny Qwen2-VL, Qwen2.5-VL and Qwen3-VL models (random weights, no download), for their
    get_rope_index; spatial_merge_size m, Qwen2.5's tokens_per_second tps."""
    pytest.importorskip("transformers")
    import transformers as tf

    text = dict(hidden_size=16, intermediate_size=32, num_hidden_layers=1, num_attention_heads=2,
                num_key_value_heads=1, vocab_size=50)  # fmt: skip
    vision = dict(depth=1, hidden_size=16, num_heads=2, out_hidden_size=16, intermediate_size=32)

    def build(kind, m, tps=2):
        if kind == "qwen2":
            v = dict(depth=1, embed_dim=16, hidden_size=16, num_heads=2, spatial_merge_size=m)
            return tf.Qwen2VLModel(tf.Qwen2VLConfig(text_config=text, vision_config=v))
        if kind == "qwen2.5":
            v = vision | dict(spatial_merge_size=m, tokens_per_second=tps)
            return tf.Qwen2_5_VLModel(tf.Qwen2_5_VLConfig(text_config=text, vision_config=v))
        v = vision | dict(spatial_merge_size=m, num_position_embeddings=16)
        v["deepstack_visual_indexes"] = []
        config = tf.Qwen3VLConfig(text_config=text | dict(head_dim=8), vision_config=v)
        return tf.Qwen3VLModel(config)

    return build


def random_layout(rng, m, rows, frames_apart=False):
    """token_types [B, T] (left-padded), attention_mask, image and video grids [N, 3]: text
    runs between image / video blocks of random merged grids. frames_apart: each video frame
    its own block with text (a timestamp) between, as Qwen3-VL lays videos out."""
    seqs, images, videos, frames = [], [], [], []
    for _ in range(rows):
        seq = [0] * rng.randint(1, 3)
        for _ in range(rng.randint(1, 4)):
            kind = rng.choice([1, 2])
            t = 1 if kind == 1 else rng.randint(1, 4)
            thw = [t, m * rng.randint(1, 3), m * rng.randint(1, 3)]
            (images if kind == 1 else videos).append(thw)
            plane = thw[1] * thw[2] // m**2
            if kind == 2 and frames_apart:
                frames += [[1, thw[1], thw[2]]] * t
                seq += ([2] * plane + [0] * rng.randint(1, 2)) * t
            else:
                seq += [kind] * (t * plane) + [0] * rng.randint(1, 3)
        seqs.append(seq)
    T = max(map(len, seqs))
    types = torch.tensor([[0] * (T - len(s)) + s for s in seqs])
    mask = torch.tensor([[0] * (T - len(s)) + [1] * len(s) for s in seqs])
    grid = lambda g: torch.tensor(g) if g else None  # noqa: E731
    return types, mask, grid(images), grid(videos), grid(frames)


@pytest.mark.parametrize("kind", ["qwen2", "qwen2.5", "qwen3"])
def test_positions_match_get_rope_index(kind, hf_vl_models):
    """Random text / image / video layouts, left padding, merge sizes 1 and 2; Qwen2.5-VL with
    per-video seconds per grid (tokens_per_second * seconds spaces the time index); Qwen3-VL
    with each frame its own grid."""
    rng = random.Random(kind)
    for trial in range(8):
        m, tps = rng.choice([1, 2]), rng.choice([1, 2, 4])
        model = hf_vl_models(kind, m, tps)
        types, mask, images, videos, frames = random_layout(rng, m, 1 + trial % 3, kind == "qwen3")
        hf_extra, ours = {}, {}
        if kind == "qwen2.5":
            ours["tokens_per_second"] = tps
            if videos is not None and trial % 2:  # else 1 second per grid, in both
                seconds = torch.tensor([rng.choice([0.5, 0.75, 1.0, 1.5, 2.0]) for _ in videos])
                hf_extra["second_per_grid_ts"] = ours["second_per_grid_ts"] = seconds
        args = dict(attention_mask=mask, image_grid_thw=images, video_grid_thw=videos)
        if kind == "qwen3" and videos is not None:
            videos = frames  # ours: one grid per frame, as the timestamps separate them
        ref, _ = model.get_rope_index(torch.zeros_like(types), types, **args, **hf_extra)
        got = mrope_positions(types, images, videos, spatial_merge_size=m, attention_mask=mask,
                              **ours)  # fmt: skip
        assert got.shape == (*types.shape, 3) and got.dtype == torch.int64
        assert torch.equal(got, ref.permute(1, 2, 0)), (kind, trial)


def test_positions_golden_and_advance():
    """text, a 3-frame video of one merged patch, text: the text after it starts at
    1 + max(h, w) // m = 2 (transformers 5), or after the largest index 3 (advance="max")."""
    types = torch.tensor([0, 2, 2, 2, 0])
    grid = mrope_positions(types, video_grid_thw=[[3, 2, 2]])
    assert grid.tolist() == [[0, 0, 0], [1, 1, 1], [2, 1, 1], [3, 1, 1], [2, 2, 2]]
    most = mrope_positions(types, video_grid_thw=[[3, 2, 2]], advance="max")
    assert most[-1].tolist() == [4, 4, 4]
    image = mrope_positions(torch.tensor([0, 1, 1, 1, 1, 0]), [[1, 4, 4]])  # a 2 x 2 grid
    assert image.tolist() == [[0, 0, 0], [1, 1, 1], [1, 1, 2], [1, 2, 1], [1, 2, 2], [3, 3, 3]]
    assert torch.equal(image, mrope_positions(torch.tensor([0, 1, 1, 1, 1, 0]), [[1, 4, 4]],
                                              advance="max"))  # fmt: skip
    # text only: arange on all three axes, so MRoPE is RoPE
    assert torch.equal(mrope_positions(torch.zeros(4, dtype=torch.long)),
                       torch.arange(4)[:, None].expand(4, 3))  # fmt: skip


def test_split_frames_and_omni_time_axis():
    """split_frames: a t-frame video is t blocks of one frame, each at time 0 of its start;
    Omni: the time axis counts position_id_per_seconds per second, audio counts as text, and
    text after a block starts after its largest index."""
    types = torch.tensor([0, 2, 0, 2, 0])  # two frames of a 1 x 1 merged grid, a stamp between
    split = mrope_positions(types, video_grid_thw=[[2, 2, 2]], split_frames=True)
    frames = mrope_positions(types, video_grid_thw=[[1, 2, 2], [1, 2, 2]])
    assert torch.equal(split, frames) and split[:, 0].tolist() == [0, 1, 2, 3, 4]
    types = torch.tensor([0, 2, 2, 0, 3, 3, 0])  # text, a 2-frame video, text, audio, text
    pos = omni_positions(types, video_grid_thw=[[2, 2, 2]], second_per_grids=[0.5],
                         position_id_per_seconds=10)  # fmt: skip
    assert pos[:, 0].tolist() == [0, 1, 6, 7, 8, 9, 10]  # frame 1 at 1 + int(1 * 0.5 * 10)
    assert pos[1:3, 1:].tolist() == [[1, 1], [1, 1]]
    # temporal_merge_size 2 (ERNIE-4.5-VL): a 3-frame video row is 1 merged frame of 4 tokens
    merged = mrope_positions(torch.tensor([0, 2, 2, 2, 2, 0]), video_grid_thw=[[3, 4, 4]],
                             temporal_merge_size=2)  # fmt: skip
    assert torch.equal(merged, mrope_positions(torch.tensor([0, 2, 2, 2, 2, 0]),
                                               video_grid_thw=[[1, 4, 4]]))  # fmt: skip
    # newline_columns (HY-V4-VL, its get_rope_index's example): 2 frames of 2 x 2 merged
    # patches, each row ending with a newline: 2 x 3 tokens a frame, frames max(2, 3) = 3 apart
    types = torch.tensor([0] + [2] * 12 + [0])
    rows = mrope_positions(types, video_grid_thw=[[2, 4, 4]], newline_columns=True)
    assert rows[1:-1].T.tolist() == [
        [1, 1, 1, 1, 1, 1, 4, 4, 4, 4, 4, 4],
        [1, 1, 1, 2, 2, 2, 4, 4, 4, 5, 5, 5],
        [1, 2, 3, 1, 2, 3, 4, 5, 6, 4, 5, 6],
    ]
    assert rows[-1].tolist() == [7, 7, 7]  # after the last frame's block
    padded = mrope_positions(torch.tensor([[0, 0, 0]]), attention_mask=torch.tensor([[0, 1, 1]]),
                             padding=1)  # fmt: skip
    assert padded[0, :, 0].tolist() == [1, 0, 1]  # GLM-Image's padding
    padded = omni_positions(torch.tensor([[0, 0, 0]]), attention_mask=torch.tensor([[0, 1, 1]]))
    assert padded[0, :, 0].tolist() == [1, 0, 1]  # padding at 1, as transformers' Omni
    # a video with its audio (types 2 and 3 in one block): 2 one-token frames 10 time ids apart
    # (0.5 s * 20), 3 audio tokens, between [VS, AS] and [AE, VE], then text
    grids = dict(video_grid_thw=[[2, 1, 1]], spatial_merge_size=1, second_per_grids=[0.5],
                 position_id_per_seconds=20)  # fmt: skip
    # Qwen2.5-Omni, chunks of 2 time ids: frame 0, audio 0-1, frame 1, audio 2; VS and AS share
    # id 0, AE and VE id 4 (after the last chunk, audio at 3)
    types = torch.tensor([0, 0, 2, 3, 3, 2, 3, 0, 0, 0])
    chunks = omni_positions(types, **grids, seconds_per_chunk=0.1)
    assert chunks[:, 0].tolist() == [0, 0, 1, 1, 2, 11, 3, 4, 4, 5]
    assert chunks.dtype == torch.int64
    # Qwen3-Omni, by time: frame 0 at 2, audio at 2, 3, 4, frame 1 at 12; start / end tokens
    # one id each
    types = torch.tensor([0, 0, 2, 3, 3, 3, 2, 0, 0, 0])
    timed = omni_positions(types, **grids, model_type="qwen3_omni_moe")
    assert timed.dtype == torch.float32
    assert timed[:, 0].tolist() == [0, 1, 2, 2, 3, 4, 12, 13, 14, 15]
    with pytest.raises(ValueError, match="does not interleave"):  # Qwen2.5-Omni's order
        omni_positions(types, **grids, seconds_per_chunk=0.1)


def test_positions_drive_attention_and_the_model():
    types = torch.tensor([[0, 0, 1, 1, 1, 1, 0, 0]])
    pos = mrope_positions(types, [[1, 4, 4]])  # [1, 8, 3]
    enc = posenc.build("mrope", head_dim=16)
    q, k, v = (torch.randn(1, 2, 8, 16) for _ in range(3))
    assert posenc.attention(q, k, v, enc, pos, pos).shape == (1, 2, 8, 16)
    model = posenc.TransformerLM(11, 32, 1, 2, encoding="mrope").eval()
    with torch.no_grad():
        assert model(torch.randint(0, 11, (1, 8)), positions=pos).shape == (1, 8, 11)


# ---------------------------------------------------------------------------------- bad input


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        (dict(head_dim=16, mrope_section=[2, 3, 4]), ValueError, r"mrope_section must sum to "
         r"head_dim // 2 = 8"),
        (dict(head_dim=16, mrope_section=[4, 4]), ValueError, "mrope_section must have 3"),
        (dict(head_dim=16, mrope_section=[4, -1, 5]), ValueError, r"mrope_section\[h\]"),
        (dict(head_dim=16, mrope_section=[4.0, 2, 2]), TypeError, r"mrope_section\[t\]"),
        (dict(head_dim=16, mrope_section="4,2,2"), TypeError, "mrope_section"),
        (dict(head_dim=16, mrope_interleaved="yes"), TypeError, "mrope_interleaved"),
        (dict(head_dim=15), ValueError, "head_dim=15"),
    ],
)  # fmt: skip
def test_bad_constructor_arguments(kwargs, error, match):
    with pytest.raises(error, match=match):
        MRoPE(**kwargs)


def test_bad_positions_and_head_dims():
    enc = MRoPE(mrope_section=[2, 3, 3])  # head dim from q: the section is checked then
    q = torch.randn(1, 1, 4, 16)
    pos = torch.arange(4)[:, None].expand(4, 3)
    enc.rotate(q, q, pos, pos)
    with pytest.raises(ValueError, match=r"mrope_section must sum to head_dim // 2 = 16"):
        enc.rotate(torch.randn(1, 1, 4, 32), torch.randn(1, 1, 4, 32), pos, pos)
    for bad in (torch.arange(4), pos[:, :2]):
        with pytest.raises(ValueError, match="q_pos must have a trailing axis of size 3"):
            enc.rotate(q, q, bad, pos)
        with pytest.raises(ValueError, match="positions must have a trailing axis of size 3"):
            enc.angles(bad)
    with pytest.raises(ValueError, match="k_pos must be >= 0"):
        enc.rotate(q, q, pos, pos - 1)


@pytest.mark.parametrize(
    ("call", "match"),
    [
        (lambda: mrope_positions(torch.tensor([0, 1, 1, 0]), [[1, 4, 4]]), r"image_grid_thw\[0\] "
         r"= \[1, 4, 4\] gives 4 tokens .* has 2"),
        (lambda: mrope_positions(torch.tensor([0, 2, 0])), "video_grid_thw has 0 rows"),
        (lambda: mrope_positions(torch.tensor([0, 0]), [[1, 2, 2]]), "image_grid_thw has 1 rows"),
        (lambda: mrope_positions(torch.tensor([0, 3])), "token_types must hold 0"),
        (lambda: mrope_positions(torch.zeros(2)), "token_types must be a"),
        (lambda: mrope_positions(torch.tensor([0, 1]), [[1, 2]]), "image_grid_thw must be an"),
        (lambda: mrope_positions(torch.tensor([0, 1]), [[0, 2, 2]]), "image_grid_thw must hold"),
        (lambda: mrope_positions(torch.tensor([0]), second_per_grid_ts=[1.0]),
         "second_per_grid_ts needs tokens_per_second"),
        (lambda: mrope_positions(torch.tensor([0, 2]), video_grid_thw=[[1, 2, 2]],
                                 tokens_per_second=2, second_per_grid_ts=[1.0, 2.0]),
         "second_per_grid_ts must have one entry per video"),
        (lambda: mrope_positions(torch.tensor([0]), advance="end"), "advance must be one of"),
        (lambda: mrope_positions(torch.tensor([0]), spatial_merge_size=0), "spatial_merge_size"),
        (lambda: mrope_positions(torch.tensor([[0, 0]]), attention_mask=torch.ones(2)),
         "attention_mask must have token_types' shape"),
        (lambda: mrope_positions(torch.tensor([0, 2]), video_grid_thw=[[1, 2, 2]],
                                 split_frames=True, tokens_per_second=2),
         "split_frames gives every frame its own block"),
        (lambda: mrope_positions(torch.tensor([0, 2, 2, 0]), video_grid_thw=[[2, 2, 2]],
                                 split_frames=True),
         r"video_grid_thw\[0\] = \[1, 2, 2\] gives 1 tokens .* has 2"),
        (lambda: mrope_positions(torch.tensor([0, 2]), video_grid_thw=[[1, 2, 2]],
                                 temporal_merge_size=2),
         r"video_grid_thw must have t >= temporal_merge_size = 2"),
        (lambda: mrope_positions(torch.tensor([0]), temporal_merge_size=0), "temporal_merge_size"),
        (lambda: mrope_positions(torch.tensor([0]), temporal_merge_size=2, split_frames=True),
         "temporal_merge_size and split_frames"),
        (lambda: mrope_positions(torch.tensor([0]), newline_columns=True, split_frames=True),
         "newline_columns spaces frames by their block"),
        (lambda: mrope_positions(torch.tensor([0, 1, 1, 0]), [[1, 2, 2]], spatial_merge_size=1,
                                 newline_columns=True),
         r"gives 6 tokens \(t \* \(h // 1\) \* \(w // 1 \+ 1\).* has 2"),
        (lambda: mrope_positions(torch.tensor([0]), padding=-1), "padding must be >= 0"),
        (lambda: mrope_axes([2, 3, 2], hw_pairs=True), r"hw_pairs takes a section \(h, w, t\)"),
        (lambda: omni_positions(torch.tensor([0, 4])), "token_types must hold 0 .* 3 .audio."),
        (lambda: omni_positions(torch.tensor([0, 2]), video_grid_thw=[[1, 2, 2]],
                                second_per_grids=[1.0, 2.0]),
         "second_per_grids must have one entry per video"),
        (lambda: omni_positions(torch.tensor([0]), position_id_per_seconds=0),
         "position_id_per_seconds"),
        (lambda: omni_positions(torch.tensor([0, 1, 0]), [[1, 2, 2]], spatial_merge_size=0),
         "spatial_merge_size"),
        (lambda: omni_positions(torch.tensor([0]), model_type="qwen3_omni"), "model_type must"),
        (lambda: omni_positions(torch.tensor([0]), seconds_per_chunk=0.01),
         r"position_id_per_seconds \* seconds_per_chunk must be >= 1"),
        (lambda: omni_positions(torch.tensor([0, 1, 2, 0]), [[1, 1, 1]], [[1, 1, 1]],
                                spatial_merge_size=1),
         r"the block at token 1 mixes types \[1, 2\]"),
        (lambda: omni_positions(torch.tensor([0, 2, 3, 0, 0]), video_grid_thw=[[1, 1, 1]],
                                spatial_merge_size=1),
         "a video with audio needs 2 text tokens before and after it"),
        (lambda: omni_positions(torch.tensor([1, 0]), [[1, 1, 1]], spatial_merge_size=1,
                                model_type="qwen3_omni_moe"),
         r"the block at token 0 needs 0 end token\(s\) .* and 1 start token"),
        (lambda: omni_positions(torch.tensor([0, 1]), [[1, 1, 1]], spatial_merge_size=1,
                                model_type="qwen3_omni_moe"),
         r"needs 1 end token\(s\) after it"),
    ],
)  # fmt: skip
def test_bad_positions_input(call, match):
    with pytest.raises(ValueError, match=match):
        call()


def test_mrope_positions_of_empty_sequences():
    """T = 0: empty positions, like every other posenc function on empty input."""
    for shape in ((0,), (2, 0)):
        out = mrope_positions(torch.zeros(shape, dtype=torch.long))
        assert out.shape == (*shape, 3) and out.dtype == torch.int64
