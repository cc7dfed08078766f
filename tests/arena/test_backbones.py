"""posenc.arena.backbones: transformers' LlamaForCausalLM as an arena backbone, end to end."""

from __future__ import annotations

import sqlite3

import pytest
import torch

from posenc.arena.backbones import HFLlama, build_model, decayed
from posenc.arena.cli import main
from posenc.arena.config import on_backbones
from posenc.model import TransformerLM

transformers = pytest.importorskip("transformers")
SIZE = dict(vocab_size=21, dim=32, depth=2, heads=4, train_len=16)


def test_hf_llama_is_llama_with_posencs_rope():
    """HFLlama(rope) has the logits of the same LlamaForCausalLM unpatched: posenc computes the
    model's own rotary embedding; a scaled rope changes them."""
    torch.manual_seed(0)
    model = build_model({"backbone": "hf-llama", **SIZE, "encoding": "rope"}).eval()
    assert isinstance(model, HFLlama) and model.encoding.family == "rotary"
    assert type(model.lm.model.rotary_emb).__module__ == "posenc.hf.patch"
    plain = transformers.LlamaForCausalLM(model.lm.config).eval()
    plain.load_state_dict(model.lm.state_dict())
    tokens = torch.randint(0, 21, (2, 40))  # past train_len
    with torch.no_grad():
        logits = model(tokens)
        assert logits.shape == (2, 40, 21)
        torch.testing.assert_close(logits, plain(tokens).logits, atol=1e-5, rtol=1e-5)
        scaled = build_model({"backbone": "hf-llama", **SIZE, "encoding": "rope",
                              "encoding_kwargs": {"scaling": {"rope_type": "linear",
                                                              "factor": 4.0}}})  # fmt: skip
        scaled.load_state_dict(model.state_dict())
        assert not torch.allclose(scaled.eval()(tokens), logits)


def test_build_model_and_weight_decay():
    assert isinstance(build_model({**SIZE, "encoding": "alibi"}), TransformerLM)
    with pytest.raises(ValueError, match="backbone must be posenc or hf-llama"):
        build_model({"backbone": "gpt2", **SIZE})
    model = build_model({"backbone": "hf-llama", **SIZE, "encoding": "nope"})
    names = {n for n, p in model.named_parameters() if decayed(n, p)}
    assert names and all(n.startswith("lm.model.layers.") and "norm" not in n for n in names)
    assert "lm.model.embed_tokens.weight" not in names


def test_labels_on_backbones():
    labels = ["nope", "rope", "rope+yarn", "alibi", "hf-llama:rope"]
    assert on_backbones(labels, ("posenc",)) == labels
    assert on_backbones(labels, ("posenc", "hf-llama")) == [
        *labels, "hf-llama:nope", "hf-llama:rope+yarn",
    ]  # fmt: skip
    assert on_backbones(labels, ("hf-llama",)) == [
        "hf-llama:nope", "hf-llama:rope", "hf-llama:rope+yarn",
    ]  # fmt: skip


def test_arena_run_on_both_backbones(tmp_path):
    db = str(tmp_path / "a.sqlite")
    argv = ["--tasks", "passkey", "--encodings", "rope,rope+yarn,rope+longrope",
            "--backbone", "posenc,hf-llama", "--seeds", "1", "--steps", "3", "--train-len", "16",
            "--eval-lens", "16,32", "--workers", "1", "--db", db,
            "--out", str(tmp_path / "o")]  # fmt: skip
    assert main(argv) == 0
    with sqlite3.connect(db) as conn:
        rows = conn.execute("SELECT DISTINCT encoding FROM results").fetchall()
    assert {r[0] for r in rows} == {
        "rope", "rope+yarn", "rope+longrope",
        "hf-llama:rope", "hf-llama:rope+yarn", "hf-llama:rope+longrope",
    }  # fmt: skip
