"""End-to-end runs of the `posenc` command (list, show, errors)."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

import posenc
from posenc.cli import COMMANDS, FAMILIES, parsers


def run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "posenc", *args], capture_output=True, text=True, timeout=120
    )


def test_help_lists_commands():
    out = run("--help")
    assert out.returncode == 0
    for name in ("list", "show", "explain", "arena", "bench"):
        assert name in out.stdout


SRC = Path(__file__).resolve().parents[1] / "src"
HEAVY = ("torch", "triton", "sympy")  # what a --help or a usage error never imports


def imported(*args: str) -> tuple[subprocess.CompletedProcess, set[str]]:
    """`posenc ARGS` run from this tree, and the modules it imported (`python -X importtime`)."""
    proc = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "posenc", *args],
        capture_output=True, text=True, timeout=120, env={**os.environ, "PYTHONPATH": str(SRC)},
    )  # fmt: skip
    lines = [line.split("|")[-1] for line in proc.stderr.splitlines() if line.startswith("import")]
    return proc, {line.strip() for line in lines}


def heavy(modules: set[str]) -> set[str]:
    return {m for m in modules if m.split(".")[0] in HEAVY}


def errors(proc: subprocess.CompletedProcess) -> list[str]:
    """stderr without importtime's lines."""
    return [line for line in proc.stderr.splitlines() if not line.startswith("import time:")]


def test_every_command_is_walked():
    """parsers() holds every command of COMMANDS (the tests below walk it)."""
    assert {words.split()[0] for words in parsers()} == set(COMMANDS)


@pytest.mark.parametrize("words", list(parsers()))
def test_every_command_help_imports_no_torch(words):
    proc, modules = imported(*words.split(), "--help")
    assert proc.returncode == 0, errors(proc)
    assert proc.stdout.startswith(f"usage: posenc {words}")
    assert "posenc.cli" in modules  # the reading works
    assert not heavy(modules)


def usage_errors() -> list[tuple[list[str], list[str]]]:
    """(argv, the words its one-line error names): an unknown command; for every command an
    unknown flag (named first, whatever else is missing) and its required arguments left out."""
    out = [(["lsit"], ["'lsit'", "list"]), (["--no-such-flag"], ["'--no-such-flag'"])]
    for words, parser in parsers().items():
        out.append(([*words.split(), "--no-such-flag"], ["unrecognized", "--no-such-flag"]))
        required = [a.option_strings[0] if a.option_strings else a.metavar or a.dest
                    for a in parser._actions if a.required]  # fmt: skip
        if required:
            out.append((words.split(), ["required", *required]))
    return out


@pytest.mark.parametrize(("argv", "named"), usage_errors(), ids=lambda v: " ".join(v))
def test_a_usage_error_is_one_line_without_torch(argv, named):
    proc, modules = imported(*argv)
    assert proc.returncode == 2
    (line,) = errors(proc)
    assert line.startswith("posenc") and all(word in line for word in named), line
    assert not heavy(modules)


def test_version_imports_no_torch():
    proc, modules = imported("-V")
    assert proc.returncode == 0 and proc.stdout.startswith("posenc ")
    assert "posenc.cli" in modules and not heavy(modules)


def test_list_imports_only_what_it_prints():
    """torch and the encodings; not the compiler stack (torch._dynamo pulls in sympy and
    triton), plotting or transformers."""
    proc, modules = imported("list")
    assert proc.returncode == 0, errors(proc)
    assert "posenc.encodings.rotary" in modules
    heavy = {"torch._dynamo", "sympy", "triton", "matplotlib", "transformers", "posenc.arena"}
    assert not heavy & modules


