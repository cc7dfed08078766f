"""The `randomized` wrapper (Ruoss et al. 2023): sampled training positions, delegated hooks."""

from __future__ import annotations

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from support.changed import assert_changed

import posenc
from posenc.attention import REGISTRY, prepare
from posenc.encodings import wrappers
from posenc.encodings.wrappers import Randomized


def test_registered():
    assert posenc.ENCODINGS["randomized"] is Randomized
    assert posenc.resolve("randomized") is Randomized


@settings(max_examples=25, deadline=None)
@given(n=st.integers(1, 64), m=st.integers(64, 512), seed=st.integers(0, 2**16))
def test_training_positions_are_a_sorted_random_subset(n, m, seed):
    torch.manual_seed(seed)
    enc = Randomized(encoding="rope", head_dim=8, sample_len=m).train()
    pos = enc.sample_positions(torch.arange(n))
    assert pos.shape == (n,) and pos.dtype == torch.int64
    assert (pos.diff() > 0).all() and pos.min() >= 0 and pos.max() < m


def test_sampling_covers_the_range_and_differs_per_call_and_row():
    torch.manual_seed(0)
    enc = Randomized(encoding="rope", head_dim=8, sample_len=100).train()
    draws = torch.stack([enc.sample_positions(torch.arange(10)) for _ in range(200)])
    assert draws.max() > 90 and draws.min() == 0  # uses the whole [0, sample_len)
    assert len({tuple(d.tolist()) for d in draws}) > 190
    rows = enc.sample_positions(torch.arange(10).expand(4, 10))  # [B, T]: one subset per row
    assert rows.shape == (4, 10) and (rows.diff(dim=-1) > 0).all()
    assert len({tuple(r.tolist()) for r in rows}) == 4


@settings(max_examples=25, deadline=None)
@given(sizes=st.lists(st.integers(1, 40), min_size=1, max_size=6), seed=st.integers(0, 2**16))
def test_each_row_draws_a_subset_of_its_own_size(sizes, seed):
    """[B, T] positions that stay at a row's last one (a right-padded row): the row's draw is
    a sorted subset of its own size, the one it gets alone from the same random state (row 0
    reads the first noise), whatever the longer rows beside it."""
    T, m = max(sizes), 64
    pos = torch.stack([torch.arange(T).clamp(max=n - 1) for n in sizes])  # [B, T]
    enc = Randomized(encoding="rope", head_dim=8, sample_len=m).train()
    torch.manual_seed(seed)
    out = enc.sample_positions(pos)
    torch.manual_seed(seed)
    alone = enc.sample_positions(pos[:1, : sizes[0]])
    assert torch.equal(out[0, : sizes[0]], alone[0])
    for row, n in zip(out, sizes, strict=True):
        assert (row[:n].diff() > 0).all() and row.min() >= 0 and row.max() < m
        assert (row[n:] == row[n - 1]).all()


def test_a_short_row_spreads_over_the_whole_range():
    """A 2-position row beside a 50-position one: its positions spread over [0, sample_len) as
    alone (the mean of its larger one ~ 2/3 of the range), not over the first 2/50 of it."""
    torch.manual_seed(0)
    enc = Randomized(encoding="rope", head_dim=8, sample_len=300).train()
    pos = torch.stack([torch.arange(50).clamp(max=1), torch.arange(50)]).repeat(500, 1)
    top = enc.sample_positions(pos)[0::2, 1].float().mean().item()
    assert abs(top / 300 - 2 / 3) < 0.05, top


def test_restarting_positions_keep_their_structure():
    """Packed documents: each document maps through the same sorted subset, restarts kept."""
    torch.manual_seed(0)
    enc = Randomized(encoding="rope", head_dim=8).train()
    restart = torch.tensor([0, 1, 2, 0, 1, 2, 3])
    out = enc.sample_positions(restart)
    assert torch.equal(out[:3], out[3:6]) and out[6] > out[5] and (out[:3].diff() > 0).all()


def test_eval_passes_positions_through():
    enc = Randomized(encoding="rope", head_dim=8).eval()
    pos = torch.tensor([3, 4, 9])
    assert enc.sample_positions(pos) is pos


def test_hooks_are_the_base_encodings():
    enc = Randomized(encoding="alibi", heads=4, encoding_kwargs={"bidirectional": True})
    ref = posenc.build("alibi", heads=4, bidirectional=True)
    assert enc.family == "bias" and Randomized.family == "none"
    assert enc.has_bias and not enc.has_values and enc.heads == 4
    q = torch.randn(1, 4, 5, 8)
    pos = torch.arange(5)
    torch.testing.assert_close(enc.bias(q, q, pos, pos), ref.bias(q, q, pos, pos))
    rope = Randomized(encoding="rope", head_dim=8)
    assert rope.family == "rotary" and not rope.has_bias
    torch.testing.assert_close(rope.angles(pos), posenc.build("rope", head_dim=8).angles(pos))
    k = torch.randn(1, 4, 5, 8)
    for a, b in zip(
        rope.rotate(q, k, pos, pos), posenc.build("rope", head_dim=8).rotate(q, k, pos, pos)
    ):
        torch.testing.assert_close(a, b)


