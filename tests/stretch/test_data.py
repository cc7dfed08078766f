"""posenc.stretch.data: the embedded texts, the tokenizer's defaults, the perplexity windows and
retrieval contexts of exactly T tokens."""

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from posenc.stretch import data


@pytest.fixture(scope="module")
def tokenizer(tiny_lm_folder):
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(tiny_lm_folder)


@pytest.fixture(scope="module")
def bos_tokenizer(tiny_lm_folder):
    """The tiny tokenizer made to put a BOS token before every text, as Llama's and Gemma's do."""
    from tokenizers.processors import TemplateProcessing
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(tiny_lm_folder)
    tok.add_special_tokens({"bos_token": "<bos>"})
    tok.backend_tokenizer.post_processor = TemplateProcessing(
        single="<bos> $A", special_tokens=[("<bos>", tok.bos_token_id)]
    )
    assert tok("a")["input_ids"][0] == tok.bos_token_id
    return tok


def test_embedded_documents_are_long_stable_and_of_two_kinds():
    docs = data.embedded_documents()
    assert [d.name for d in docs[:3]] == ["pydoc_topics", "kjv_bible", "_pydecimal.py"]
    assert [d.kind for d in docs[:3]] == ["python", "prose", "python"]
    assert all(len(d.text) > 100_000 for d in docs[:3])
    assert docs[1].text.startswith("In the beginning God created the heaven and the earth.")
    assert "[" not in docs[1].text and '"""' not in docs[1].text
    assert [d.digest for d in docs] == [d.digest for d in data.embedded_documents()]


def test_read_texts_refuses_unreadable_files(tmp_path):
    good = tmp_path / "a.txt"
    good.write_text("some text")
    (doc,) = data.read_texts([str(good)])
    assert (doc.text, doc.kind) == ("some text", "user")
    (tmp_path / "empty.txt").write_text(" \n")
    (tmp_path / "bin.txt").write_bytes(b"\xff\xfe\x00")
    for bad in ("missing.txt", "empty.txt", "bin.txt", "."):
        with pytest.raises(ValueError, match="--text"):
            data.read_texts([str(tmp_path / bad)])


def test_the_tokenizers_defaults_with_and_without_bos(tokenizer, bos_tokenizer):
    text = "The grass is green."
    assert data.specials(tokenizer) == ([], [])
    assert data.encode(tokenizer, text) == tokenizer(text)["input_ids"]
    assert data.specials(bos_tokenizer) == ([bos_tokenizer.bos_token_id], [])
    assert data.encode(bos_tokenizer, text) == [bos_tokenizer.bos_token_id] + data._encode(
        bos_tokenizer, text)  # fmt: skip


@pytest.mark.parametrize("bos", [False, True])
def test_windows_are_the_first_tokens_of_non_overlapping_strides(tokenizer, bos_tokenizer, bos):
    tok = bos_tokenizer if bos else tokenizer
    text = data.embedded_documents()[0].text[:20000]
    full, head = data.encode(tok, text), data.specials(tok)[0]
    body = data._encode(tok, text)
    assert data.window(body, head, 300, 500, 0) == full[:300]  # the papers' first T tokens
    seen, k = [], 0
    while (w := data.window(body, head, 300, 500, k)) is not None:
        assert len(w) == 300 and w[: len(head)] == head
        assert data.window(body, head, 500, 500, k)[:300] == w  # a prefix of the stride's
        seen.append(w[len(head) :])
        k += 1
    assert k == (len(body) - 300 + len(head)) // (500 - len(head)) + 1
    joined = [t for w in seen for t in w]  # the windows never share a token of the text
    starts = [i * (500 - len(head)) for i in range(k)]
    assert joined == [t for s in starts for t in body[s : s + 300 - len(head)]]


@pytest.mark.parametrize(("kw", "name"), [(dict(length=0), "length"), (dict(length=1), "length"),
                                          (dict(stride=100), "stride"), (dict(k=-1), "window"),
                                          (dict(length=2.5), "length")])  # fmt: skip
def test_a_window_outside_its_domain_is_refused(kw, name):
    args = dict(body=list(range(1000)), head=[7], length=200, stride=300, k=0) | kw
    with pytest.raises(ValueError, match=name):
        data.window(**args)


@settings(max_examples=20, deadline=None)
@given(st.sampled_from(data.RETRIEVAL), st.integers(500, 1500), st.floats(0, 1),
       st.integers(0, 10), st.booleans())  # fmt: skip
def test_contexts_fit_T_tokens_and_hold_every_answer(tokenizer, bos_tokenizer, task, length, depth,
                                                     seed, bos):  # fmt: skip
    tok = bos_tokenizer if bos else tokenizer
    depths = [depth] if task == "passkey" else sorted({depth, 0.1, 0.9})
    c = data.context(task, tok, length, depths, seed)
    assert len(c.ids) + max(len(p.question) for p in c.probes) == length
    assert c.ids[:1] == ([tok.bos_token_id] if bos else c.ids[:1])
    assert len(c.probes) == (1 if task == "passkey" else len(depths))
    text = tok.decode(c.ids)
    for p in c.probes:
        assert p.answer.isdigit() and p.answer in text
        assert tok.decode(p.answer_ids).strip() == p.answer
    assert data.context(task, tok, length, depths, seed) == c  # seeded


def test_every_key_is_asked_and_found_at_its_depth(tokenizer):
    c = data.context("multikey", tokenizer, 1500, data.spread(8), 0)
    text = tokenizer.decode(c.ids)
    where = []
    for p in c.probes:
        key = tokenizer.decode(p.question).split("Pass key: ")[1]
        where.append(text.index(f"Pass key: {key} {p.answer} {key} {p.answer}"))
    assert where == sorted(where) and len(set(where)) == 8  # spread depths, in order
    early, late = (data.context("passkey", tokenizer, 1200, [d], 0) for d in (0.1, 0.9))
    find = lambda c: tokenizer.decode(c.ids).index("The pass key is")  # noqa: E731
    assert find(early) < find(late)


@pytest.mark.parametrize(("depths", "length", "match"), [
    ([-0.5], 800, "depth"), ([1.5], 800, "depth"), ([math.nan], 800, "depth"), ([], 800, "depth"),
    ([0.5], 0, "length"), ([0.5], -3, "length"), (["0.5"], 800, "depth")])  # fmt: skip
def test_a_context_outside_its_domain_is_refused(tokenizer, depths, length, match):
    with pytest.raises(ValueError, match=match):
        data.context("passkey", tokenizer, length, depths, 0)


def test_a_length_too_short_for_the_prompt(tokenizer):
    with pytest.raises(data.TooShort):
        data.context("multikey", tokenizer, 20, [0.5], 0)
    with pytest.raises(ValueError, match="unknown retrieval task"):
        data.context("ppl", tokenizer, 500, [0.5], 0)


def test_first_number():
    assert data.first_number(" 12345. Remember") == "12345"
    assert data.first_number(" VAR X") is None
