"""Arena task generators: shapes, masks, sizes in each task's unit, answers checked against
Python (list copy, reversed, sorted, int addition) at every size, right padding."""

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
    x, y, m = batch[:3]
    assert x.shape == y.shape == m.shape == (B, T)
    assert x.dtype == y.dtype == torch.int64 and m.dtype == torch.bool
    assert torch.equal(x[:, 1:], y[:, :-1])  # targets are the inputs shifted by one
    assert int(x.min()) >= 0 and int(max(x.max(), y.max())) < task.vocab_size
    assert m.any(dim=1).all()  # every sequence has scored tokens


@settings(max_examples=25, deadline=None)
@given(st.sampled_from(ALGO), st.integers(0, 60), st.integers(1, 5), st.integers(0, 2**31))
def test_protocol_every_task(name, extra, B, seed):
    task = build_task(name)
    n = task.min_size + extra
    batch = task.sample_batch(np.random.default_rng(seed), B, n)
    check_protocol(task, batch, B, task.tokens(n))


@settings(max_examples=25, deadline=None)
@given(st.sampled_from(ALGO), st.lists(st.integers(0, 30), min_size=1, max_size=6),
       st.integers(0, 2**31))  # fmt: skip
def test_mixed_sizes_are_right_padded_and_start_at_position_zero(name, extra, seed):
    """Each row holds one instance of its own size from position 0; PAD (never scored) after."""
    task = build_task(name)
    sizes = np.array([task.min_size + e for e in extra])
    x, y, m = task.sample(np.random.default_rng(seed), sizes)[:3]
    assert x.shape[1] == task.tokens(int(sizes.max()))
    for i, n in enumerate(sizes):
        T = task.tokens(int(n))
        assert (x[i, :T] != 0).all() and (x[i, T + 1 :] == 0).all()  # pads after the instance
        assert not m[i, T:].any() and m[i, :T].any()


def answer(batch, i):
    """The scored targets of sequence i, and the inputs before the first scored one."""
    x, y, m = (t[i] for t in batch[:3])
    first = int(m.nonzero()[0])
    return y[m].tolist(), x[: first + 1].tolist()


@pytest.mark.parametrize("n", range(1, 25))
def test_copy_reverse_sort_answers_at_every_size(n):
    rng = np.random.default_rng(n)
    for name, f in (("copy", list), ("reverse", lambda s: s[::-1]), ("sort", sorted)):
        task = build_task(name)
        batch = task.sample_batch(rng, 4, n)
        assert batch.inputs.shape[1] == task.tokens(n) == 2 * n
        for i in range(4):
            ans, prompt = answer(batch, i)
            items = prompt[:-1]  # no padding at one size; SEP is last
            assert prompt[-1] == task.SEP
            assert len(items) == len(ans) == n
            assert ans == f(items)
            if name == "sort":
                assert set(items) <= set(range(2, 7))  # bucket sort over 5 symbols


@settings(max_examples=40, deadline=None)
@given(st.integers(1, 40), st.integers(0, 2**31))
def test_addition_against_python_ints_at_every_digit_count(n, seed):
    """Places a_i b_i s_i k_{i+1}, LSD first: the sum digits and the last carry spell a + b; the
    scored tokens are the sum digits and the carries."""
    task = AdditionTask()
    batch = task.sample_batch(np.random.default_rng(seed), 3, n)
    assert batch.inputs.shape[1] == task.tokens(n) == 4 * n - 1
    as_int = lambda ds: int("".join(str(t - task.DIGIT0) for t in reversed(ds)))  # noqa: E731
    for i in range(3):
        seq = torch.cat([batch.inputs[i, :1], batch.targets[i]]).view(n, 4).tolist()
        a, b, s, k = (list(col) for col in zip(*seq, strict=True))
        assert as_int(s + k[-1:]) == as_int(a) + as_int(b)
        carry_in = [1] + k[:-1]  # tokens: digit d is 1 + d
        carries = [x + y + c - 3 >= 10 for x, y, c in zip(a, b, carry_in, strict=True)]
        assert [c - 1 for c in k] == [int(c) for c in carries]
        scored = batch.targets[i][batch.mask[i]].view(n, 2).tolist()
        assert scored == [[x, y] for x, y in zip(s, k, strict=True)]


def test_passkey_retrieves_the_key():
    task = PasskeyTask()
    batch = task.sample_batch(np.random.default_rng(0), 16, 60)
    assert batch.inputs.shape[1] == task.tokens(60) == 60
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
    with pytest.raises(ValueError, match="sizes must be >= 12"):
        PasskeyTask().sample_batch(np.random.default_rng(0), 2, 11)
    with pytest.raises(ValueError, match="sizes must be >= 1"):
        build_task("copy").sample(np.random.default_rng(0), [3, 0])
