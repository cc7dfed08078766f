"""posenc.TransformerLM: cached generation, packed sequences, training, shift invariance."""

from __future__ import annotations

import math
import re

import pytest
import torch
import torch.nn.functional as F
from support.changed import assert_changed

import posenc
from posenc import TransformerLM

NAMES = sorted(posenc.ENCODINGS)
V = 11


def tiny(name: str = "rope", seed: int = 0, **kwargs) -> TransformerLM:
    torch.manual_seed(seed)
    config = dict(vocab_size=V, dim=32, depth=2, heads=4, kv_heads=2, encoding=name, max_len=64)
    model = TransformerLM(**{**config, **kwargs})
    with torch.no_grad():  # nudge the encodings' parameters off their init (t5 starts tiny)
        for p in model.encodings.parameters():
            p.add_(0.1 * torch.randn_like(p))
    return model.eval()


def exact_with_cache(name: str) -> bool:
    return posenc.ENCODINGS[name].cache_exact


@pytest.mark.parametrize("name", NAMES)
def test_generate_with_cache_equals_full_forward(name):
    model = tiny(name)
    prompt = torch.randint(0, V, (2, 5))
    tokens, logits = model.generate(prompt, max_new_tokens=6, return_logits=True)
    assert tokens.shape == (2, 11) and logits.shape == (2, 6, V)
    assert torch.equal(tokens[:, :5], prompt) and torch.isfinite(logits).all()
    if not exact_with_cache(name):
        return  # cache_exact=False: cached decoding runs but is documented as approximate
    with torch.no_grad():
        for step in range(6):
            full = model(tokens[:, : 5 + step])[:, -1]  # recompute everything
            torch.testing.assert_close(logits[:, step], full, atol=1e-4, rtol=1e-4)
            assert torch.equal(tokens[:, 5 + step], full.argmax(-1))  # greedy


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("causal", [True, False])
def test_packed_batch_equals_each_document_alone(name, causal):
    """Every encoding, whole-sequence ones (phase: t / (T-1) of each document) too."""
    if not causal and not posenc.resolve(name).bidirectional:
        with pytest.raises(ValueError, match="no bidirectional form"):
            tiny(name, causal=causal)
        return
    model = tiny(name, causal=causal)
    lens = [3, 5, 4]
    docs = [torch.randint(0, V, (n,)) for n in lens]
    packed = torch.cat(docs)[None]  # [1, 12]
    doc_ids = torch.cat([torch.full((n,), i) for i, n in enumerate(lens)])[None]
    with torch.no_grad():
        logits = model(packed, doc_ids=doc_ids)[0]
        start = 0
        for doc in docs:
            alone = model(doc[None])[0]
            torch.testing.assert_close(
                logits[start : start + len(doc)], alone, atol=1e-5, rtol=1e-4
            )
            start += len(doc)


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("backend", ["eager", "sdpa", "chunked"])
def test_outputs_do_not_depend_on_the_padding_around_a_sequence(name, backend):
    """Pads before a sequence are a document of their own (doc_ids): the sequence restarts at
    position 0 and no key of it sees a pad; pads after it never reach it (causal). Its logits
    equal those of the sequence alone, for every encoding and attention backend."""
    model = tiny(name)
    model.attn_backend = backend
    seq = torch.randint(1, V, (6,))
    if backend == "sdpa" and model.encoding.score_hooks:  # needs the logits: refused, by name
        with pytest.raises(ValueError, match="sdpa.*'chunked'"):
            model(seq[None])
        return
    with torch.no_grad():
        alone = model(seq[None])[0]
        for left, right in ((0, 5), (3, 0), (4, 2)):
            padded = torch.cat([torch.zeros(left, dtype=torch.long), seq,
                                torch.zeros(right, dtype=torch.long)])[None]  # fmt: skip
            doc_ids = torch.cat([torch.zeros(left), torch.ones(6), torch.full((right,), 2)])
            got = model(padded, doc_ids=doc_ids[None].long())[0, left : left + 6]
            torch.testing.assert_close(got, alone, atol=1e-5, rtol=1e-4)
            if left == 0 and exact_with_cache(name):  # right padding needs no mask (causal),
                # but a whole-sequence encoding (phase) sees the pads' length without doc_ids
                got = model(padded)[0, :6]
                torch.testing.assert_close(got, alone, atol=1e-5, rtol=1e-4)