def test_bounded_base_covers_sample_len():
    """The inner table covers sample_len (train_len = sample_len); a max_len below it is
    refused, never quietly enlarged (tests/encodings/test_max_len.py)."""
    enc = Randomized(encoding="learned", dim=16, sample_len=300)
    assert enc.max_len == enc.inner.max_len >= 300 and enc.family == "absolute"
    with pytest.raises(ValueError, match="sample_len=300 > max_len=20"):
        Randomized(encoding="learned", dim=16, max_len=20, sample_len=300)


def test_model_samples_once_and_every_layer_sees_the_same_positions():
    torch.manual_seed(0)
    model = posenc.TransformerLM(
        13, 32, 3, 4, encoding="randomized", encoding_kwargs={"encoding": "rope", "sample_len": 500}
    )
    enc = model.encoding
    seen, calls = [], []
    rotate, sample = enc.inner.rotate, enc.sample_positions

    def spy_rotate(q, k, q_pos, k_pos):
        seen.append((q_pos, k_pos))
        return rotate(q, k, q_pos, k_pos)

    def spy_sample(positions):
        calls.append(positions)
        return sample(positions)

    enc.inner.rotate, enc.sample_positions = spy_rotate, spy_sample
    tokens = torch.randint(0, 13, (2, 9))
    model.train()(tokens)
    assert len(calls) == 1 and len(seen) == 3
    first = seen[0][0]
    assert not torch.equal(first, torch.arange(9))  # sampled (probability ~1)
    assert all(torch.equal(q, first) and torch.equal(k, first) for q, k in seen)
    seen.clear()
    with torch.no_grad():
        model.eval()(tokens)
    assert len(calls) == 1  # eval: positions pass through, nothing sampled
    assert all(q is None or torch.equal(q, torch.arange(9)) for q, _ in seen)


def test_training_forward_is_random_eval_is_deterministic():
    torch.manual_seed(0)
    model = posenc.TransformerLM(13, 32, 1, 4, encoding="randomized")
    tokens = torch.randint(0, 13, (1, 8))
    with torch.no_grad():
        a, b = model.train()(tokens), model(tokens)
        assert_changed(a, b)
        c, d = model.eval()(tokens), model(tokens)
        torch.testing.assert_close(c, d, atol=0, rtol=0)


def test_checkpoint_round_trip(tmp_path):
    kwargs = {"encoding": "rope", "encoding_kwargs": {"base": 500.0}, "sample_len": 256}
    model = posenc.TransformerLM(13, 32, 1, 4, encoding="randomized", encoding_kwargs=kwargs)
    model.save(tmp_path / "m.pt")
    loaded = posenc.TransformerLM.from_checkpoint(tmp_path / "m.pt").eval()
    assert loaded.encoding.sample_len == 256 and loaded.encoding.inner.base == 500.0
    tokens = torch.randint(0, 13, (1, 8))
    with torch.no_grad():
        torch.testing.assert_close(loaded(tokens), model.eval()(tokens), atol=0, rtol=0)


def test_bad_input():
    with pytest.raises(ValueError, match="not 'randomized'"):
        Randomized(encoding="randomized")
    with pytest.raises(TypeError, match="encoding must be"):
        Randomized(encoding=3)
    with pytest.raises(TypeError, match="encoding_kwargs"):
        Randomized(encoding=posenc.build("rope", head_dim=8), encoding_kwargs={"base": 2.0})
    with pytest.raises(ValueError, match="sample_len"):
        Randomized(sample_len=0)
    with pytest.raises(TypeError):
        Randomized(unknown=1)
    with pytest.raises(ValueError, match="unknown encoding"):
        Randomized(encoding="ropee")
    enc = Randomized(encoding="rope", head_dim=8, sample_len=8).train()
    with pytest.raises(ValueError, match="sample_len=8"):
        enc.sample_positions(torch.arange(9))
    with pytest.raises(ValueError, match="integers"):
        enc.sample_positions(torch.arange(4.0))
    if "rope_2d" in posenc.ENCODINGS:
        with pytest.raises(ValueError, match="position_dims"):
            Randomized(encoding="rope_2d", head_dim=8)


WRAPPED = sorted(n for n, c in wrappers.WRAPPABLE.items() if c.position_dims == 1)


