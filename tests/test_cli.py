"""End-to-end runs of the `posenc` command (list, show, errors)."""

import subprocess
import sys

import pytest

import posenc


def run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "posenc", *args], capture_output=True, text=True, timeout=120
    )


def test_help_lists_commands():
    out = run("--help")
    assert out.returncode == 0
    for name in ("list", "show", "explain", "arena", "bench"):
        assert name in out.stdout


def imported(*args: str) -> set[str]:
    """The modules `posenc ARGS` imports, read from `python -X importtime`."""
    proc = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "posenc", *args],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    lines = [line.split("|")[-1] for line in proc.stderr.splitlines() if line.startswith("import")]
    return {line.strip() for line in lines}


@pytest.mark.parametrize("args", [["--help"], ["-V"], ["lsit"]])
def test_answers_without_importing_torch(args):
    modules = imported(*args)
    assert "posenc.cli" in modules  # the reading works
    assert not {m for m in modules if m.split(".")[0] == "torch"}


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


def test_unknown_command_suggests_closest():
    out = run("lsit")
    assert out.returncode == 2 and "list" in out.stderr


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
    with pytest.raises(SystemExit) as exit_:
        main(argv)
    assert exit_.value.code == 2
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