def test_torch_free_names_are_the_registries():
    """What --help shows without torch is what the commands use: `posenc list --family`'s
    families, `posenc conform --dtype`'s names, `posenc arena`'s defaults."""
    from posenc.arena import cli as arena
    from posenc.arena.config import ArenaConfig
    from posenc.hf import cli as hf
    from posenc.hf import golden

    assert set(FAMILIES) == {cls.family for cls in posenc.ENCODINGS.values()}
    assert tuple(golden.DTYPES) == hf.DTYPES
    assert {key: getattr(ArenaConfig(), key) for key in arena.DEFAULTS} == arena.DEFAULTS


def test_list_shows_every_registered_encoding():
    out = run("list")
    assert out.returncode == 0, out.stderr
    names = {line.split()[0] for line in out.stdout.splitlines()[1:] if line.strip()}
    assert names == set(posenc.ENCODINGS)


def test_show_sinusoidal_prints_seed_002_table():
    out = run("show", "sinusoidal", "--dim", "4", "--positions", "0:3")
    assert out.returncode == 0, out.stderr
    rows = [line.split() for line in out.stdout.splitlines()[1:]]
    assert rows[0] == ["0", "0.0000", "1.0000", "0.0000", "1.0000"]
    assert rows[1] == ["1", "0.8415", "0.5403", "0.0100", "1.0000"]
    assert rows[2] == ["2", "0.9093", "-0.4161", "0.0200", "0.9998"]


def test_show_alibi_prints_head_0_bias():
    out = run("show", "alibi", "--heads", "8", "--positions", "0:8")
    assert out.returncode == 0, out.stderr
    rows = [line.split()[1:] for line in out.stdout.splitlines()[1:]]
    assert len(rows) == 8 and all(len(r) == 8 for r in rows)
    # head 0 of 8 heads has slope 1/2: bias(i, j) = -(i - j) / 2 below the diagonal
    assert float(rows[4][0]) == pytest.approx(-2.0)
    assert float(rows[7][6]) == pytest.approx(-0.5)


