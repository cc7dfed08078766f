"""posenc.arena.backbones: transformers' LlamaForCausalLM and an LSTM as arena backbones, end to
end."""

from __future__ import annotations

import sqlite3

import pytest
import torch
from support.changed import assert_changed

from posenc.arena.backbones import LSTMLM, HFLlama, build_model, decayed
from posenc.arena.cli import main
from posenc.arena.config import on_backbones, validate_encodings
from posenc.model import TransformerLM

SIZE = dict(vocab_size=21, dim=32, depth=2, heads=4, train_len=16)


@pytest.fixture
def transformers():
    return pytest.importorskip("transformers")


def test_hf_llama_is_llama_with_posencs_rope(transformers):
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
        assert_changed(scaled.eval()(tokens), logits)


def test_build_model_and_weight_decay(transformers):
    assert isinstance(build_model({**SIZE, "encoding": "alibi"}), TransformerLM)
    with pytest.raises(ValueError, match="backbone must be one of posenc, hf-llama, lstm"):
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


def test_arena_run_on_both_backbones(tmp_path, transformers):
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


@pytest.mark.parametrize("encoding, kwargs", [("nope", {}), ("sinusoidal", {}),
                                              ("sinusoidal", {"fusion": "concat"}),
                                              ("learned", {"max_len": 64})])  # fmt: skip
def test_lstm_reads_left_to_right_with_its_encoding(encoding, kwargs):
    """LSTMLM: logits [B, T, V]; causal (a later token never changes an earlier logit); the
    encoding is added to its inputs (nope: the same inputs at every position give the same
    output only through the recurrence)."""
    torch.manual_seed(0)
    model = build_model(
        {"backbone": "lstm", **SIZE, "encoding": encoding, "encoding_kwargs": kwargs}
    ).eval()
    assert isinstance(model, LSTMLM) and model.encoding.family in ("absolute", "none")
    tokens = torch.randint(0, 21, (2, 12))
    with torch.no_grad():
        logits = model(tokens)
        changed = tokens.clone()
        changed[:, 7:] = (changed[:, 7:] + 1) % 21
        assert logits.shape == (2, 12, 21)
        torch.testing.assert_close(model(changed)[:, :7], logits[:, :7])
        assert_changed(model(changed)[:, 7:], logits[:, 7:])
    names = {n for n, p in model.named_parameters() if decayed(n, p)}
    assert names and all(n.startswith("lstm.weight") for n in names)


def test_lstm_takes_absolute_encodings_only():
    with pytest.raises(ValueError, match="lstm backbone takes absolute encodings or nope"):
        build_model({"backbone": "lstm", **SIZE, "encoding": "rope"})
    with pytest.raises(ValueError, match="causal=True"):
        build_model({"backbone": "lstm", **SIZE, "causal": False})
    assert on_backbones(["nope", "rope", "sinusoidal(fusion=concat)"], ("lstm",)) == [
        "lstm:nope", "lstm:sinusoidal(fusion=concat)",
    ]  # fmt: skip
    with pytest.raises(ValueError, match="1-D absolute encodings and nope"):
        validate_encodings(["lstm:alibi"])
