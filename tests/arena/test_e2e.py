"""posenc arena end to end: a tiny run, resume after SIGKILL, bad input."""

from __future__ import annotations

import glob
import hashlib
import os
import signal
import sqlite3
import subprocess
import sys
import textwrap
import time

import pytest

from posenc.arena.cli import main
from posenc.arena.config import ArenaConfig
from posenc.arena.report import MODEL_METRICS
from posenc.arena.runner import run
from posenc.arena.store import Store
from posenc.arena.tasks import build_task

TINY = ["--tasks", "copy", "--encodings", "learned,alibi", "--seeds", "1", "--steps", "3",
        "--train-len", "4", "--eval-lens", "4,8", "--workers", "1"]  # fmt: skip


def count(db):
    try:
        with sqlite3.connect(db) as conn:
            return conn.execute("SELECT COUNT(*) FROM results").fetchone()[0]
    except sqlite3.OperationalError:  # the run has created the file but not the table yet
        return 0


@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory):
    d = tmp_path_factory.mktemp("arena")
    db, out = str(d / "arena.sqlite"), str(d / "out")
    assert main([*TINY, "--db", db, "--out", out]) == 0
    return db, out


def test_tiny_run_writes_rows_and_report(tiny_run):
    db, out = tiny_run
    with sqlite3.connect(db) as conn:
        rows = conn.execute(
            "SELECT encoding, eval_len, metric, value, status, reason FROM results"
        ).fetchall()
    curves = [r for r in rows if r[2].startswith(MODEL_METRICS)]  # once per model
    rows = [r for r in rows if r not in curves]
    assert {r[0] for r in curves} == {"learned", "alibi"}
    assert len(rows) == 2 * 2 * 2  # encodings x eval lengths x (accuracy, token_accuracy)
    for enc, E, _metric, value, status, reason in rows:
        if enc == "learned" and E == 8:
            assert status == "n/a" and value is None and "table of 8 positions" in reason
        else:
            assert status == "ok" and 0.0 <= value <= 1.0
    assert os.path.exists(os.path.join(out, "index.html"))
    with open(os.path.join(out, "results.md")) as fh:
        assert "Published findings" in fh.read()
    assert glob.glob(os.path.join(out, "copy_L4_accuracy.png"))
    assert len(glob.glob(os.path.join(out, "models", "*.ckpt"))) == 2  # loadable by explain
    from posenc import TransformerLM

    model = TransformerLM.from_checkpoint(glob.glob(os.path.join(out, "models", "*alibi*"))[0])
    assert model.config["encoding"] == "alibi"


def test_a_run_prints_its_plan_and_estimate_before_the_first_cell(tmp_path, capsys):
    assert main([*TINY, "--db", str(tmp_path / "a.sqlite"), "--out", str(tmp_path / "o")]) == 0
    err = capsys.readouterr().err
    plan = err.index("arena: 2 of 2 cells to run, 2 models to train, 1 worker(s)")
    assert "  copy: 2 encodings x 1 seed(s), " in err and "steps each (learned, alibi)" in err
    assert plan < err.index("arena: estimate: ~") < err.index("[1/2] copy/")