@pytest.mark.parametrize("name", sorted(posenc.ENCODINGS))
def test_show_every_encoding_runs(name, capsys):
    from posenc.cli import main

    assert main(["show", name, "--dim", "8", "--heads", "2", "--positions", "0:4"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) >= 2


def test_unknown_encoding_suggests_closest():
    out = run("show", "sinusodial")
    assert out.returncode == 2
    assert "sinusoidal" in out.stderr
    assert "Traceback" not in out.stderr


@pytest.mark.parametrize("span", ["3:1", "a:b", "-1:4"])
def test_bad_positions_span(span):
    out = run("show", "nope", "--positions", span)
    assert out.returncode == 2
    assert "--positions" in out.stderr


def test_a_closed_pipe_is_no_traceback():
    """`posenc show ... | head -1`: the reader closes the pipe after one line of a table far
    larger than the pipe's buffer; no traceback on stderr."""
    import subprocess
    import sys

    cmd = f"{sys.executable} -m posenc show sinusoidal --dim 64 --positions 0:5000 | head -1"
    proc = subprocess.run(["bash", "-c", cmd], capture_output=True, text=True, timeout=120)
    assert proc.stdout.startswith("Sinusoidal") and proc.stderr == ""


def value_flags():
    """(command words, flag) for every flag of every command that takes a value."""
    from posenc.cli import parsers

    out = []
    for words, parser in parsers().items():
        for action in parser._actions:
            if action.option_strings and action.nargs != 0:
                out.append((words, action.option_strings[-1]))
    return out


@pytest.mark.parametrize(("words", "flag"), value_flags())
@pytest.mark.parametrize("value", ["", " ", ",", " , ,"])
def test_every_flag_refuses_an_empty_value(words, flag, value, capsys):
    """An empty value (`--tasks "$UNSET"`) is refused in one line, exit 2, for every flag of
    every command: never read as "not given" (which ran the 71-minute default grid)."""
    from posenc.cli import main

    argv = [*words.split(), flag, value]
    if words == "show":
        argv.insert(1, "nope")
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and flag in err and "empty value" in err, err


def test_value_flags_cover_every_command():
    from posenc.cli import COMMANDS

    words = {w for w, _ in value_flags()}
    assert {w.split()[0] for w in words} == set(COMMANDS)  # every command has its parser
    assert {"arena report", "stretch report"} <= words
    assert ("arena", "--tasks") in value_flags() and ("arena", "--encodings") in value_flags()


@pytest.mark.parametrize(
    "name", sorted(n for n, c in posenc.ENCODINGS.items() if c.family == "absolute")
)
def test_show_header_counts_the_columns_it_prints(name, capsys):
    """Concatenating encodings (onehot, index, phase, ...) print embed_dim(D) columns: the
    header names that many."""
    import re

    from posenc.cli import main

    assert main(["show", name, "--dim", "4", "--positions", "0:5"]) == 0
    header, *rows = capsys.readouterr().out.splitlines()
    printed = len(rows[0].split()) - 1  # the first field is the position
    assert re.search(rf"columns: the {printed} dims", header), header


@pytest.mark.parametrize("name", sorted(posenc.ENCODINGS))
def test_show_refuses_a_table_too_large_in_one_line(name, capsys):
    """A span whose table (or bias matrix, or learned table) cannot fit: one line naming
    --positions and the limit, exit 2, before anything is allocated."""
    from posenc.cli import main

    assert main(["show", name, "--dim", "64", "--positions", "0:2000000"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--positions" in err and "limit" in err


# ------------------------------------------------------------------------------ every flag


class Reached(BaseException):
    """Raised where a command starts its work: a bad value that got this far was not refused."""


def fixtures(cwd) -> dict:
    """What each command needs besides the flag under test: its positionals, on files written
    in `cwd` (a config and a cache for golden / conform; AFILE, AFILE.npz: plain text files)."""
    import json

    import torch

    for name in ("AFILE", "AFILE.npz"):  # a .npz or JSON output must not replace it
        (cwd / name).write_text("a file, where a folder is needed\n")
    config = {"model_type": "llama", "hidden_size": 64, "num_attention_heads": 4,
              "num_key_value_heads": 2, "num_hidden_layers": 1, "intermediate_size": 64,
              "vocab_size": 32, "max_position_embeddings": 64, "rope_theta": 10000.0}  # fmt: skip
    (cwd / "config.json").write_text(json.dumps(config))
    torch.save({"cos": torch.ones(4, 16), "sin": torch.zeros(4, 16)}, cwd / "cache.pt")
    return {
        "list": [], "show": ["rope"], "explain": ["rope"], "arena": [], "arena report": [],
        "bench": [], "stretch": [], "stretch report": [],
        "golden": ["config.json", "--positions", "0:4"], "conform": ["config.json", "cache.pt"],
    }  # fmt: skip


def stop_the_work(monkeypatch):
    """Every command's first step of real work raises Reached."""
    import posenc.arena.runner
    import posenc.bench.report
    import posenc.explain
    import posenc.hf.golden

    def reached(*args, **kwargs):
        raise Reached

    for module, name in ((posenc.arena.runner, "run"), (posenc.bench.report, "machine_info"),
                         (posenc.explain, "explain"), (posenc.explain, "explain_all"),
                         (posenc.explain.claims_mod, "check_all"),
                         (posenc.hf.golden, "write_golden"),
                         (posenc.hf.golden, "conform")):  # fmt: skip
        monkeypatch.setattr(module, name, reached)


def bad_values(action) -> tuple[str, ...]:
    """The values a flag refuses: its type's (posenc.cliargs), or one outside its choices."""
    if action.choices is not None:
        return ("nope_choice1",)
    return getattr(action.type, "bad", ())


def flag_cases(commands=None):
    from posenc.cli import parsers

    out = []
    for words, parser in parsers().items():
        if commands is not None and words.split()[0] not in commands:
            continue
        if words.startswith("stretch"):  # tests/stretch/test_flags.py: every stretch flag
            continue  # with its bad values, checked before the model is read
        for action in parser._actions:
            if action.option_strings and action.nargs != 0:
                out.append(pytest.param(words, action.option_strings[-1]))
    return out


def tree(root) -> dict:
    import os

    return {os.path.relpath(os.path.join(d, f), root): os.path.getsize(os.path.join(d, f))
            for d, _, files in os.walk(root) for f in files} | {
            os.path.relpath(d, root) + "/": 0 for d, _, _ in os.walk(root)}  # fmt: skip


@pytest.mark.parametrize(("words", "flag"), flag_cases())
def test_every_flag_refuses_a_bad_value_before_writing(words, flag, tmp_path, monkeypatch, capsys):
    """For every flag of every command: each value its type refuses (posenc.cliargs, or one
    outside its choices) exits 2 with one line naming the flag, and leaves the folder it ran
    in as it was (no file or folder created, none changed). A flag whose values are not
    declared in posenc.cliargs fails here: every flag is checked in that one place."""
    from posenc.cli import main, parsers

    action = next(a for a in parsers()[words]._actions if flag in a.option_strings)
    bad = bad_values(action)
    assert bad, f"{words} {flag}: its type is not one of posenc.cliargs' (no values it refuses)"
    monkeypatch.chdir(tmp_path)
    base = fixtures(tmp_path)[words]
    stop_the_work(monkeypatch)
    before = tree(tmp_path)
    for value in bad:
        argv = [*words.split(), *base, f"{flag}={value}"]
        try:
            code = main(argv)
        except Reached:
            code = "ran"
        err = capsys.readouterr().err
        assert code == 2, f"{argv}: exit {code}, {err}"
        assert err.count("\n") == 1 and flag in err, f"{argv}: {err!r}"
        assert tree(tmp_path) == before, f"{argv} wrote {set(tree(tmp_path)) - set(before)}"


def test_an_output_file_replaces_only_its_own_kind(tmp_path):
    """An existing --json / golden --out is replaced only if it is an earlier output of that
    kind (or empty): a SQLite database or a text is refused naming the flag, and left as it was."""
    import json
    import sqlite3

    import numpy as np

    from posenc.cliargs import check_out_file

    ours = {"json": tmp_path / "rows.json", "npz": tmp_path / "g.npz"}
    ours["json"].write_text(json.dumps([{"row": 1}]))
    np.savez(ours["npz"], cos=np.ones(3))
    with sqlite3.connect(tmp_path / "results.sqlite") as conn:
        conn.execute("CREATE TABLE rows (x)")
    (tmp_path / "notes.txt").write_text("{not json")
    (tmp_path / "empty").touch()
    for kind, path in ours.items():
        assert check_out_file(path, "--out", kind) == str(path)
        assert check_out_file(tmp_path / "empty", "--out", kind)  # nothing to lose
        for other in ("results.sqlite", "notes.txt", *(p.name for p in ours.values() if p != path)):
            before = (tmp_path / other).read_bytes()
            with pytest.raises(ValueError, match=r"^--json .* exists and is") as err:
                check_out_file(tmp_path / other, "--json", kind)
            assert ("SQLite" in str(err.value)) == other.endswith(".sqlite")
            assert (tmp_path / other).read_bytes() == before


def test_a_database_that_fails_under_a_run_is_one_line(monkeypatch, capsys, tmp_path):
    """A results database deleted (read-only) under a run: one line naming it, exit 1."""
    import sqlite3
    import types

    from posenc import cli

    db = tmp_path / "r.sqlite"

    def run(argv):
        conn = sqlite3.connect(db)
        conn.execute("CREATE TABLE t (x)")
        conn.close()
        ro = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
        ro.execute("INSERT INTO t VALUES (1)")  # sqlite3.OperationalError: readonly database

    monkeypatch.setitem(cli.COMMANDS, "fake", ("fake_module", "a run"))
    monkeypatch.setitem(sys.modules, "fake_module", types.SimpleNamespace(main=run))
    assert cli.main(["fake"]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "results database" in err and "readonly" in err
