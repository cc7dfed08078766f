"""posenc.stretch.measure and the runner's passes: the numbers equal transformers' own model."""

import pytest
import torch

from posenc.stretch import measure, runner
from posenc.stretch.data import embedded_documents


@pytest.fixture(scope="module")
def tiny(tiny_lm_folder):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    model = AutoModelForCausalLM.from_pretrained(tiny_lm_folder, dtype=torch.float32).eval()
    return tiny_lm_folder, model, AutoTokenizer.from_pretrained(tiny_lm_folder)


def rebuilt_loss(folder, rope_parameters, ids) -> float:
    """The mean next-token loss of transformers' model rebuilt with `rope_parameters`: the
    independent computation (its own rotary embedding, its own loss)."""
    from transformers import AutoConfig, AutoModelForCausalLM

    config = AutoConfig.from_pretrained(folder)
    if rope_parameters is not None:
        config.rope_parameters = {"rope_theta": 10000.0, **rope_parameters}
    model = AutoModelForCausalLM.from_pretrained(folder, config=config, dtype=torch.float32)
    with torch.no_grad():
        return float(model.eval()(ids[None], labels=ids[None]).loss)


@pytest.mark.parametrize("label", ["none", "linear", "dynamic", "yarn", "llama3", "longrope",
                                   "yarn(factor=3,beta_fast=16)", "proportional"])  # fmt: skip
def test_prefix_losses_equal_transformers_rebuilt_model(tiny, label):
    """The loss of every prefix read from one pass (static scalings) or from its own pass
    (dynamic past the context) equals transformers' model rebuilt with that scaling, run on
    the prefix alone."""
    from posenc.stretch.scalings import parse

    folder, _, tok = tiny
    text = embedded_documents()[0].text[:8000]
    s = parse(label)
    params = s.params(context=128, head_dim=16, factor=2.0)
    job = runner.Job("ppl/doc", s, params, f"tiny:{label}", 0, (64, 128, 192, 256), (),
                     runner.models.resolve(folder), "cpu", 128, 16, 1,
                     cfg={"text": label, "stride": 256, "windows": 2}, text=text)  # fmt: skip
    model, _ = runner.patched(job)
    rows = {(n, m): v for n, m, v, _ in runner.ppl_rows(job, model, tok)}
    assert set(rows) == {(n, m) for n in job.lengths for m in runner.metrics(job, n)}
    ids = torch.tensor(tok(text)["input_ids"])  # the tokenizer's defaults (no BOS here)
    for k in range(2):
        for n in job.lengths:
            ref = rebuilt_loss(folder, params, ids[256 * k : 256 * k + n])
            assert rows[(n, f"loss/w{k}")] == pytest.approx(ref, abs=2e-5), (label, n, k)
    runner._MEMO.clear()


def test_lengths_share_a_pass_exactly_when_frequencies_agree(tiny):
    _, model, _ = tiny
    patch = runner.repatch
    patch(model, {"rope_type": "dynamic", "factor": 1.0})
    fp = [measure.fingerprint(model, n, 16) for n in (32, 128, 129, 256)]
    assert fp[0] == fp[1] != fp[2] != fp[3]  # dynamic: unchanged up to the context
    patch(model, None)
    assert measure.fingerprint(model, 32, 16) == fp[0]  # ... where it is the unscaled model
    patch(model, {"rope_type": "yarn", "factor": 2.0})
    assert len({measure.fingerprint(model, n, 16) for n in (32, 128, 256)}) == 1


def test_window_rows_bands():
    nll = torch.arange(1.0, 10.0, dtype=torch.float64)  # 10 tokens: nll[t] is token t + 1's
    rows = measure.window_rows(nll, 10, 4)
    assert rows["loss"] == pytest.approx(5.0)
    assert rows["loss@0-4"] == pytest.approx(2.0) and rows["loss@4-10"] == pytest.approx(6.5)
    assert set(measure.window_rows(nll, 3, 4)) == {"loss", "loss@0-3"}
    bins = measure.window_rows(nll, 10, 4, width=4)  # positions 0-4, 4-8, 8-10
    assert (bins["pos@0-4"], bins["pos@4-8"], bins["pos@8-10"]) == (2.0, 5.5, 8.5)
    assert bins["loss@4-10"] == pytest.approx((4 * 5.5 + 2 * 8.5) / 6)