@pytest.mark.parametrize("name", WRAPPED)
def test_randomized_runs_on_every_backend_its_encoding_runs_on(name):
    """What the inner provides (its `distance` form included), the wrapper provides: it
    declares the inner's capabilities, every backend says the same of both (can_run), and
    those that run give the same numbers (eval mode: positions are not sampled)."""
    torch.manual_seed(0)
    kw = dict(dim=32, heads=4, head_dim=8, max_len=64)
    inner = posenc.build(name, **kw).eval()
    wrapped = Randomized(encoding=inner).eval()
    assert wrapped.provides == inner.provides | {"sample_positions"}
    torch.manual_seed(1)
    q, k, v = torch.randn(2, 4, 6, 8), torch.randn(2, 2, 6, 8), torch.randn(2, 2, 6, 8)
    for positions in (None, torch.arange(3, 9)):
        calls = [prepare(q, k, v, e, positions, positions, True, None, None)
                 for e in (inner, wrapped)]  # fmt: skip
        for backend, runner in REGISTRY.items():
            why = [runner.can_run(call) for call in calls]
            assert (why[0] is None) == (why[1] is None), (backend, why)
            assert [runner.picks(c) for c in calls[:1]] == [runner.picks(c) for c in calls[1:]]
            if why[0] is None and backend != "flex":  # flex: compiles per encoding (slow)
                with torch.no_grad():
                    outs = [posenc.attention(q, k, v, e, positions, positions, backend=backend)
                            for e in (inner, wrapped)]  # fmt: skip
                torch.testing.assert_close(outs[1], outs[0], rtol=0, atol=0)
    if "distance" in inner.provides:  # randomized(alibi) on the distance backend
        assert REGISTRY["distance"].can_run(calls[1]) is None


@pytest.mark.parametrize("name", WRAPPED)
def test_cached_decoding_with_sample_at_eval_equals_the_full_forward(name):
    """sample_at_eval=True with a KV cache: one draw over the cache's length, each step the
    next positions of it. Positions only increase, and (cache_exact encodings) generate's
    logits equal one full forward of the finished sequence from the same random state."""
    kwargs = {"encoding": name, "sample_len": 64, "sample_at_eval": True}
    torch.manual_seed(0)
    model = posenc.TransformerLM(
        11, 32, 2, 4, encoding="randomized", encoding_kwargs=kwargs, max_len=64
    )
    model.eval()
    prompt = torch.randint(0, 11, (2, 5))
    torch.manual_seed(1)
    tokens, logits = model.generate(prompt, max_new_tokens=6, return_logits=True)
    cache = model.new_cache(2, 11)
    torch.manual_seed(1)
    with torch.no_grad():
        model(prompt, cache=cache)
        for t in range(5, 11):
            model(tokens[:, t : t + 1], cache=cache)
    drawn = cache.positions[0]
    assert bool((drawn[1:] > drawn[:-1]).all()), drawn  # increasing: never resampled
    if not model.encoding.cache_exact:
        return
    torch.manual_seed(1)
    with torch.no_grad():
        full = model(tokens)  # draws the same subset: randperm(sample_len)[:11]
    torch.testing.assert_close(logits, full[:, 4:10], atol=1e-4, rtol=1e-4)
    assert torch.equal(tokens[:, 5:], full[:, 4:10].argmax(-1))


def test_a_schedule_randomizes_every_layer_or_none():
    """Positions are drawn once per forward for all layers: randomized in some layers only
    (it would be a silent no-op after layer 0, or randomize every layer from layer 0) is
    refused; in every layer it works, each layer seeing the one draw."""
    rnd = ("randomized", {"encoding": "rope", "sample_len": 64})
    for layers in ([("rope", {}), rnd], [rnd, ("alibi", {})],
                   [rnd, ("randomized", {"encoding": "alibi", "sample_len": 32})]):  # fmt: skip
        with pytest.raises(ValueError, match="every layer"):
            posenc.TransformerLM(11, 32, 2, 4, encoding=layers)
    both = [rnd, ("randomized", {"encoding": "alibi", "sample_len": 64})]
    model = posenc.TransformerLM(11, 32, 2, 4, encoding=both).train()
    seen = []
    bias = model.encodings[1].inner.bias

    def spy(q, k, q_pos, k_pos):
        seen.append(q_pos)
        return bias(q, k, q_pos, k_pos)

    model.encodings[1].inner.bias = spy
    model(torch.randint(0, 11, (1, 9)))
    assert not torch.equal(seen[0], torch.arange(9))  # layer 1 sees sampled positions


@pytest.mark.parametrize("name", WRAPPED)
def test_an_encoder_over_randomized_gets_the_wrapped_encoders_form(name):
    """TransformerLM(causal=False) with randomized over NAME builds NAME's encoder form
    (bidirectional=True where NAME has one), as it does for NAME alone; where NAME has none,
    the error says so and suggests no keyword that does not apply."""
    import inspect

    kwargs = {"encoding": name, "sample_len": 64}
    cls = posenc.resolve(name)
    takes = "bidirectional" in inspect.signature(cls).parameters
    if cls.bidirectional or takes:
        model = posenc.TransformerLM(
            11, 32, 1, 4, encoding="randomized", encoding_kwargs=kwargs, causal=False, max_len=64
        )
        assert model.encoding.bidirectional and model.encoding.inner.bidirectional
        return
    with pytest.raises(ValueError, match="no bidirectional form") as err:
        posenc.TransformerLM(11, 32, 1, 4, encoding="randomized", encoding_kwargs=kwargs,
                             causal=False, max_len=64)  # fmt: skip
    assert "bidirectional=True" not in str(err.value)
