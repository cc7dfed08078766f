"""`posenc stretch` end to end on a tiny model folder: rows, resume, shared work, bad input."""

import json
import os
import re
import sqlite3
import subprocess
import sys

import pytest

from posenc.cli import main

SMALL = ["--scalings", "none,yarn,dynamic", "--lengths", "64,128,256",
         "--retrieval-lengths", "256", "--tasks", "ppl,passkey", "--docs", "1",
         "--depths", "0.5", "--seeds", "1"]  # fmt: skip


def run(tmp_path, folder, *extra, name="s"):
    db, out = tmp_path / f"{name}.sqlite", tmp_path / f"{name}_out"
    args = ["stretch", "--model", folder, *SMALL, "--db", str(db), "--out", str(out), *extra]
    return main(args), db, out


def rows(db):
    with sqlite3.connect(db) as conn:
        return conn.execute("SELECT task, encoding, seed, eval_len, metric, value, status "
                            "FROM results").fetchall()  # fmt: skip


def test_a_run_writes_rows_report_json_and_prints_its_verdicts(tmp_path, tiny_lm_folder, capsys):
    code, db, out = run(
        tmp_path, tiny_lm_folder, "--json", str(tmp_path / "rows.json"), "--windows", "1"
    )  # the first T tokens: a length can be added later
    assert code == 0
    got = rows(db)
    ppl = {(e, n) for t, e, _, n, m, v, st in got if t == "ppl/pydoc_topics" and m == "loss/w0"}
    assert len(ppl) == 9  # 3 scalings x 3 lengths
    assert {(e, n) for t, e, _, n, m, *_ in got if t == "passkey" and m == "exact@0.5/p0"} == {
        (f"{os.path.basename(tiny_lm_folder)}:{s}", 256)
        for s in ("none", "yarn(factor=2)", "dynamic")
    }
    for f in ("index.html", "results.md"):
        assert (out / f).stat().st_size > 0
    assert any(p.suffix == ".png" for p in out.iterdir())
    records = json.loads((tmp_path / "rows.json").read_text())
    assert {"scaling", "factor", "task", "text", "length", "metric", "value", "lo", "hi",
            "n"} <= set(records[0])  # fmt: skip
    assert {(r["scaling"], r["length"]) for r in records if r["metric"] == "ppl"} == {
        (s, n) for s in ("none", "yarn(factor=2)", "dynamic") for n in (64, 128, 256)
    }
    text = capsys.readouterr().out
    assert "Published findings" in text and "Recommendation per target length" in text
    assert "report at" in text.splitlines()[-1]
    # resumes: nothing left to do, the same rows
    assert run(tmp_path, tiny_lm_folder, "--windows", "1")[0] == 0
    assert sorted(rows(db)) == sorted(got)
    # a longer length added later: only its rows are measured
    assert main(["stretch", "--model", tiny_lm_folder, *SMALL[:2], "--lengths", "64,128,256,320",
                 "--retrieval-lengths", "256", *SMALL[6:], "--db", str(db), "--out",
                 str(out), "--windows", "1"]) == 0  # fmt: skip
    assert len(rows(db)) > len(got)


def test_dynamic_at_or_below_the_context_equals_the_unscaled_model(tmp_path, tiny_lm_folder):
    _, db, _ = run(tmp_path, tiny_lm_folder, "--tasks", "ppl")
    ppl = {(e.partition(":")[2], n): v for t, e, _, n, m, v, _ in rows(db) if m == "loss/w0"}
    assert ppl[("dynamic", 64)] == ppl[("none", 64)] and ppl[("dynamic", 128)] == ppl[("none", 128)]
    assert ppl[("dynamic", 256)] != ppl[("none", 256)]


def test_two_runs_on_one_database_share_the_work(tmp_path, tiny_lm_folder):
    db = tmp_path / "shared.sqlite"
    cmd = [sys.executable, "-m", "posenc", "stretch", "--model", tiny_lm_folder, *SMALL,
           "--scalings", "none,yarn,dynamic,linear,ntk", "--db", str(db)]  # fmt: skip
    procs = [subprocess.Popen([*cmd, "--out", str(tmp_path / f"o{i}")], stderr=subprocess.PIPE,
                              stdout=subprocess.DEVNULL, text=True) for i in range(2)]  # fmt: skip
    errs = [p.communicate(timeout=600)[1] for p in procs]
    assert [p.returncode for p in procs] == [0, 0], errs
    got = rows(db)
    keys = [r[:5] for r in got]
    assert len(keys) == len(set(keys))  # no row twice
    assert len({(t, e) for t, e, *_ in got}) == 10  # 5 scalings x (ppl, passkey)
    done = [len(re.findall(r"^\[\d+/\d+\] ", e, re.M)) for e in errs]
    assert sum(done) == 10  # each job done by one run only


@pytest.mark.parametrize("args, flag", [
    (["--model", "/nonexistent/model"], "--model"),
    (["--scalings", "yran"], "--scalings"),
    (["--scalings", ""], "--scalings"),
    (["--scalings", "yarn(factor=0.5)"], "--scalings"),
    (["--lengths", "0"], "--lengths"),
    (["--lengths=-5,64"], "--lengths"),
    (["--lengths", "abc"], "--lengths"),
    (["--lengths", ""], "--lengths"),
    (["--retrieval-lengths", "999"], "--retrieval-lengths"),
    (["--tasks", "ppl,summarize"], "--tasks"),
    (["--tasks", ""], "--tasks"),
    (["--depths", "1.5"], "--depths"),
    (["--text", "/nonexistent.txt"], "--text"),
    (["--seeds", "0"], "--seeds"),
    (["--windows", "0"], "--windows"),
    (["--probes", "-1"], "--probes"),
    (["--tolerance", "nan"], "--tolerance"),
    (["--device", "tpu"], "--device"),
    (["--gpus-per-cell", "1"], "--gpus-per-cell"),
])  # fmt: skip
def test_bad_input_is_one_line_and_writes_nothing(tmp_path, tiny_lm_folder, capsys, args, flag):
    out, db = tmp_path / "never", tmp_path / "never.sqlite"
    base = ["stretch", "--model", tiny_lm_folder, "--db", str(db), "--out", str(out)]
    try:
        code = main(base + args)
    except SystemExit as exit_:  # argparse's own refusal (an empty value): one line too
        code = exit_.code
    assert code == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and flag in err, err
    assert not out.exists() and not db.exists()


def test_a_folder_that_is_not_a_model(tmp_path, capsys):
    (tmp_path / "notes.txt").write_text("x")
    for model in (str(tmp_path), str(tmp_path / "notes.txt")):
        assert main(["stretch", "--model", model, "--out", str(tmp_path / "o")]) == 2
        assert "--model" in capsys.readouterr().err


def test_report_of_a_missing_database(tmp_path, capsys):
    assert main(["stretch", "report", "--db", str(tmp_path / "none.sqlite")]) == 2
    assert "--db" in capsys.readouterr().err


def test_report_of_another_tools_database(tmp_path, capsys):
    from posenc.arena.store import Row, Store

    db = tmp_path / "arena.sqlite"
    with Store(str(db)) as store:
        store.write_cell([Row("copy", "rope", 0, 64, 64, "acc", 1.0, "ok", None)],
                         config={"protocol": "arena-3"}, config_hash="h", wall_time=1.0,
                         posenc_version="0", torch_version="0")  # fmt: skip
    out = tmp_path / "o"
    assert main(["stretch", "report", "--db", str(db), "--out", str(out)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "none from posenc stretch" in err
    assert not out.exists()