@pytest.mark.parametrize(("length", "context", "match"), [
    (11, 4, "longer than the pass"), (0, 4, "length"), (1, 4, "length"), (5, 0, "context"),
    (4.0, 4, "length"), (True, 4, "length")])  # fmt: skip
def test_window_rows_outside_the_pass_are_refused(length, context, match):
    with pytest.raises(ValueError, match=match):
        measure.window_rows(torch.ones(9, dtype=torch.float64), length, context)
    with pytest.raises(ValueError, match="T >= 2"):
        measure.token_nll(None, torch.tensor([5]))


@pytest.mark.parametrize("share", [False, True])
def test_a_probe_decodes_and_scores_as_full_forwards_would(tiny_lm_folder, share):
    """ask() after a prefilled context: its greedy tokens and its teacher-forced log-probability
    equal those of full forward passes over context + question (+ answer); the cache is left
    as it was, so the next probe gets the same answer as alone."""
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(tiny_lm_folder, dtype=torch.float32).eval()
    runner.repatch(model, {"rope_type": "yarn", "factor": 2.0})
    assert measure.use_prefix_attention(model) if share else True
    g = torch.Generator().manual_seed(1)
    ctx = torch.randint(0, 500, (150,), generator=g).tolist()
    probes = [(torch.randint(0, 500, (9,), generator=g).tolist(),
               torch.randint(0, 500, (3,), generator=g).tolist()) for _ in range(3)]  # fmt: skip
    with torch.no_grad():  # a probe whose answer is the model's own greedy continuation
        seq = ctx + probes[0][0]
        for _ in range(3):
            seq.append(int(model(torch.tensor([seq])).logits[0, -1].argmax()))
    probes.append((probes[0][0], seq[-3:]))
    cache = measure.prefill(model, ctx, measure.PromptCache(), "k")
    for q, a in probes:
        got, logp = measure.ask(model, cache, q, a, 5)
        assert cache.get_seq_length() == len(ctx)
        seq = ctx + q
        with torch.no_grad():
            full = model(torch.tensor([seq + a])).logits[0, len(seq) - 1 : -1].log_softmax(-1)
            for _ in range(5):
                seq.append(int(model(torch.tensor([seq])).logits[0, -1].argmax()))
        greedy = seq[len(ctx) + len(q) :]
        assert got == (greedy[:4] if a == greedy[:3] else greedy)  # read off, or decoded
        assert logp == pytest.approx(float(full.gather(1, torch.tensor(a)[:, None]).sum()),
                                     abs=1e-4)  # fmt: skip


@pytest.mark.parametrize(("kv", "q", "groups"), [(40, 39, 3), (40, 8, 1), (300, 120, 3), (9, 2, 2)])
def test_prefix_attention_equals_masked_attention(kv, q, groups):
    """A chunk of q queries after kv - q cached keys: the prefix and the chunk attended apart and
    merged equal SDPA with the explicit causal mask; full and one-query calls are SDPA's."""
    import torch.nn.functional as F

    g = torch.Generator().manual_seed(kv * q)
    query = torch.randn(1, 2 * groups, q, 16, generator=g)
    key, value = (torch.randn(1, 2, kv, 16, generator=g) for _ in "kv")
    module = torch.nn.Module()
    module.num_key_value_groups, module.is_causal = groups, True
    got, _ = measure.prefix_attention(module, query, key, value, None, scaling=0.3)
    mask = torch.ones(q, kv, dtype=torch.bool).tril(kv - q)
    ref = F.scaled_dot_product_attention(query, key.repeat_interleave(groups, 1),
                                         value.repeat_interleave(groups, 1), attn_mask=mask,
                                         scale=0.3)  # fmt: skip
    torch.testing.assert_close(got, ref.transpose(1, 2), atol=2e-6, rtol=1e-5)


