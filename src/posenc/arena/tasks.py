"""Arena tasks: one protocol, `sample_batch(rng, batch_size, length) -> Batch`.

Every task is next-token prediction for a decoder: a sequence s of `length + 1` tokens gives
inputs = s[:-1] and targets = s[1:], both [B, T] with T = `length`; `mask` [B, T] marks the
targets that are scored (the answer). Exact match (every masked target predicted by argmax
under teacher forcing) equals greedy decoding's exact match, so no generation is needed.

`length` is the sequence length in tokens. A task fits the largest instance into it and pads
on the left with PAD (id 0, never scored) when the format leaves a token or two over.

    copy      x SEP x                      (10 symbols)
    reverse   x SEP reversed(x)
    sort      x SEP sorted(x)              (bucket sort over 5 symbols, Ruoss et al. 2023)
    addition  a + b = c                    (n digits each, least-significant digit first)
    passkey   filler KEY k filler QUERY k  (a 5-digit key at a random depth)
    lm        bytes of a corpus            (every target scored)
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
import torch

PAD = 0


class Batch(NamedTuple):
    inputs: torch.Tensor  # [B, T] int64
    targets: torch.Tensor  # [B, T] int64
    mask: torch.Tensor  # [B, T] bool, True = scored


def _to_batch(s: np.ndarray, answer: np.ndarray) -> Batch:
    """s [B, T+1] tokens, answer [B, T+1] bool (token is part of the answer) -> Batch."""
    return Batch(
        torch.from_numpy(np.ascontiguousarray(s[:, :-1])).long(),
        torch.from_numpy(np.ascontiguousarray(s[:, 1:])).long(),
        torch.from_numpy(np.ascontiguousarray(answer[:, 1:])).bool(),
    )


def _left_pad(s: np.ndarray, answer: np.ndarray, total: int) -> tuple[np.ndarray, np.ndarray]:
    pad = total - s.shape[1]
    if pad < 0:
        raise AssertionError("instance longer than the length asked")
    if pad:
        s = np.concatenate([np.full((s.shape[0], pad), PAD, dtype=s.dtype), s], axis=1)
        answer = np.concatenate([np.zeros((s.shape[0], pad), dtype=bool), answer], axis=1)
    return s, answer


def _check_length(name: str, length: int, min_len: int) -> None:
    if not isinstance(length, int | np.integer) or length < min_len:
        raise ValueError(f"{name}: length must be an integer >= {min_len}, got {length!r}")


class SequenceTask:
    """x SEP f(x): copy, reverse, sort. Sequence 2n + 1 tokens, so n = length // 2."""

    SEP = 1
    min_len = 2

    def __init__(self, name: str, symbols: int, transform):
        self.name, self.symbols, self.transform = name, symbols, transform
        self.vocab_size = 2 + symbols

    def sample_batch(self, rng: np.random.Generator, batch_size: int, length: int) -> Batch:
        _check_length(self.name, length, self.min_len)
        n = length // 2
        x = rng.integers(2, 2 + self.symbols, size=(batch_size, n))
        y = self.transform(x)
        sep = np.full((batch_size, 1), self.SEP)
        s = np.concatenate([x, sep, y], axis=1)
        answer = np.zeros_like(s, dtype=bool)
        answer[:, n + 1 :] = True
        return _to_batch(*_left_pad(s, answer, length + 1))


class AdditionTask:
    """a + b = c, each number least-significant digit first; a, b n digits, c n + 1 digits.

    Sequence 3n + 3 tokens, so n = (length - 2) // 3. Digit d is token 3 + d.
    """

    name = "addition"
    PLUS, EQ, DIGIT0 = 1, 2, 3
    vocab_size = 13
    min_len = 5

    def sample_batch(self, rng: np.random.Generator, batch_size: int, length: int) -> Batch:
        _check_length(self.name, length, self.min_len)
        n = (length - 2) // 3
        a = rng.integers(0, 10, size=(batch_size, n))  # LSD first
        b = rng.integers(0, 10, size=(batch_size, n))
        c = np.zeros((batch_size, n + 1), dtype=np.int64)
        carry = np.zeros(batch_size, dtype=np.int64)
        for i in range(n):
            t = a[:, i] + b[:, i] + carry
            c[:, i], carry = t % 10, t // 10
        c[:, n] = carry
        col = lambda v: np.full((batch_size, 1), v)  # noqa: E731
        d = self.DIGIT0
        s = np.concatenate([a + d, col(self.PLUS), b + d, col(self.EQ), c + d], axis=1)
        answer = np.zeros_like(s, dtype=bool)
        answer[:, 2 * n + 2 :] = True
        return _to_batch(*_left_pad(s, answer, length + 1))


