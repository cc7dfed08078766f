"""Every flag of `posenc stretch` and `posenc stretch report`: a bad value (type, range or
meaning) exits 2 with one line naming the flag, and leaves the filesystem as it was (no file
or folder made, a foreign database untouched). The table must cover every flag the parsers have."""

import os
import sqlite3

import pytest

from posenc.cli import main
from posenc.stretch.cli import parser, report_parser

pytest.importorskip("transformers")

# {placeholders} are paths made by the `place` fixture
RUN = {
    "--model": [["/nonexistent/model"], ["{no_weights}"], ["{no_tokenizer}"], ["{gpt2}"],
                ["{gpt2}", "--scalings", "yarn"], ["{truncated_gguf}"], ["{notes}"],
                ["{corrupt}"]],
    "--scalings": [["yarn(factor=abc)"], ["yarn(factor=true)"], ["dynamic_yarn(factor=4)"],
                   ["yarn@full_attention(factor=2)"], ["linear(beta_fast=2)"], ["yarn(factor"]],
    "--lengths": [["0"], ["abc"], ["2147483647", "--tasks", "passkey"],
                  ["64,100", "--scalings", "none,yarn"]],
    "--retrieval-lengths": [["0"], ["x"], ["999"]],
    "--tasks": [["ppl,summarize"]],
    "--text": [["/nonexistent.txt"]],
    "--docs": [["0"], ["two"]],
    "--depths": [["1.5"], ["nan"]],
    "--seeds": [["0"], ["-1"]],
    "--windows": [["0"], ["two"]],
    "--probes": [["0"], ["-3"]],
    "--tolerance": [["-1"], ["nan"], ["x"]],
    "--db": [["{foreign_db}"], ["{folder}"], ["{missing}/x.sqlite"]],
    "--out": [["{notes}"]],
    "--json": [["{db}"], ["{missing}/rows.json"], ["{folder}"], ["{foreign_db}"], ["{notes}"]],
    "--device": [["tpu"]],
    "--workers": [["0"]],
    "--ray": [[""]],
    "--cpus-per-cell": [["0"], ["2"]],
    "--gpus-per-cell": [["-1"], ["1"]],
}  # fmt: skip
REPORT = {
    "--db": [["{missing}/x.sqlite"], ["{foreign_db}"]],
    "--out": [["{notes}"]],
    "--json": [["{db}"], ["{missing}/rows.json"], ["{foreign_db}"], ["{notes}"]],
    "--tolerance": [["-1"]],
}
NO_VALUE = {"--help", "-h", "--quick"}


def flags(p) -> set:
    return {f for a in p._actions for f in a.option_strings} - NO_VALUE


def test_the_tables_cover_every_flag():
    assert flags(parser()) == set(RUN)
    assert flags(report_parser()) == set(REPORT)


@pytest.fixture
def place(tmp_path, tiny_lm_folder):
    from support.tiny_lm import tiny_folder
    from transformers import GPT2Config

    root = tmp_path / "inputs"
    root.mkdir()
    paths = {"folder": str(root), "missing": str(tmp_path / "missing"),
             "db": str(tmp_path / "run.sqlite"), "notes": str(root / "notes.txt")}  # fmt: skip
    (root / "notes.txt").write_text("x")
    for name, drop in (("no_weights", ".safetensors"), ("no_tokenizer", "tokenizer")):
        os.makedirs(root / name)
        for f in os.listdir(tiny_lm_folder):
            if drop not in f:
                os.link(os.path.join(tiny_lm_folder, f), root / name / f)
        paths[name] = str(root / name)
    os.makedirs(root / "corrupt")  # weights that do not load: refused before anything is made
    for f in os.listdir(tiny_lm_folder):
        if f.endswith(".safetensors"):
            (root / "corrupt" / f).write_bytes(b"\0" * 64)
        else:
            os.link(os.path.join(tiny_lm_folder, f), root / "corrupt" / f)
    paths["corrupt"] = str(root / "corrupt")
    paths["gpt2"] = tiny_folder(root / "gpt2", lambda v: GPT2Config(
        vocab_size=v, n_embd=32, n_layer=1, n_head=2, n_positions=128))  # fmt: skip
    with open(root / "truncated.gguf", "wb") as f:  # a GGUF header that stops short
        f.write(b"GGUF" + (3).to_bytes(4, "little") + (10).to_bytes(8, "little") + b"\0" * 7)
    paths["truncated_gguf"] = str(root / "truncated.gguf")
    with sqlite3.connect(root / "other.sqlite") as conn:
        conn.execute("CREATE TABLE notes (x)")
    paths["foreign_db"] = str(root / "other.sqlite")
    paths["tiny"] = tiny_lm_folder
    return paths


def snapshot(root) -> dict:
    out = {}
    for d, dirs, files in os.walk(root):
        for name in dirs + files:
            p = os.path.join(d, name)
            st = os.stat(p)
            out[p] = (st.st_size, st.st_mtime_ns)
    return out


def refused(argv, flag, tmp_path, capsys) -> None:
    before = snapshot(tmp_path)
    try:
        code = main(argv)
    except SystemExit as exit_:  # argparse's own refusal: one line too
        code = exit_.code
    err = capsys.readouterr().err.strip()
    assert code == 2, err
    assert len(err.splitlines()) == 1 and flag in err, err
    assert snapshot(tmp_path) == before, f"{argv} wrote something"


@pytest.mark.parametrize("flag, values", [(f, v) for f, vs in RUN.items() for v in vs])
def test_a_bad_run_flag_is_one_line_and_writes_nothing(place, tmp_path, capsys, flag, values):
    values = [v.format(**place) for v in values]
    base = {"--model": place["tiny"], "--db": place["db"], "--out": str(tmp_path / "out"),
            "--lengths": "64,192", "--tasks": "ppl"}  # fmt: skip
    base = {k: v for k, v in base.items() if k not in (flag, *values)}
    argv = ["stretch", *[x for kv in base.items() for x in kv], flag, *values]
    refused(argv, flag, tmp_path, capsys)


@pytest.mark.parametrize("flag, values", [(f, v) for f, vs in REPORT.items() for v in vs])
def test_a_bad_report_flag_is_one_line_and_writes_nothing(place, tmp_path, capsys, flag, values):
    values = [v.format(**place) for v in values]
    base = {"--db": place["db"], "--out": str(tmp_path / "out")}
    base = {k: v for k, v in base.items() if k != flag}
    if flag != "--db":  # a database to report on, made before the snapshot
        sqlite3.connect(place["db"]).close()
    argv = ["stretch", "report", *[x for kv in base.items() for x in kv], flag, *values]
    refused(argv, flag, tmp_path, capsys)