@pytest.mark.parametrize(("kv", "q", "mask"), [(40, 40, False), (40, 7, True), (9, 1, True)])
def test_repeat_attention_equals_gqa_attention(kv, q, mask):
    """Key/value heads repeated before SDPA (the GPU path: O(T) memory in float32) equal
    transformers' SDPA on the grouped heads: full causal calls, and a chunk after a cache."""
    g = torch.Generator().manual_seed(kv + q)
    query = torch.randn(1, 6, q, 16, generator=g)
    key, value = (torch.randn(1, 2, kv, 16, generator=g) for _ in "kv")
    module = torch.nn.Module()
    module.num_key_value_groups, module.is_causal = 3, True
    m = torch.ones(1, 1, q, kv, dtype=torch.bool).tril(kv - q) if mask else None
    got, _ = measure.repeat_attention(module, query, key, value, m, scaling=0.3)
    ref, _ = measure.sdpa_attention_forward(module, query, key, value, m, scaling=0.3)
    torch.testing.assert_close(got, ref, atol=2e-6, rtol=1e-5)


def test_repeat_attention_only_off_the_cpu(tiny_lm_folder):
    """A model on the CPU keeps its attention (the prefix path is the CPU's)."""
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(tiny_lm_folder, attn_implementation="sdpa")
    assert not measure.use_repeat_attention(model)
    assert model.config._attn_implementation == "sdpa"


@pytest.mark.parametrize("params", [None, {"rope_type": "dynamic", "factor": 1.0},
                                    {"rope_type": "yarn", "factor": 2.0}])  # fmt: skip
def test_prompts_that_share_a_prefix_answer_as_alone(tiny_lm_folder, params):
    """Prompts of one length differing from a point on (a needle at a depth), in an order where
    each shares a different prefix with the last, and one of another length: reusing the cache
    gives the answers, and the logits, each prompt gets alone."""
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(tiny_lm_folder, dtype=torch.float32).eval()
    runner.repatch(model, params)
    g = torch.Generator().manual_seed(0)
    filler = torch.randint(0, 500, (200,), generator=g).tolist()
    prompts = []
    for cut in (190, 150, 60) * 2:  # two seeds, needles from the deepest
        needle = torch.randint(0, 500, (4,), generator=g).tolist()
        prompts.append((filler[:cut] + needle + filler[cut:])[:200])
    prompts.append(prompts[0][:170])  # another length: dynamic frequencies differ
    q, a = [3, 4, 5], [6]

    def answers(reuse):
        key = lambda p: measure.fingerprint(model, len(p), 16)  # noqa: E731
        return [measure.ask(model, measure.prefill(model, p, reuse or measure.PromptCache(),
                                                   key(p)), q, a, 6) for p in prompts]  # fmt: skip

    alone = answers(None)
    assert measure.use_prefix_attention(model)
    reuse = measure.PromptCache()
    shared = answers(reuse)
    assert [t for t, _ in shared] == [t for t, _ in alone]
    for (_, x), (_, y) in zip(shared, alone, strict=True):
        assert x == pytest.approx(y, abs=1e-4)
    # each prompt took the filler before its needle: the deepest prompt is kept for the
    # next seed's; the last prompt shares all but its last token with the first unless the
    # frequencies at its length differ (dynamic past the context)
    static = measure.fingerprint(model, 170, 16) == measure.fingerprint(model, 200, 16)
    assert reuse.reused == 2 * (190 + 150 + 60) - 190 + 169 * static
    assert reuse.tokens == 6 * 200 + 170
    # the logits of a chunk prefilled over a cropped cache (the last prompt's) equal the whole
    # prompt's
    with torch.no_grad():
        whole = model(torch.tensor([prompts[-1]])).logits[0, 100:]
        kv = reuse.entries[-1][1]  # the last prompt's
        kv.crop(100 - kv.get_seq_length())
        cache = {measure.cache_kwarg(model): kv}
        chunk = model(torch.tensor([prompts[-1][100:]]), **cache).logits[0]
    torch.testing.assert_close(chunk, whole, atol=1e-5, rtol=1e-5)


def test_models_that_cannot_share_a_prefix_keep_their_attention(tiny_lm_folder):
    from transformers import AutoConfig, AutoModelForCausalLM

    config = AutoConfig.from_pretrained(tiny_lm_folder)
    config.sliding_window = 64  # a window the split attention would ignore
    model = AutoModelForCausalLM.from_pretrained(tiny_lm_folder, config=config)
    assert not measure.use_prefix_attention(model)
    assert model.config._attn_implementation == "sdpa"