def length_dependent_models():
    """(id, model factory) for every encoding whose output at a position depends on the
    sequence length T: found, not named, by comparing a causal prefix with the whole."""
    from posenc.functional.rope_scaling import ROPE_SCALING

    cases = [(n, dict(encoding=n)) for n in NAMES]
    for rope_type in ROPE_SCALING:  # RoPE's scalings: dynamic and longrope follow T
        params = {"rope_type": rope_type, "factor": 4.0, "original_max_position_embeddings": 4}
        if rope_type == "longrope":
            params |= {"short_factor": [1.0] * 4, "long_factor": [1.0, 2.0, 3.0, 4.0]}
        if rope_type == "llama3":
            params |= {"low_freq_factor": 1.0, "high_freq_factor": 4.0}
        if rope_type == "proportional":
            params = {"rope_type": rope_type, "partial_rotary_factor": 0.5}
        cases.append((f"rope-{rope_type}", dict(encoding="rope",
                                                encoding_kwargs={"scaling": params})))  # fmt: skip
    out = []
    x = torch.randint(0, V, (1, 12), generator=torch.Generator().manual_seed(0))
    for case_id, kwargs in cases:
        model = tiny(**kwargs).double()  # float64: a dependence stands out of float32 biases
        with torch.no_grad():
            if not torch.allclose(model(x[:, :3]), model(x)[:, :3], atol=1e-7, rtol=0):
                out.append(pytest.param(kwargs, id=case_id))
    return out


LENGTH_DEPENDENT = length_dependent_models()


def test_length_dependent_encodings_are_found():
    found = {p.id for p in LENGTH_DEPENDENT}
    assert {"phase", "rope-dynamic", "rope-longrope"} <= found, found


@pytest.mark.parametrize("kwargs", LENGTH_DEPENDENT)
def test_packed_documents_of_length_dependent_encodings(kwargs):
    """A packed document of an encoding that depends on T equals the same document alone
    (its own T, not the packed row's), or doc_ids is refused in one line where the encoding
    follows the batch's longest sequence (RoPE's dynamic / longrope, as transformers')."""
    model = tiny(**kwargs)
    lens = [3, 9, 5]
    docs = [torch.randint(0, V, (n,)) for n in lens]
    packed = torch.cat(docs)[None]
    doc_ids = torch.cat([torch.full((n,), i) for i, n in enumerate(lens)])[None]
    with torch.no_grad():
        if not model.encoding.per_document:
            with pytest.raises(ValueError, match="^doc_ids: .*per document") as err:
                model(packed, doc_ids=doc_ids)
            assert "\n" not in str(err.value)
            return
        logits = model(packed, doc_ids=doc_ids)[0]
        for doc, start in zip(docs, (0, 3, 12)):
            alone = model(doc[None])[0]
            torch.testing.assert_close(logits[start : start + len(doc)], alone,
                                       atol=1e-5, rtol=1e-4)  # fmt: skip


@pytest.mark.parametrize(
    "doc_ids", [[0, 1, 0, 1], [0, 0, 1, 0], [[0, 0, 1, 1], [2, 1, 2, 2]], [3, 3, 5, 3]]
)
def test_doc_ids_must_be_contiguous_runs(doc_ids):
    model = tiny("rope")
    with pytest.raises(ValueError, match="^doc_ids must be contiguous runs"):
        model(torch.zeros(2, 4, dtype=torch.long), doc_ids=torch.tensor(doc_ids))
    with pytest.raises(TypeError, match="^doc_ids must be an integer tensor"):
        model(torch.zeros(2, 4, dtype=torch.long), doc_ids=torch.tensor(doc_ids).float())


def copy_batch(gen: torch.Generator, batch: int = 16, n: int = 3, vocab: int = 8):
    """x SEP x: the second half copies the first. Returns inputs, targets [B, 2n]."""
    x = torch.randint(2, vocab, (batch, n), generator=gen)
    seq = torch.cat([x, torch.ones(batch, 1, dtype=torch.long), x], dim=1)
    return seq[:, :-1], seq[:, 1:]


