"""posenc.stretch.data: the embedded documents and retrieval prompts of exactly T tokens."""

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from posenc.stretch import data


@pytest.fixture(scope="module")
def tokenizer(tiny_lm_folder):
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(tiny_lm_folder)


def test_embedded_documents_are_long_and_stable():
    docs = data.embedded_documents()
    assert [d.name for d in docs[:2]] == ["pydoc_topics", "_pydecimal.py"]
    assert all(len(d.text) > 100_000 for d in docs[:2])
    assert docs[0].digest == data.embedded_documents()[0].digest


def test_read_texts_refuses_unreadable_files(tmp_path):
    good = tmp_path / "a.txt"
    good.write_text("some text")
    assert data.read_texts([str(good)])[0].text == "some text"
    (tmp_path / "empty.txt").write_text(" \n")
    (tmp_path / "bin.txt").write_bytes(b"\xff\xfe\x00")
    for bad in ("missing.txt", "empty.txt", "bin.txt", "."):
        with pytest.raises(ValueError, match="--text"):
            data.read_texts([str(tmp_path / bad)])


@settings(max_examples=25, deadline=None)
@given(st.sampled_from(data.RETRIEVAL), st.integers(400, 1500), st.floats(0, 1),
       st.integers(0, 10))  # fmt: skip
def test_prompts_are_exactly_T_tokens_and_hold_the_answer(tokenizer, task, length, depth, seed):
    p = data.prompt(task, tokenizer, length, depth, seed)
    assert len(p.ids) == length
    text = tokenizer.decode(p.ids)
    assert p.answer in text and p.answer.isdigit()
    assert data.prompt(task, tokenizer, length, depth, seed) == p  # seeded


def test_needle_sits_at_its_depth(tokenizer):
    early = data.prompt("passkey", tokenizer, 1200, 0.1, 0)
    late = data.prompt("passkey", tokenizer, 1200, 0.9, 0)
    where = lambda p: tokenizer.decode(p.ids).index("The pass key is")  # noqa: E731
    assert where(early) < where(late)


def test_a_length_too_short_for_the_prompt(tokenizer):
    with pytest.raises(data.TooShort):
        data.prompt("multikey", tokenizer, 20, 0.5, 0)


def test_first_number():
    assert data.first_number(" 12345. Remember") == "12345"
    assert data.first_number(" VAR X") is None
