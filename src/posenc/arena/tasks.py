"""Arena tasks: `sample(rng, sizes) -> Batch`, one instance per entry of `sizes`.

Next-token prediction for a decoder: a sequence s gives inputs s[:-1] and targets s[1:], [B, T];
`mask` [B, T] marks the scored targets (the answer): teacher-forced exact match equals greedy
decoding's. Sizes n are in the task's unit; instances of different sizes share a batch,
right-padded with PAD (id 0, never scored), which in a causal decoder changes no real token.

    copy      x SEP x                      n symbols (10 symbols)       T = 2n
    reverse   x SEP reversed(x)                                         T = 2n
    sort      x SEP sorted(x)              (bucket sort over 5 symbols, Ruoss et al. 2023)
    addition  a0 b0 s0 k1 a1 b1 s1 k2 ...   n digits each, least-significant digit first;
                                           s_i sum digit, k carry out  T = 4n - 1
    passkey   filler KEY k filler QUERY k  (a 5-digit key at a random depth), T = n
    lm        bytes of a corpus            (every target scored),      T = n
"""

from __future__ import annotations

from functools import partial
from typing import NamedTuple

import numpy as np
import torch

from posenc.arena.config import validate_tasks
from posenc.arena.names import TASK_NAMES  # noqa: F401 - the task names, here too

PAD = 0


class Batch(NamedTuple):
    inputs: torch.Tensor  # [B, T] int64
    targets: torch.Tensor  # [B, T] int64
    mask: torch.Tensor  # [B, T] bool, True = scored


class _Task:
    min_size = 1

    def sample(self, rng: np.random.Generator, sizes) -> Batch:
        """One instance per entry of `sizes` (self._instances(rng, count, n) -> s, answer, each
        [count, T+1]), right-padded with PAD to the longest; rows keep the order of `sizes`."""
        sizes, name = np.asarray(sizes), self.name
        if sizes.ndim != 1 or sizes.size == 0 or not np.issubdtype(sizes.dtype, np.integer):
            raise ValueError(f"{name}: sizes must be a non-empty 1-D integer array, got {sizes!r}")
        if sizes.min() < self.min_size:
            raise ValueError(f"{name}: sizes must be >= {self.min_size}, got {int(sizes.min())}")
        B, total = len(sizes), self.tokens(int(sizes.max())) + 1
        s = np.full((B, total), PAD, dtype=np.int64)
        answer = np.zeros((B, total), dtype=bool)
        for n in np.unique(sizes):
            rows = np.flatnonzero(sizes == n)
            si, ai = self._instances(rng, len(rows), int(n))
            s[rows, : si.shape[1]] = si
            answer[rows, : ai.shape[1]] = ai
        tensor = lambda a: torch.from_numpy(np.ascontiguousarray(a))  # noqa: E731
        return Batch(tensor(s[:, :-1]), tensor(s[:, 1:]), tensor(answer[:, 1:]))

    def sample_batch(self, rng: np.random.Generator, batch_size: int, size: int) -> Batch:
        """`batch_size` instances of size `size` (no padding)."""
        if not isinstance(size, int | np.integer):
            raise ValueError(f"{self.name}: size must be an integer, got {size!r}")
        return self.sample(rng, np.full(batch_size, size, dtype=np.int64))


class SequenceTask(_Task):
    """x SEP f(x): copy, reverse, sort. Size n = symbols in x; sequence 2n + 1 tokens."""

    SEP = 1
    unit = "symbols"

    def __init__(self, name: str, symbols: int, transform):
        self.name, self.symbols, self.transform = name, symbols, transform
        self.vocab_size = 2 + symbols

    def tokens(self, n: int) -> int:
        return 2 * n

    def _instances(self, rng, count: int, n: int):
        x = rng.integers(2, 2 + self.symbols, size=(count, n))
        y = self.transform(x)
        sep = np.full((count, 1), self.SEP)
        s = np.concatenate([x, sep, y], axis=1)
        answer = np.zeros_like(s, dtype=bool)
        answer[:, n + 1 :] = True
        return s, answer


