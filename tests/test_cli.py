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


def test_list_shows_every_registered_encoding():
    out = run("list")
    assert out.returncode == 0, out.stderr
    names = {line.split()[0] for line in out.stdout.splitlines()[1:] if line.strip()}
    assert names == set(posenc.ENCODINGS)


def test_show_sinusoidal_prints_seed_002_table():
    pytest.importorskip("posenc.encodings.absolute")
    if "sinusoidal" not in posenc.ENCODINGS:
        pytest.skip("sinusoidal not registered yet")
    out = run("show", "sinusoidal", "--dim", "4", "--positions", "0:3")
    assert out.returncode == 0, out.stderr
    rows = [line.split() for line in out.stdout.splitlines()[1:]]
    assert rows[0] == ["0", "0.0000", "1.0000", "0.0000", "1.0000"]
    assert rows[1] == ["1", "0.8415", "0.5403", "0.0100", "1.0000"]
    assert rows[2] == ["2", "0.9093", "-0.4161", "0.0200", "0.9998"]


def test_show_alibi_prints_head_0_bias():
    if "alibi" not in posenc.ENCODINGS:
        pytest.skip("alibi not registered yet")
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