class PasskeyTask:
    """filler KEY k1..k5 filler QUERY k1..k5: retrieve a key hidden at a random depth.

    Digit d is token 3 + d; filler tokens are 13..20. Sequence length + 1 tokens exactly.
    """

    name = "passkey"
    KEY, QUERY, DIGIT0, FILLER0 = 1, 2, 3, 13
    fillers, key_len = 8, 5
    vocab_size = 21
    min_len = 2 * 5 + 2

    def sample_batch(self, rng: np.random.Generator, batch_size: int, length: int) -> Batch:
        _check_length(self.name, length, self.min_len)
        k = self.key_len
        n_fill = length + 1 - 2 * k - 2
        s = np.empty((batch_size, length + 1), dtype=np.int64)
        answer = np.zeros_like(s, dtype=bool)
        key = rng.integers(0, 10, size=(batch_size, k)) + self.DIGIT0
        fill = rng.integers(0, self.fillers, size=(batch_size, n_fill)) + self.FILLER0
        depth = rng.integers(0, n_fill + 1, size=batch_size)
        for i in range(batch_size):
            d = depth[i]
            s[i] = np.concatenate(
                [fill[i, :d], [self.KEY], key[i], fill[i, d:], [self.QUERY], key[i]]
            )
        answer[:, -k:] = True
        return _to_batch(s, answer)


class LMTask:
    """Byte-level language modelling: random windows of the corpus' train split."""

    name = "lm"
    vocab_size = 256
    min_len = 1

    def __init__(self, corpus):
        self.corpus = corpus

    def sample_batch(self, rng: np.random.Generator, batch_size: int, length: int) -> Batch:
        _check_length(self.name, length, self.min_len)
        data = self.corpus.train
        if len(data) < length + 1:
            raise ValueError(f"lm: corpus train split ({len(data)} bytes) is shorter than {length}")
        start = rng.integers(0, len(data) - length, size=batch_size)
        s = np.stack([data[i : i + length + 1] for i in start]).astype(np.int64)
        return _to_batch(s, np.ones_like(s, dtype=bool))

    def eval_chunks(self, length: int, tokens: int) -> Batch:
        """The first `tokens` bytes of the valid split (rounded down to whole chunks), cut into
        non-overlapping chunks of `length`: the same bytes for every length."""
        data = self.corpus.valid
        n = min(tokens, len(data) - 1) // length
        if n < 1:
            raise ValueError(f"lm: valid split ({len(data)} bytes) is shorter than {length + 1}")
        x = torch.from_numpy(data[: n * length + 1].astype(np.int64))
        inputs = x[:-1].view(n, length)
        targets = x[1:].view(n, length)
        return Batch(inputs, targets, torch.ones_like(inputs, dtype=torch.bool))


TASK_NAMES = ("copy", "reverse", "sort", "addition", "passkey", "lm")


def build_task(name: str, corpus=None):
    """The task registered under `name` (lm needs a `corpus`)."""
    if name == "copy":
        return SequenceTask("copy", 10, lambda x: x)
    if name == "reverse":
        return SequenceTask("reverse", 10, lambda x: x[:, ::-1])
    if name == "sort":
        return SequenceTask("sort", 5, lambda x: np.sort(x, axis=1))
    if name == "addition":
        return AdditionTask()
    if name == "passkey":
        return PasskeyTask()
    if name == "lm":
        if corpus is None:
            raise ValueError("lm: needs a corpus")
        return LMTask(corpus)
    from posenc import closest_names

    close = closest_names(name, TASK_NAMES)
    hint = f"; did you mean {', '.join(repr(c) for c in close)}?" if close else ""
    raise ValueError(f"unknown task {name!r}{hint} Known tasks: {', '.join(TASK_NAMES)}")