class AdditionTask(_Task):
    """a0 b0 s0 k1  a1 b1 s1 k2 ... (least-significant first, sum digit s_i and carry k_{i+1}
    scored): the scratchpad of Nye et al. 2021 / Lee et al. 2023, so that a model of the arena's
    size learns it and what is tested is the per-place rule past the trained positions. Digit d
    is token 1 + d."""

    name = "addition"
    unit = "digits"
    DIGIT0 = 1
    vocab_size = 11

    def tokens(self, n: int) -> int:
        return 4 * n - 1

    def _instances(self, rng, count: int, n: int):
        a = rng.integers(0, 10, size=(count, n))
        b = rng.integers(0, 10, size=(count, n))
        s = np.zeros((count, n, 4), dtype=np.int64)  # [a_i, b_i, s_i, k_{i+1}] per place
        carry = np.zeros(count, dtype=np.int64)
        for i in range(n):
            t = a[:, i] + b[:, i] + carry
            carry = t // 10
            s[:, i] = np.stack([a[:, i], b[:, i], t % 10, carry], axis=1)
        answer = np.zeros_like(s, dtype=bool)
        answer[:, :, 2:] = True
        return s.reshape(count, 4 * n) + self.DIGIT0, answer.reshape(count, 4 * n)


class PasskeyTask(_Task):
    """filler KEY k1..k5 filler QUERY k1..k5, the key at a random depth; T = n. Digit d is
    token 3 + d; fillers are 13..20."""

    name = "passkey"
    unit = "tokens"
    KEY, QUERY, DIGIT0, FILLER0 = 1, 2, 3, 13
    fillers, key_len = 8, 5
    vocab_size = 21
    min_size = 2 * 5 + 2

    def tokens(self, n: int) -> int:
        return n

    def _instances(self, rng, count: int, n: int):
        k = self.key_len
        n_fill = n + 1 - 2 * k - 2
        s = np.empty((count, n + 1), dtype=np.int64)
        answer = np.zeros_like(s, dtype=bool)
        key = rng.integers(0, 10, size=(count, k)) + self.DIGIT0
        fill = rng.integers(0, self.fillers, size=(count, n_fill)) + self.FILLER0
        depth = rng.integers(0, n_fill + 1, size=count)
        for i, d in enumerate(depth):
            s[i] = np.concatenate(
                [fill[i, :d], [self.KEY], key[i], fill[i, d:], [self.QUERY], key[i]]
            )
        answer[:, -k:] = True
        return s, answer


class LMTask(_Task):
    """Byte-level language modelling: random windows of the corpus' train split. Size = tokens."""

    name = "lm"
    unit = "tokens"
    vocab_size = 256

    def __init__(self, corpus):
        self.corpus = corpus

    def tokens(self, n: int) -> int:
        return n

    def _instances(self, rng, count: int, n: int):
        data = self.corpus.train
        if len(data) < n + 1:
            raise ValueError(f"lm: corpus train split ({len(data)} bytes) is shorter than {n}")
        start = rng.integers(0, len(data) - n, size=count)
        s = np.stack([data[i : i + n + 1] for i in start]).astype(np.int64)
        return s, np.ones_like(s, dtype=bool)

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


# symbols, f(x) [B, n] (module-level functions: tasks go to workers)
SEQUENCES = {
    "copy": (10, np.copy),
    "reverse": (10, partial(np.flip, axis=1)),
    "sort": (5, partial(np.sort, axis=1)),
}


def build_task(name: str, corpus=None):
    """The task registered under `name` (lm needs a `corpus`)."""
    validate_tasks([name])  # ValueError with the closest names
    if name in SEQUENCES:
        return SequenceTask(name, *SEQUENCES[name])
    if name != "lm":
        return {"addition": AdditionTask, "passkey": PasskeyTask}[name]()
    if corpus is None:
        raise ValueError("lm: needs a corpus")
    return LMTask(corpus)