def test_the_run_ends_with_its_verdicts_in_the_terminal(tiny_run, capsys, monkeypatch):
    """`posenc arena` prints, at the end, the findings it measured with their verdicts (the
    numbers and rule beside them), the in-distribution table, then where the report is."""
    from posenc.verdict import ALL_VERDICTS

    monkeypatch.setenv("COLUMNS", "400")  # a wide terminal: no cell wraps
    db, out = tiny_run
    assert main([*TINY, "--db", db, "--out", out]) == 0
    text = capsys.readouterr().out
    lines = text.strip().splitlines()
    assert lines[0] == "Published findings (verdicts computed from this run)"
    finding = next(line for line in lines if line.startswith("Learned absolute positions"))
    assert any(f"  {v}  " in finding for v in ALL_VERDICTS), finding
    assert "evaluations past L that ran = 0" in text and "if evaluations past L" in text
    assert "Not measured by this run" in text
    title = next(i for i, line in enumerate(lines) if line.startswith("In distribution"))
    assert lines[title + 1].split() == ["encoding", "copy", "(L=4)"]
    assert {lines[title + 2].split()[0], lines[title + 3].split()[0]} == {"learned", "alibi"}
    assert (
        lines[-1]
        == f"arena: full report at {out}/index.html (tables and plots: results.md beside it)"
    )


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--tasks", "copi"], "unknown task"),
        (["--steps", "0"], "argument --steps: must be an integer >= 1"),
        (["--db", "DIR"], "is a directory"),
        (["--db", "GARBAGE"], "not a usable SQLite database"),
    ],
)
def test_refused_input_creates_no_out_folder(tmp_path, capsys, argv, message):
    (tmp_path / "DIR").mkdir()
    (tmp_path / "GARBAGE").write_bytes(b"garbage" * 1000)
    argv = [str(tmp_path / a) if a in ("DIR", "GARBAGE") else a for a in argv]
    out = tmp_path / "out" / "report"
    assert main([*TINY, "--db", str(tmp_path / "a.sqlite"), *argv, "--out", str(out)]) == 2
    assert message in capsys.readouterr().err
    assert not (tmp_path / "out").exists()
    assert main(["report", "--db", str(tmp_path / "none.sqlite"), "--out", str(out)]) == 2
    assert not (tmp_path / "out").exists()


def test_rerun_skips_finished_cells(tiny_run, capsys):
    db, out = tiny_run
    before = count(db)
    assert main([*TINY, "--db", db, "--out", out]) == 0
    assert count(db) == before
    assert "0 rows written" in capsys.readouterr().err


SCRIPT = textwrap.dedent(
    """
    import sys
    from posenc.arena.cli import load_tasks
    from posenc.arena.config import ArenaConfig
    from posenc.arena.runner import run
    from posenc.arena.store import Store
    cfg = ArenaConfig(tasks=["copy"], encodings=["nope", "alibi"], seeds=1, steps=300,
                      train_len=4, eval_lens=[4, 8], dim=16, depth=1, heads=2, batch_size=8,
                      eval_samples=32, db=sys.argv[1], out=sys.argv[2], checkpoint_seconds=0.0)
    with Store(cfg.db) as store:
        run(cfg, load_tasks(cfg), store)
    """
)


def start(db, out):
    env = dict(os.environ, OMP_NUM_THREADS="1")
    return subprocess.Popen([sys.executable, "-c", SCRIPT, db, out], env=env,
                            stderr=subprocess.PIPE, text=True)  # fmt: skip


def finish(proc, timeout=300):
    """proc's stderr once it exits; killed (never left behind) if it runs past `timeout`."""
    try:
        return proc.communicate(timeout=timeout)[1]
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_sigkill_mid_training_resumes_without_losing_rows(tmp_path):
    db, out = str(tmp_path / "a.sqlite"), str(tmp_path / "out")
    proc = start(db, out)
    deadline = time.time() + 120
    while time.time() < deadline and proc.poll() is None:  # first cell done, second training
        done = os.path.exists(db) and count(db) > 0  # a cell's rows: one transaction
        if done and glob.glob(f"{out}/models/*alibi*.train.ckpt"):
            break
        time.sleep(0.01)
    assert proc.poll() is None, "the run ended before it could be killed"
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    with sqlite3.connect(db) as conn:
        first = conn.execute("SELECT * FROM results ORDER BY id").fetchall()
    assert {r[2] for r in first} == {"nope"}
    proc = start(db, out)
    err = finish(proc)
    assert proc.returncode == 0, err
    assert "copy/alibi/seed0: resuming at step" in err
    with sqlite3.connect(db) as conn:
        after = conn.execute("SELECT * FROM results ORDER BY id").fetchall()
        dups = conn.execute(
            "SELECT COUNT(*) FROM results GROUP BY task, encoding, seed, train_len, eval_len, "
            "metric HAVING COUNT(*) > 1"
        ).fetchall()
    assert not dups and {r[2] for r in after} == {"nope", "alibi"}
    assert after[: len(first)] == first  # cells finished before the kill keep their values
    # the resumed run equals an uninterrupted one
    ref_db, ref_out = str(tmp_path / "ref.sqlite"), str(tmp_path / "ref")
    proc = start(ref_db, ref_out)
    finish(proc)
    with sqlite3.connect(ref_db) as conn:
        ref = conn.execute("SELECT encoding, eval_len, metric, value FROM results").fetchall()
    got = {(a[2], a[5], a[6]): a[7] for a in after}  # (encoding, eval_len, metric) -> value
    assert {(e, E, m): v for e, E, m, v in ref} == got


