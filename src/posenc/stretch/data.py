"""What the model reads: long real text that ships with Python, and retrieval prompts.

Documents (perplexity): pydoc_data's documentation topics (prose, ~113k SmolLM2 tokens) and the
standard library's longest source files, in that order; `--text FILE ...` for the user's own.
Protocol (as the YaRN and LongRoPE papers): the perplexity at length T is that of the first T
tokens of each document of at least T tokens.

Retrieval prompts are built in token ids to exactly T tokens, from a seed and a depth (where the
needle sits in the filler, 0 = start, 1 = end):
    passkey   Mohtashami & Jaggi 2023: a 5-digit pass key in repeated filler sentences
    multikey  RULER's multi-key needle (Hsieh et al. 2024): four "special magic numbers" for
              four words, one asked for (7 digits)
    vartrack  RULER's variable tracking, one hop: VAR A = n at the depth, VAR B = VAR A later;
              asked the value of B
Each answer is scored by exact match of the first number the model generates.
"""

from __future__ import annotations

import hashlib
import os
import random
import re
import sysconfig
from dataclasses import dataclass

STDLIB_FILES = ("_pydecimal.py", "typing.py", "argparse.py", "inspect.py", "pathlib.py")
TASKS = ("ppl", "passkey", "multikey", "vartrack")
RETRIEVAL = TASKS[1:]

FILLER = (
    "The grass is green. The sky is blue. The sun is yellow. Here we go. There and back again. "
)
WORDS = ("apple", "river", "candle", "forest", "violin", "harbor", "meadow", "lantern", "pebble",
         "falcon", "orchid", "glacier", "saddle", "comet", "thimble", "quarry")  # fmt: skip


@dataclass(frozen=True)
class Document:
    name: str
    text: str

    @property
    def digest(self) -> str:
        return hashlib.sha1(self.text.encode()).hexdigest()[:12]


def embedded_documents() -> list[Document]:
    """The long texts of this Python: pydoc_data's topics, then STDLIB_FILES."""
    from pydoc_data.topics import topics

    docs = [Document("pydoc_topics", "\n\n".join(topics[k] for k in sorted(topics)))]
    stdlib = sysconfig.get_paths()["stdlib"]
    for name in STDLIB_FILES:
        path = os.path.join(stdlib, name)
        if os.path.isfile(path):
            with open(path, encoding="utf-8") as f:
                docs.append(Document(name, f.read()))
    return docs


def read_texts(paths: list[str]) -> list[Document]:
    """--text FILE ...: each file a document (UTF-8); ValueError naming an unreadable one."""
    docs = []
    for path in paths:
        try:
            with open(path, encoding="utf-8") as f:
                text = f.read()
        except (OSError, UnicodeDecodeError) as err:
            why = getattr(err, "strerror", None) or err
            raise ValueError(f"--text {path}: cannot be read as UTF-8 text ({why})") from None
        if not text.strip():
            raise ValueError(f"--text {path}: the file is empty")
        docs.append(Document(os.path.basename(path), text))
    names = [d.name for d in docs]
    if len(set(names)) != len(names):  # two files of one name in different folders
        docs = [Document(f"{i}:{d.name}", d.text) for i, d in enumerate(docs)]
    return docs


# ---------------------------------------------------------------------------- retrieval prompts


class TooShort(ValueError):
    """A length that cannot hold a retrieval prompt's fixed parts."""


@dataclass(frozen=True)
class Prompt:
    ids: list[int]  # exactly the length asked for
    answer: str  # the number to retrieve
    max_new_tokens: int


def _encode(tokenizer, text: str) -> list[int]:
    return list(tokenizer(text, add_special_tokens=False)["input_ids"])


def _filler(tokenizer, n: int) -> list[int]:
    """n tokens of repeated filler sentences."""
    reps = n // max(1, len(_encode(tokenizer, FILLER))) + 2
    while len(ids := _encode(tokenizer, FILLER * reps)) < n:  # repeats may merge tokens
        reps *= 2
    return ids[:n]


def _assemble(tokenizer, length: int, head: str, needles: list[tuple[float, str]], question: str):
    """head + filler with each (depth, text) needle at its depth + question, in exactly `length`
    tokens; ValueError if `length` cannot hold the fixed parts."""
    head_ids, q_ids = _encode(tokenizer, head), _encode(tokenizer, question)
    needle_ids = [(d, _encode(tokenizer, t)) for d, t in sorted(needles)]
    fixed = len(head_ids) + len(q_ids) + sum(len(n) for _, n in needle_ids)
    room = length - fixed
    if room < 0:
        raise TooShort(f"{length} tokens cannot hold the prompt ({fixed} without filler)")
    fill = _filler(tokenizer, room)
    ids, at = list(head_ids), 0
    for depth, needle in needle_ids:
        cut = round(depth * room)
        ids += fill[at:cut] + needle
        at = cut
    ids += fill[at:] + q_ids
    assert len(ids) == length, (len(ids), length)
    return ids


def prompt(task: str, tokenizer, length: int, depth: float, seed: int) -> Prompt:
    """The retrieval prompt of `task` at `length` tokens, its needle at `depth`, from `seed`."""
    rng = random.Random(f"{task}:{seed}:{depth}:{length}")
    head = (
        "There is important information hidden inside a lot of irrelevant text. Find it and "
        "memorize it. I will quiz you about it.\n"
    )
    if task == "passkey":
        key = str(rng.randint(10000, 99999))
        needle = f" The pass key is {key}. Remember it. {key} is the pass key. "
        ids = _assemble(tokenizer, length, head, [(depth, needle)],
                        "\nWhat is the pass key? The pass key is")  # fmt: skip
        return Prompt(ids, key, 8)
    if task == "multikey":
        words = rng.sample(WORDS, 4)
        values = [str(rng.randint(1_000_000, 9_999_999)) for _ in words]
        others = [rng.random() for _ in words[1:]]
        needles = [(d, f" One of the special magic numbers for {w} is: {v}. ")
                   for d, w, v in zip([depth, *others], words, values)]  # fmt: skip
        asked = f"the special magic number for {words[0]} mentioned in the provided text"
        q = f"\nWhat is {asked}? The {asked.partition(' ')[2]} is"
        return Prompt(_assemble(tokenizer, length, head, needles, q), values[0], 10)
    if task == "vartrack":
        a, b = ("".join(rng.choice("ABCDEFGHIJKLMNOPQRSTUVWXYZ") for _ in range(5)) for _ in "ab")
        value = str(rng.randint(10000, 99999))
        later = depth + (1 - depth) * rng.random()
        needles = [(depth, f" VAR {a} = {value}. "), (later, f" VAR {b} = VAR {a}. ")]
        q = f"\nQuestion: what is the value of VAR {b}? Answer: The value of VAR {b} is"
        return Prompt(_assemble(tokenizer, length, head, needles, q), value, 8)
    raise ValueError(f"unknown retrieval task {task!r}; allowed: {', '.join(RETRIEVAL)}")


def first_number(text: str) -> str | None:
    m = re.search(r"\d+", text)
    return m.group(0) if m else None