@pytest.fixture
def one_thread():
    """200 steps at lr 1e-2 follow a trajectory that depends on the reduction order of the
    matmuls, i.e. on the thread count: one thread makes the test the same on every machine."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.mark.parametrize("name", NAMES)
def test_training_on_copy_lowers_the_loss(name, one_thread):
    """200 AdamW steps of a dim-32, 2-layer model; loss on the copied half only.

    A model that cannot see order still learns the unigram (loss ln 6 on 6 symbols): the loss
    must go clearly below that, and well below its start.
    """
    torch.manual_seed(0)
    gen = torch.Generator().manual_seed(0)
    model = TransformerLM(8, 32, 2, 2, encoding=name, max_len=32).train()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
    losses = []
    for _ in range(200):
        x, y = copy_batch(gen)
        logits = model(x)[:, 3:]  # predictions of the copied tokens
        loss = F.cross_entropy(logits.reshape(-1, 8), y[:, 3:].reshape(-1))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        losses.append(loss.item())
    early, late = sum(losses[:20]) / 20, sum(losses[-20:]) / 20
    assert math.isfinite(late)
    assert late < early - 0.2, (early, late)
    assert late < math.log(6) - 0.1, (early, late)


# ------------------------------------------------------------------------ shift invariance

INVARIANT = ["rope", "alibi", "t5", "kerple", "sandwich", "shaw", "transformer_xl", "deberta"]
ABSOLUTE = ["sinusoidal", "scaled_sinusoidal", "learned", "onehot", "index", "phase"]
CHANGES = [*ABSOLUTE, "fire"]


def shifted(name: str, shift: int, level: str):
    """(output at positions 0..9, output at shift..shift+9): model logits or attention output.

    No max_len (FIRE keeps the reference threshold L = 512, T5 its default buckets) except
    for absolute encodings, whose bounded tables must hold the shifted positions.
    """
    family = posenc.ENCODINGS[name].family
    max_len = shift + 16 if family == "absolute" else None
    model = tiny(name, max_len=max_len, causal=False)
    pos = torch.arange(10)
    with torch.no_grad():
        if level == "model":
            tokens = torch.randint(0, V, (2, 10))
            return model(tokens, positions=pos), model(tokens, positions=pos + shift)
        q, k, v = torch.randn(3, 2, 4, 10, 8).unbind(0)  # [B, H, T, Dh] as the model's
        enc = model.encoding
        return tuple(posenc.attention(q, k, v, enc, p, p, causal=False) for p in (pos, pos + shift))


@pytest.mark.parametrize("level", ["model", "attention"])
@pytest.mark.parametrize("name", INVARIANT)
def test_shifting_positions_leaves_relative_encodings_unchanged(name, level):
    a, b = shifted(name, 600, level)
    torch.testing.assert_close(a, b, atol=2e-4, rtol=1e-3)


@pytest.mark.parametrize("name", CHANGES)
def test_shifting_positions_changes_absolute_encodings_and_fire(name):
    # the model's logits for absolute encodings; FIRE's attention output (its effect on the
    # logits of an untrained model is small). 5000: far past FIRE's threshold L = 512.
    level = "attention" if posenc.ENCODINGS[name].family != "absolute" else "model"
    a, b = shifted(name, 5000, level)
    assert (a - b).abs().max() > 1e-2


# ------------------------------------------------------------------------ model plumbing


def test_checkpoint_round_trip(tmp_path):
    name = "t5" if "t5" in posenc.ENCODINGS else NAMES[0]
    model = tiny(name, encoding_kwargs={"num_buckets": 16} if name == "t5" else None)
    path = tmp_path / "model.pt"
    model.save(path)
    ckpt = torch.load(path, weights_only=True)
    assert set(ckpt) >= {"config", "model"} and ckpt["config"]["encoding"] == name
    loaded = TransformerLM.from_checkpoint(path)
    tokens = torch.randint(0, V, (2, 7))
    with torch.no_grad():
        torch.testing.assert_close(loaded.eval()(tokens), model(tokens), atol=0, rtol=0)
    assert loaded.num_params() == model.num_params()
    torch.save({"model": {}}, tmp_path / "bad.pt")
    with pytest.raises(ValueError, match="config"):
        TransformerLM.from_checkpoint(tmp_path / "bad.pt")


def test_num_params_counts_tied_embedding_once():
    model = tiny("rope")
    unique = {id(p): p.numel() for p in model.parameters()}
    assert model.num_params() == sum(unique.values())
    assert model.lm_head.weight is model.tok_emb.weight


def test_encoding_shared_by_default_or_per_layer():
    for name in ("t5", "kerple"):
        shared = tiny(name, depth=3)
        assert len(shared.encodings) == 1
        own = tiny(name, depth=3, share_encoding=False)
        assert len(own.encodings) == 3
        per_layer = sum(p.numel() for p in shared.encoding.parameters())
        assert per_layer > 0 and own.num_params() - shared.num_params() == 2 * per_layer
        tokens = torch.randint(0, V, (1, 6), generator=torch.Generator().manual_seed(0))
        with torch.no_grad():
            before = own(tokens)
            # only the last layer's encoding, by a random amount per entry: one shift of every
            # bias (t5 + 1.0) would change no softmax, and the output only by rounding
            gen = torch.Generator().manual_seed(1)
            for p in own.encodings[2].parameters():
                p.add_(torch.randn(p.shape, generator=gen))
            assert_changed(own(tokens), before)


GEMMA3 = [("rope", {"base": 1e4})] * 2 + [
    ("rope", {"base": 1e6, "scaling": {"rope_type": "linear", "factor": 8.0}})
]
IROPE = ["rope", "rope", ("nope_temperature", {"floor_scale": 3})]


@pytest.mark.parametrize("schedule", [GEMMA3, IROPE, ["t5", "alibi", "kerple"]], ids=str)
def test_per_layer_schedule(schedule, tmp_path):
    """Each layer gets its own encoding: layer i's module is built from entry i, a schedule of
    one name equals share_encoding=False, cached decoding equals a full forward, checkpoints
    round-trip."""
    model = tiny(schedule, depth=3)
    for enc, spec in zip(model.encodings, schedule, strict=True):
        name, kwargs = (spec, {}) if isinstance(spec, str) else spec
        assert type(enc) is posenc.ENCODINGS[name]
        for key, value in kwargs.items():  # scaling dicts gain max_position_embeddings
            got = getattr(enc, key)
            assert value.items() <= got.items() if isinstance(value, dict) else got == value
    tokens = torch.randint(0, V, (2, 9))
    generated, logits = model.generate(tokens[:, :4], 5, return_logits=True)
    with torch.no_grad():
        for step in range(5):
            full = model(generated[:, : 4 + step])[:, -1]
            torch.testing.assert_close(logits[:, step], full, atol=1e-4, rtol=1e-4)
        model.save(tmp_path / "m.pt")
        loaded = TransformerLM.from_checkpoint(tmp_path / "m.pt").eval()
        torch.testing.assert_close(loaded(tokens), model(tokens), atol=0, rtol=0)
    # a different layer 2 changes the logits (the schedule is used, not layer 0's encoding)
    other = tiny(schedule[:2] + ["nope"], depth=3)
    other.load_state_dict(model.state_dict(), strict=False)
    with torch.no_grad():
        assert_changed(other(tokens), model(tokens))


def test_schedule_of_one_name_equals_unshared_layers():
    sched, own = tiny(["t5"] * 3, depth=3), tiny("t5", depth=3, share_encoding=False)
    own.load_state_dict(sched.state_dict())
    tokens = torch.randint(0, V, (2, 7))
    with torch.no_grad():
        torch.testing.assert_close(sched(tokens), own(tokens), atol=0, rtol=0)


@pytest.mark.parametrize(
    ("schedule", "error", "match"),
    [
        (["rope", "rope"], ValueError, "depth=3 entries, got 2"),
        (["rope", "sinusoidal", "rope"], ValueError, r"encoding\[1\].*absolute"),
        (["rope", "rope_2d", "rope"], ValueError, "position_dims"),
        (["rope", 3, "rope"], TypeError, r"encoding\[1\]"),
        (["rope", ("rope", "base"), "rope"], TypeError, r"encoding\[1\]"),
        ({"rope": 3}, TypeError, "per-layer list"),
        (["rope", "ropee", "rope"], ValueError, "rope"),
    ],
)
def test_bad_schedules(schedule, error, match):
    with pytest.raises(error, match=match):
        tiny(schedule, depth=3)


def test_concatenating_encoding_is_projected_back():
    model = tiny("onehot")
    assert isinstance(model.in_proj, torch.nn.Linear)
    assert model.in_proj.in_features == model.encoding.embed_dim(32)
    assert model(torch.randint(0, V, (1, 4))).shape == (1, 4, V)


def test_sampling_and_bad_input():
    model = tiny("rope")
    prompt = torch.randint(0, V, (3, 4))
    torch.manual_seed(1)
    out = model.generate(prompt, 5, temperature=0.8, top_k=3)
    assert out.shape == (3, 9) and out.max() < V
    assert model.generate(prompt, 0).shape == (3, 4)
    with pytest.raises(ValueError, match="tokens"):
        model(torch.zeros(4, dtype=torch.long))
    with pytest.raises(ValueError, match="positions"):
        model(prompt, positions=torch.arange(5))
    with pytest.raises(ValueError, match="doc_ids"):
        model(prompt, doc_ids=torch.zeros(5, dtype=torch.long))
    with pytest.raises(ValueError, match="temperature"):
        model.generate(prompt, 2, temperature=-1.0)
    with pytest.raises(ValueError, match="top_k"):
        model.generate(prompt, 2, temperature=1.0, top_k=0)
    with pytest.raises(ValueError, match="causal"):
        tiny("rope", causal=False).generate(prompt, 2)
    with pytest.raises(ValueError, match="kv_heads"):
        TransformerLM(V, 32, 1, 4, kv_heads=3)
    with pytest.raises(ValueError, match="heads"):
        TransformerLM(V, 30, 1, 4)
    with pytest.raises(ValueError, match="unknown encoding"):
        TransformerLM(V, 32, 1, 4, encoding="ropee")
    cache = model.new_cache(3, 5)
    model(prompt, cache=cache)
    with pytest.raises(ValueError, match="max_tokens=5"):
        model(prompt[:, :2], cache=cache)


def test_empty_input_and_cache_inexact_generate():
    model = tiny("rope")
    assert model(torch.zeros(2, 0, dtype=torch.long)).shape == (2, 0, V)
    phase = tiny("phase")
    with pytest.warns(UserWarning, match="cache_exact=False"):
        phase.generate(torch.randint(0, V, (1, 3)), 2)


@pytest.mark.parametrize("temperature", [1e-40, 1e-30, 1e-8, 1e-3])
@pytest.mark.parametrize("top_k", [None, 3])
def test_a_tiny_temperature_samples_near_greedy(temperature, top_k):
    """Any temperature > 0 samples; a tiny one gives the greedy tokens (the largest logit's
    probability rounds to 1), never torch's inf / nan error."""
    from posenc.kv_cache import pick_token

    torch.manual_seed(0)
    logits = torch.randn(64, V) * 30
    logits[:, 0] = logits.amax(dim=-1) + 1.0  # a clear argmax
    for _ in range(3):
        got = pick_token(logits, temperature, top_k)
        assert torch.equal(got[:, 0], torch.zeros(64, dtype=torch.long))
    model = tiny("rope")
    prompt = torch.randint(0, V, (2, 4))
    greedy = model.generate(prompt, 4)
    if temperature < 1e-20:
        assert torch.equal(model.generate(prompt, 4, temperature=temperature, top_k=top_k), greedy)


