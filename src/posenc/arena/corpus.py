"""Byte-level corpora for `lm`: Python's standard library source by default, or a text file or
directory; files go to valid by a hash of their path (1 in 10), a single file by bytes (the last
10%).
"""

from __future__ import annotations

import hashlib
import os
import sysconfig
from dataclasses import dataclass

import numpy as np

SKIP_DIRS = {"site-packages", "dist-packages", "__pycache__", "test", "tests", ".git"}
VALID_EVERY = 10


@dataclass
class Corpus:
    name: str  # "stdlib" or the path given
    train: np.ndarray  # uint8 [N]
    valid: np.ndarray  # uint8 [M]
    files: int
    digest: str  # sha1 of the bytes and the split, part of the config hash


def _walk(root: str, suffix: str | None) -> list[str]:
    out = []
    for dirpath, dirs, files in os.walk(root, onerror=_raise):
        dirs[:] = sorted(d for d in dirs if d not in SKIP_DIRS and not d.startswith("."))
        for f in sorted(files):
            if f.startswith(".") or (suffix and not f.endswith(suffix)):
                continue
            out.append(os.path.join(dirpath, f))
    return out


def _raise(err: OSError) -> None:
    raise err


def load_corpus(path: str | None = None) -> Corpus:
    """The stdlib corpus (path None) or the text file / directory at `path`."""
    if path is None:
        root = sysconfig.get_paths()["stdlib"]
        files, name = _walk(root, ".py"), "stdlib"
    else:
        root, name = os.path.abspath(os.path.expanduser(path)), path
        if os.path.isdir(root):
            try:
                files = _walk(root, None)
            except OSError as err:
                raise ValueError(f"--corpus: cannot read {path}: {err.strerror or err}") from None
        elif os.path.exists(root):
            files = [root]
        else:
            raise ValueError(f"--corpus: no such file or directory: {path}")
    train, valid = [], []
    for f in files:
        rel = os.path.relpath(f, root) if os.path.isdir(root) else os.path.basename(f)
        try:
            with open(f, "rb") as fh:
                data = fh.read()
        except OSError as err:
            raise ValueError(f"--corpus: cannot read {f}: {err.strerror or err}") from None
        if b"\0" in data[:4096]:  # binary file in a directory: not text, skip it
            if len(files) == 1:
                raise ValueError(f"--corpus: {path} is not a text file")
            continue
        to_valid = len(files) > 1 and hashlib.sha1(rel.encode()).digest()[0] % VALID_EVERY == 0
        (valid if to_valid else train).append(data)
    if sum(map(len, train + valid)) == 0:
        raise ValueError(f"--corpus: {path or root} holds no text")
    if not train or not valid:
        blob = b"".join(train + valid)
        cut = len(blob) - max(1, len(blob) // VALID_EVERY)
        train_b, valid_b = blob[:cut], blob[cut:]
    else:
        train_b, valid_b = b"".join(train), b"".join(valid)
    digest = hashlib.sha1(train_b + b"\0--valid--\0" + valid_b).hexdigest()[:16]
    as_array = lambda b: np.frombuffer(b, dtype=np.uint8)  # noqa: E731
    return Corpus(name, as_array(train_b), as_array(valid_b), len(files), digest)
