"""posenc.explain: one encoding's page (with a trained checkpoint), and every encoding's."""

from __future__ import annotations

import pytest
import torch

import posenc
from posenc import explain
from posenc.explain.claims import inventory

SMALL = dict(dim=32, heads=4, max_pos=64)


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_checkpoint_trained_state(tmp_path, lang):
    """A trained table's page, in every language: the trained figures and measures, each text
    found in the catalog."""
    from posenc.explain import i18n

    i18n.MISSING.clear()
    torch.manual_seed(0)
    model = posenc.TransformerLM(
        vocab_size=16, dim=32, depth=1, heads=4, encoding="learned", max_len=32
    )
    with torch.no_grad():
        for p in model.encodings.parameters():
            p.copy_(torch.sin(torch.arange(p.numel(), dtype=torch.float32)).view_as(p))
    ckpt = tmp_path / "m.ckpt"
    torch.save({"config": model.config, "model": model.state_dict()}, ckpt)
    pg = explain.explain("learned", tmp_path / "page", checkpoint=ckpt, lang=lang, **SMALL)
    assert any(f.kind == "trained" for f in pg.figs) and pg.trained_measures
    assert (tmp_path / "page" / "trained_heatmap.png").is_file()
    heading = i18n.tr("Measured properties, trained", lang)
    assert heading in (tmp_path / "page" / "index.html").read_text(encoding="utf-8")
    assert i18n.MISSING.get(lang, set()) == set()
    with pytest.raises(ValueError, match="encoding 'learned', not 'rope'"):
        explain.explain("rope", tmp_path / "p2", checkpoint=ckpt, **SMALL)


def test_explain_all_index_and_comparison(tmp_path, monkeypatch):
    few = {k: posenc.ENCODINGS[k] for k in ("sinusoidal", "rope", "alibi", "nope")}
    monkeypatch.setattr(posenc, "ENCODINGS", few)
    pages = explain.explain_all(tmp_path, **SMALL)
    assert [p.name for p in pages] == ["sinusoidal", "rope", "alibi", "nope"]
    index = (tmp_path / "index.html").read_text()
    compare = (tmp_path / "compare.html").read_text()
    assert 'id="claim-003-worked-example"' in index
    # every inventoried claim of the seeds is listed, checked ones linked to their check
    assert all(it.id in index for it in inventory.ALL)
    checked = [it for it in inventory.ALL if it.check]
    assert checked and all(f'href="#{it.check}"' in index for it in checked)
    for pg in pages:
        assert f'href="{pg.name}/index.html"' in index
        for f in pg.figs:  # every figure of every page is on the comparison page
            assert f'src="{pg.name}/{f.file}"' in compare
            assert (tmp_path / pg.name / f.file).is_file()