def digest(path):
    return hashlib.sha256(open(path, "rb").read()).hexdigest()


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--tasks", "copi"], "unknown task 'copi'; did you mean 'copy'"),
        (["--encodings", "alibi,ropee"], "unknown encoding 'ropee'; did you mean 'rope'"),
        (["--encodings", "rope+yarm"], "did you mean 'rope+yarn'"),
        (["--tasks", "lm", "--corpus", "/nonexistent/corpus"], "no such file or directory"),
        (["--eval-lens", "8,0"], "argument --eval-lens: must be comma-separated integers >= 1"),
        (["--eval-lens", "-8"], "argument --eval-lens: must be comma-separated integers >= 1"),
        (["--steps", "0"], "argument --steps: must be an integer >= 1"),
        (["--backbone", "hf-lama"], "--backbone: unknown ['hf-lama']; allowed: posenc, hf-llama"),
        (["--encodings", "hf-llama:alibi"], "the hf-llama backbone takes rope, nope"),
    ],
)
def test_bad_input_one_line_exit_2_nothing_written(tiny_run, capsys, argv, message):
    db, out = tiny_run
    before, h = count(db), digest(db)
    assert main([*TINY, *argv, "--db", db, "--out", out]) == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1 and "Traceback" not in err
    assert count(db) == before and digest(db) == h


def test_unreadable_corpus_and_corrupt_db(tmp_path, capsys):
    binary = tmp_path / "blob.bin"
    binary.write_bytes(bytes(range(256)) * 10)
    assert main(["--tasks", "lm", "--corpus", str(binary), "--db", str(tmp_path / "x.sqlite")]) == 2
    assert "not a text file" in capsys.readouterr().err
    assert not (tmp_path / "x.sqlite").exists()
    bad = tmp_path / "bad.sqlite"
    bad.write_bytes(b"garbage" * 1000)
    assert main([*TINY, "--db", str(bad), "--out", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err
    assert "not a usable SQLite database" in err and err.count("\n") == 1
    assert bad.read_bytes() == b"garbage" * 1000
    assert main(["report", "--db", str(bad), "--out", str(tmp_path / "o")]) == 2


def test_report_subcommand(tiny_run, tmp_path, capsys):
    db, _ = tiny_run
    assert main(["report", "--db", db, "--out", str(tmp_path / "r")]) == 0
    assert (tmp_path / "r" / "index.html").exists() and (tmp_path / "r" / "results.md").exists()


def test_the_recipe_learns_copy_in_distribution(tmp_path):
    """A regression guard on the training recipe (sampling, padding, schedule, weight decay):
    a tiny rope model learns copy at L = 4 symbols to >= 0.95 exact match in 600 steps (~10 s;
    measured 1.00)."""
    cfg = ArenaConfig(tasks=["copy"], encodings=["rope"], seeds=1, steps=600, train_len=4,
                      dim=32, depth=2, heads=2, lr=3e-3, db=str(tmp_path / "r.sqlite"),
                      out=str(tmp_path / "r"))  # fmt: skip
    with Store(cfg.db) as store:
        run(cfg, {"copy": build_task("copy")}, store)
        got = {(r["eval_len"], r["metric"]): r["value"] for r in store.all_rows()}
    assert got[(4, "accuracy")] >= 0.95
    assert min(got[(E, "accuracy")] for E in range(1, 5)) >= 0.9  # every size up to L
