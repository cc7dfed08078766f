"""Arena task generators: shapes, masks, lengths as asked, answers correct."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from posenc.arena.corpus import load_corpus
from posenc.arena.tasks import TASK_NAMES, AdditionTask, PasskeyTask, build_task

ALGO = ("copy", "reverse", "sort", "addition", "passkey")


def check_protocol(task, batch, B, T):
    x, y, m = batch
    assert x.shape == y.shape == m.shape == (B, T)
    assert x.dtype == y.dtype == torch.int64 and m.dtype == torch.bool
    assert torch.equal(x[:, 1:], y[:, :-1])  # targets are the inputs shifted by one
    assert int(x.min()) >= 0 and int(max(x.max(), y.max())) < task.vocab_size
    assert m.any(dim=1).all()  # every sequence has scored tokens


@settings(max_examples=25, deadline=None)
@given(st.sampled_from(ALGO), st.integers(0, 200), st.integers(1, 5), st.integers(0, 2**31))
def test_protocol_every_task(name, extra, B, seed):
    task = build_task(name)
    T = task.min_len + extra
    batch = task.sample_batch(np.random.default_rng(seed), B, T)
    check_protocol(task, batch, B, T)


def answer(batch, i):
    """The scored targets of sequence i, and the inputs before the first scored one."""
    x, y, m = (t[i] for t in batch)
    first = int(m.nonzero()[0])
    return y[m].tolist(), x[: first + 1].tolist()


@pytest.mark.parametrize("T", [2, 9, 40, 41])
def test_copy_reverse_sort_answers(T):
    rng = np.random.default_rng(T)
    for name, f in (("copy", list), ("reverse", lambda s: s[::-1]), ("sort", sorted)):
        task = build_task(name)
        batch = task.sample_batch(rng, 4, T)
        for i in range(4):
            ans, prompt = answer(batch, i)
            items = [t for t in prompt[:-1] if t != 0]  # drop left padding, SEP is last
            assert prompt[-1] == task.SEP
            assert len(items) == len(ans) == T // 2
            assert ans == f(items)
            if name == "sort":
                assert set(items) <= set(range(2, 7))  # bucket sort over 5 symbols


@settings(max_examples=25, deadline=None)
@given(st.integers(5, 120), st.integers(0, 2**31))
def test_addition_against_python_ints(T, seed):
    task = AdditionTask()
    batch = task.sample_batch(np.random.default_rng(seed), 3, T)
    n = (T - 2) // 3
    for i in range(3):
        ans, prompt = answer(batch, i)
        prompt = [t for t in prompt if t != 0]
        d = task.DIGIT0
        a_digits = prompt[:n]
        assert prompt[n] == task.PLUS and prompt[-1] == task.EQ
        b_digits = prompt[n + 1 : 2 * n + 1]
        as_int = lambda ds, d=d: int("".join(str(t - d) for t in reversed(ds)))  # noqa: E731
        assert len(ans) == n + 1
        assert as_int(ans) == as_int(a_digits) + as_int(b_digits)  # LSD first


def test_passkey_retrieves_the_key():
    task = PasskeyTask()
    batch = task.sample_batch(np.random.default_rng(0), 16, 60)
    depths = set()
    for i in range(16):
        x = batch.inputs[i].tolist()
        k = x.index(task.KEY)
        depths.add(k)
        key = x[k + 1 : k + 1 + task.key_len]
        assert batch.targets[i][batch.mask[i]].tolist() == key
        assert x[-task.key_len] == task.QUERY  # inputs end QUERY k1..k4
    assert len(depths) > 4  # random depths


def test_lm_windows_and_eval_chunks(tmp_path):
    text = bytes(range(32, 127)) * 40
    (tmp_path / "a.txt").write_bytes(text)
    corpus = load_corpus(str(tmp_path / "a.txt"))
    assert len(corpus.train) + len(corpus.valid) == len(text)
    task = build_task("lm", corpus=corpus)
    batch = task.sample_batch(np.random.default_rng(0), 3, 16)
    check_protocol(task, batch, 3, 16)
    assert batch.mask.all()
    chunks = task.eval_chunks(8, 64)
    assert chunks.inputs.shape == (8, 8)
    assert torch.equal(chunks.inputs.flatten()[1:], chunks.targets.flatten()[:-1])
    assert torch.equal(
        chunks.inputs.flatten(), torch.from_numpy(corpus.valid[:64].astype(np.int64))
    )


def test_directory_corpus_split_is_deterministic_by_file(tmp_path):
    for i in range(40):
        (tmp_path / f"f{i}.txt").write_text(f"file {i}\n" * 20)
    a, b = load_corpus(str(tmp_path)), load_corpus(str(tmp_path))
    assert a.digest == b.digest and len(a.valid) > 0 and len(a.train) > 0
    assert len(a.train) + len(a.valid) == sum(len(f"file {i}\n" * 20) for i in range(40))


def test_stdlib_corpus_is_found():
    corpus = load_corpus(None)
    assert corpus.name == "stdlib" and corpus.files > 100
    assert len(corpus.valid) > 100_000 and len(corpus.train) > 10 * len(corpus.valid) // 2


def test_unknown_task_suggests_names():
    with pytest.raises(ValueError, match="did you mean 'reverse'"):
        build_task("revers")
    assert set(TASK_NAMES) == {"copy", "reverse", "sort", "addition", "passkey", "lm"}


def test_lengths_below_minimum_are_rejected():
    with pytest.raises(ValueError, match="length must be an integer >= 12"):
        PasskeyTask().sample_batch(np.random.default_rng(0), 2, 11)
