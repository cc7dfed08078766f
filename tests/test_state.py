"""State that rebuilds: every derived buffer is recomputed on load, so the usual way to load a
large model (build on the meta device, to_empty(), load_state_dict()) gives the trained
model's logits, for every registered encoding."""

from __future__ import annotations

import pytest
import torch

import posenc
from posenc import TransformerLM

NAMES = sorted(posenc.ENCODINGS)
V, D, H = 11, 32, 4
# encodings whose derived state depends on settings: rope scalings, randomized over buffers
VARIANTS = [
    ("rope", {"scaling": {"rope_type": "yarn", "factor": 4.0}}),
    (
        "rope",
        {
            "scaling": {
                "rope_type": "llama3",
                "factor": 8.0,
                "low_freq_factor": 1.0,
                "high_freq_factor": 4.0,
            }
        },
    ),
    ("randomized", {"encoding": "alibi"}),
    ("randomized", {"encoding": "sandwich"}),
]


def trained(name: str, kwargs: dict, causal: bool = True) -> TransformerLM:
    torch.manual_seed(0)
    model = TransformerLM(V, D, 2, H, encoding=name, encoding_kwargs=kwargs, max_len=64,
                          train_len=64, causal=causal)  # fmt: skip
    with torch.no_grad():  # parameters away from their init: a load must carry them
        for p in model.parameters():
            p.add_(0.05 * torch.randn_like(p))
    return model.eval()


def loaded_from_meta(model: TransformerLM) -> TransformerLM:
    with torch.device("meta"):
        empty = TransformerLM(**model.config)
    empty = empty.to_empty(device="cpu")
    empty.load_state_dict(model.state_dict())
    return empty.eval()


@pytest.mark.parametrize("causal", [True, False])
@pytest.mark.parametrize(
    ("name", "kwargs"), [(n, {}) for n in NAMES] + VARIANTS, ids=lambda x: str(x or "")
)
def test_meta_to_empty_load_gives_the_trained_logits(name, kwargs, causal):
    if not causal and kwargs.get("encoding") == "alibi":  # the encoder form of the inner
        kwargs = {**kwargs, "encoding_kwargs": {"bidirectional": True}}
    try:
        model = trained(name, kwargs, causal)
    except ValueError as err:
        assert not causal and "one-directional" in str(err)
        pytest.skip("one-directional: no encoder form")
    empty = loaded_from_meta(model)
    tokens = torch.randint(0, V, (2, 16))
    with torch.no_grad():
        torch.testing.assert_close(empty(tokens), model(tokens), rtol=0, atol=0)


def test_load_keeps_the_buffers_device_and_dtype():
    """Rebuilt buffers keep what model.to() made of them (a bf16 model stays bf16)."""
    for name in ("rope", "alibi", "sandwich"):
        model = trained(name, {}).to(torch.bfloat16)
        before = {k: b.clone() for k, b in model.named_buffers()}
        model.load_state_dict(model.state_dict())
        after = dict(model.named_buffers())
        assert before.keys() == after.keys() and before
        for key, value in before.items():
            assert after[key].dtype == value.dtype == torch.bfloat16
            torch.testing.assert_close(after[key], value, rtol=0, atol=0)


def test_to_empty_garbage_is_replaced_on_load():
    """The rebuilt buffers equal a fresh build's, whatever to_empty left in them."""
    for name in ("rope", "alibi", "sandwich"):
        enc = posenc.build(name, dim=D, heads=H)
        fresh = {k: b.clone() for k, b in enc.named_buffers()}
        for b in enc.buffers():
            b.fill_(float("nan"))
        enc.load_state_dict(enc.state_dict())
        for key, b in enc.named_buffers():
            torch.testing.assert_close(b, fresh[key], rtol=0, atol=0)
