"""--quick sizes itself to the model and the machine: past the context where the estimate fits
its budget, else perplexity alone, else the short-context cost of factor-2 scalings inside the
context; never a silent factor 1."""

import pytest

pytest.importorskip("transformers")

from posenc.stretch import cli, models, runner  # noqa: E402
from posenc.stretch.scalings import parse_all  # noqa: E402


def smollm2_like():
    from transformers import LlamaConfig

    return LlamaConfig(vocab_size=49152, hidden_size=576, intermediate_size=1536,
                       num_hidden_layers=30, num_attention_heads=9, num_key_value_heads=3,
                       max_position_embeddings=8192)  # fmt: skip


@pytest.mark.parametrize("rate, lengths, tasks", [
    (1e13, "1x,1.25x", "ppl,passkey"),   # a fast machine: the extension and retrieval
    (1e11, "1x,1.25x", "ppl"),           # perplexity alone fits (this CPU, unloaded)
    (2e10, None, "ppl,passkey"),         # inside the context, factor 2 given
])  # fmt: skip
def test_quick_fits_its_budget(monkeypatch, rate, lengths, tasks):
    monkeypatch.setattr(runner, "cpu_rate", lambda: rate)
    config = smollm2_like()
    labels = parse_all("none,yarn,dynamic")
    got, got_tasks, scalings, note = cli.quick_grid(config, 8192, True, labels)
    assert got_tasks == tasks and "GFLOP/s" in note and "min" in note
    n = max(cli.parse_lengths(got, 8192))
    k = 1 + runner.RETRIEVAL_PASSES * ("passkey" in tasks)
    assert len(scalings) * k * models.flops(config, n) / rate <= cli.QUICK_SECONDS
    if lengths:
        assert got == lengths
    else:
        assert n <= 8192 and all(s.name == "none" or dict(s.kwargs)["factor"] == 2
                                 for s in scalings)  # fmt: skip