@pytest.mark.parametrize(
    ("kwargs", "where"),
    [
        (dict(encoding="randomized", encoding_kwargs={"encoding": "INNER"}),
         "config['encoding_kwargs']['encoding']"),
        (dict(encoding=["rope", ("randomized", {"encoding": "INNER"})], depth=2),
         "config['encoding'][1][1]['encoding']"),
    ],
)  # fmt: skip
def test_save_refuses_a_config_a_checkpoint_cannot_rebuild(kwargs, where, tmp_path):
    """An encoding instance inside the config would write a checkpoint from_checkpoint cannot
    read: refused at save, naming the key, and nothing written."""
    inner = posenc.build("rope", head_dim=8)

    def swap(v):
        if v == "INNER":
            return inner
        if isinstance(v, dict):
            return {k: swap(x) for k, x in v.items()}
        if isinstance(v, list | tuple):
            return type(v)(swap(x) for x in v)
        return v

    kwargs = swap(kwargs)
    if isinstance(kwargs["encoding"], list):  # the schedule: randomized in every layer
        kwargs["encoding"][0] = ("randomized", {"encoding": "rope"})
    model = TransformerLM(vocab_size=V, dim=32, heads=4, **{"depth": 1, **kwargs})
    with pytest.raises(ValueError, match=rf"^save: {re.escape(where)} is a RoPE"):
        model.save(tmp_path / "m.pt")
    assert not (tmp_path / "m.pt").exists()
