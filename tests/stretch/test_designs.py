"""`posenc stretch` on tiny random models of each RoPE design (configs in designs.py): RoPE per
layer type (Gemma 3), Gemma 2, sliding windows, partial rotary, a large vocabulary. A label means
what transformers makes of it: the patched model gives the logits of transformers' own model
rebuilt with that scaling (a flat one through the model's config class, as a user's
rope_scaling would be)."""

import copy
import math
import sqlite3

import pytest
import torch

from posenc.cli import main

pytest.importorskip("transformers")

from support.designs import configs  # noqa: E402

from posenc.stretch import models, runner  # noqa: E402
from posenc.stretch.scalings import flat_targets, parse  # noqa: E402

DESIGNS = list(configs())
YARN = {"rope_type": "yarn", "factor": 2.0, "original_max_position_embeddings": 128}


@pytest.fixture(scope="module")
def folders(tmp_path_factory):
    from support.tiny_lm import tiny_folder

    root = tmp_path_factory.mktemp("designs")
    return {name: tiny_folder(root / name, make) for name, make in configs().items()}


def reference(folder, rope_scaling=None, rope_parameters=None):
    """transformers' own model of `folder` with a flat rope_scaling or new rope_parameters."""
    import transformers

    own = transformers.AutoConfig.from_pretrained(folder)
    d = copy.deepcopy(own.to_dict())
    if rope_scaling is not None:
        d["rope_scaling"] = copy.deepcopy(rope_scaling)  # transformers fills it in place
    if rope_parameters is not None:
        d["rope_parameters"] = rope_parameters
    cfg = type(own).from_dict(d)
    model = transformers.AutoModelForCausalLM.from_pretrained(folder, config=cfg,
                                                              dtype=torch.float32)  # fmt: skip
    return model.eval()


def patched_logits(folder, label, ids):
    model, _ = models.load(models.resolve(folder))
    types = models.rope_types(model.config, "m")
    s = parse(label).for_model(types, flat_targets(model.config) if types else None)
    params = s.params(context=128, head_dim=models.head_dim(model.config), factor=2.0)
    with torch.no_grad():
        return runner.repatch(model, params)(ids).logits, s


@pytest.mark.parametrize("design", DESIGNS)
def test_a_flat_label_is_what_transformers_makes_of_a_flat_rope_scaling(folders, design):
    ids = torch.randint(0, 500, (1, 256), generator=torch.Generator().manual_seed(0))
    got, s = patched_logits(folders[design], "yarn(factor=2)", ids)
    with torch.no_grad():
        want = reference(folders[design], rope_scaling=YARN)(ids).logits
    torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-4)
    if design == "gemma3":  # transformers scales the global layers only
        assert s.targets == ("full_attention",)
        with torch.no_grad():
            plain = reference(folders[design])(ids).logits
        assert (got - plain).abs().max() > 1e-3  # the scaling changed something


def test_a_label_at_a_layer_type_scales_that_type_only(folders):
    folder = folders["gemma3"]
    ids = torch.randint(0, 500, (1, 256), generator=torch.Generator().manual_seed(1))
    got, s = patched_logits(folder, "yarn@sliding_attention(factor=2)", ids)
    import transformers

    own = transformers.AutoConfig.from_pretrained(folder).rope_parameters
    nested = {**own, "sliding_attention": {**own["sliding_attention"], **YARN}}
    with torch.no_grad():
        want = reference(folder, rope_parameters=nested)(ids).logits
    torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-4)
    assert s.targets == ("sliding_attention",)


@pytest.mark.parametrize("design", DESIGNS)
def test_stretch_measures_each_design(folders, design, tmp_path, capsys):
    db = tmp_path / "d.sqlite"
    labels = "none,yarn,linear(factor=2)" + (
        ",yarn@sliding_attention" if design == "gemma3" else ""
    )
    args = ["stretch", "--model", folders[design], "--scalings", labels, "--lengths", "64,192",
            "--retrieval-lengths", "192", "--tasks", "ppl,passkey", "--docs", "1", "--depths",
            "0.5", "--seeds", "1", "--db", str(db), "--out", str(tmp_path / "o")]  # fmt: skip
    assert main(args) == 0
    err = capsys.readouterr().err
    with sqlite3.connect(db) as conn:
        got = conn.execute("SELECT encoding, eval_len, metric, value FROM results").fetchall()
    name = folders[design].rsplit("/", 1)[-1]
    want = {f"{name}:{lb}" for lb in ("none", "yarn(factor=1.5)", "linear(factor=2)")}
    ppl = {(e, n): math.exp(v) for e, n, m, v in got if m == "loss/w0"}  # one window each
    assert want <= {e for e, _ in ppl} and all(v > 1 for v in ppl.values())
    assert {e for e, _, m, _ in got if m.startswith("exact@")} >= want
    if design == "gemma3":  # said in the plan; each type's scaling measured apart
        assert "yarn(factor=1.5) scales the full_attention layers" in err
        loss = {e: v for e, n, m, v in got if m == "loss/w0" and n == 192}
        assert len({round(v, 9) for v in loss.values()}) == len(loss)
