"""The issue's done-when check on a tiny random Llama: `posenc stretch` perplexities equal
transformers alone (exp of the mean token loss on the same windows, the text tokenized with the
tokenizer's defaults, BOS included) within 1%, with intervals in the JSON rows."""

import json
import math

import pytest
import torch


@pytest.fixture(scope="module")
def bos_folder(tmp_path_factory):
    """A tiny random Llama whose tokenizer puts a BOS token before every text."""
    pytest.importorskip("transformers")
    from support.tiny_lm import tiny_llama_folder
    from tokenizers.processors import TemplateProcessing
    from transformers import AutoModelForCausalLM, AutoTokenizer

    path = tiny_llama_folder(tmp_path_factory.mktemp("bos_lm"), seed=3)
    tok = AutoTokenizer.from_pretrained(path)
    tok.add_special_tokens({"bos_token": "<bos>"})
    tok.backend_tokenizer.post_processor = TemplateProcessing(
        single="<bos> $A", special_tokens=[("<bos>", tok.bos_token_id)]
    )
    tok.save_pretrained(path)
    model = AutoModelForCausalLM.from_pretrained(path)
    model.resize_token_embeddings(len(tok))
    model.save_pretrained(path)
    return path


def reference_ppl(folder, rope_parameters, text, length, stride, windows) -> float:
    """exp of the mean token loss of transformers' own model (rebuilt with the scaling) over
    the windows: the first `length` tokens of each `stride` of the text as the tokenizer
    encodes it by default (each window starting with the BOS it puts first)."""
    from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer

    tok = AutoTokenizer.from_pretrained(folder)
    ids = tok(text)["input_ids"]  # the defaults: [BOS] + the text's tokens
    assert ids[0] == tok.bos_token_id
    bos, body = ids[:1], ids[1:]
    config = AutoConfig.from_pretrained(folder)
    if rope_parameters is not None:
        config.rope_parameters = {"rope_theta": 10000.0, **rope_parameters}
    model = AutoModelForCausalLM.from_pretrained(folder, config=config).eval()
    losses = []
    for k in range(windows):
        x = torch.tensor([bos + body[k * (stride - 1) : k * (stride - 1) + length - 1]])
        with torch.no_grad():
            losses.append(float(model(x, labels=x).loss))
    return math.exp(sum(losses) / len(losses))


def test_stretch_perplexities_equal_transformers_alone(bos_folder, tmp_path):
    from pydoc_data.topics import topics

    from posenc.cli import main

    text = "\n\n".join(topics[k] for k in sorted(topics)[60:])  # not the tokenizer's text
    (tmp_path / "doc.txt").write_text(text)
    js = tmp_path / "rows.json"
    assert main(["stretch", "--model", bos_folder, "--text", str(tmp_path / "doc.txt"),
                 "--tasks", "ppl", "--scalings", "none,yarn", "--lengths", "96,160,224",
                 "--windows", "3", "--db", str(tmp_path / "s.sqlite"), "--out",
                 str(tmp_path / "out"), "--json", str(js)]) == 0  # fmt: skip
    rows = {(r["scaling"], r["length"]): r for r in json.loads(js.read_text())
            if r["metric"] == "ppl"}  # fmt: skip
    assert set(rows) == {(s, n) for s in ("none", "yarn(factor=1.75)") for n in (96, 160, 224)}
    for (label, n), r in rows.items():
        params = None if label == "none" else {"rope_type": "yarn", "factor": 1.75}
        want = reference_ppl(bos_folder, params, text, n, 224, 3)
        assert r["value"] == pytest.approx(want, rel=0.01), (label, n)
        assert r["n"] == 3 and r["lo"] <= r["value"] <= r["hi"] and r["text"] == "user"
