"""The arena's SQLite store: one row per measurement, UNIQUE, all-or-nothing cells."""

from __future__ import annotations

import sqlite3
import subprocess
import sys

import pytest

from posenc.arena.store import Row, Store, check_db

META = dict(config={"a": 1}, config_hash="h1", wall_time=1.5, posenc_version="0", torch_version="t")


def rows(enc="alibi", seed=0, value=1.0):
    return [Row("lm", enc, seed, 8, E, m, value * E) for E in (8, 16) for m in ("loss", "ppl")]


def test_write_and_read_back(tmp_path):
    db = str(tmp_path / "a.sqlite")
    with Store(db) as s:
        s.write_cell(rows(), **META)
        s.write_cell([Row("lm", "learned", 0, 8, 16, "ppl", None, "n/a", "past table")], **META)
    with Store(db, create=False) as s:
        got = s.all_rows()
    assert len(got) == 5
    na = [r for r in got if r["status"] == "n/a"]
    assert na[0]["reason"] == "past table" and na[0]["value"] is None
    assert {r["config_hash"] for r in got} == {"h1"} and got[0]["wall_time"] == 1.5


def test_written_per_length_and_another_configuration_refused(tmp_path):
    """Store.written: what the arena's and stretch's runs skip; another hash is one ValueError."""
    key, both = ("lm", "alibi", 0, 8), {"loss", "ppl"}
    with Store(str(tmp_path / "a.sqlite")) as s:
        s.write_cell(rows(), **META)
        assert s.written(key, "h1", "x") == {8: both, 16: both}
        assert s.written(("lm", "alibi", 1, 8), "h2", "x") == {}  # another cell: nothing yet
        match = (
            r"^--db: .* already holds lm alibi from another configuration \(hash h1, this run h2\)"
        )
        with pytest.raises(ValueError, match=match):
            s.written(key, "h2", "lm alibi")


def test_unique_and_all_or_nothing(tmp_path):
    with Store(str(tmp_path / "a.sqlite")) as s:
        s.write_cell(rows(), **META)
        mixed = rows(enc="t5") + rows()[:1]  # new rows plus one duplicate
        with pytest.raises(sqlite3.IntegrityError):
            s.write_cell(mixed, **META)
        assert s.count() == 4  # none of the t5 rows went in


def test_corrupt_or_foreign_files_are_refused(tmp_path):
    bad = tmp_path / "bad.sqlite"
    bad.write_bytes(b"this is not a database" * 100)
    with pytest.raises(ValueError, match="not a usable SQLite database"):
        Store(str(bad))
    assert bad.read_bytes() == b"this is not a database" * 100
    other = tmp_path / "other.sqlite"
    conn = sqlite3.connect(other)
    conn.execute("CREATE TABLE results (x INTEGER)")
    conn.commit()
    conn.close()
    with pytest.raises(ValueError, match="another shape"):
        Store(str(other))
    with pytest.raises(ValueError, match="no such database"):
        Store(str(tmp_path / "missing.sqlite"), create=False)


WRITER = """
import sys, time
from posenc.arena.store import Row, Store
with Store(sys.argv[1]) as s:
    print("ready", flush=True)
    start, seed = time.monotonic(), 0
    while time.monotonic() - start < float(sys.argv[2]):
        s.write_cell([Row("t", "e" * 200, seed, 3, n, "m", 0.5) for n in range(300)],
                     config={"pad": "x" * 2000}, config_hash="h", wall_time=0.1,
                     posenc_version="0", torch_version="t")
        seed += 1
"""


def test_a_database_another_run_is_writing_is_checked_not_torn(tmp_path):
    """Opening a Store checks the file (check_db) while another run may be writing it: the
    check waits on SQLite's lock and never reads a half-written page ("malformed")."""
    db = str(tmp_path / "busy.sqlite")
    Store(db).close()
    writer = subprocess.Popen([sys.executable, "-c", WRITER, db, "3"], stdout=subprocess.PIPE,
                              text=True)  # fmt: skip
    try:
        assert writer.stdout.readline().strip() == "ready"
        checks = 0
        while writer.poll() is None:
            check_db(db)  # raised "database disk image is malformed" when read immutable
            checks += 1
        assert writer.wait(timeout=30) == 0 and checks > 0
    finally:
        if writer.poll() is None:
            writer.kill()
            writer.wait()
    with Store(db, create=False) as s:
        assert s.count() > 0


CRASH = """
import os, sqlite3, sys
c = sqlite3.connect(sys.argv[1], isolation_level=None)
c.execute("PRAGMA cache_size=1")  # spill to the file before the commit: a hot journal
c.execute("BEGIN IMMEDIATE")
for i in range(2000):
    c.execute("INSERT INTO failures VALUES ('t', 'e', ?, 1, ?, 'o', 'c')", (i, "x" * 500))
os._exit(0)
"""


def test_a_hot_journal_is_read_without_writing_beside_the_file(tmp_path):
    """A writer killed mid-transaction leaves a hot journal a read-only connection may not roll
    back: the check still reads the file, and a Store then recovers it."""
    db = tmp_path / "hot.sqlite"
    with Store(str(db)) as s:
        s.write_cell(rows(), **META)
    subprocess.run([sys.executable, "-c", CRASH, str(db)], check=True, timeout=60)
    assert (tmp_path / "hot.sqlite-journal").exists()
    check_db(str(db))
    with Store(str(db)) as s:
        assert s.count() == 4 and s.failures() == []  # the crashed transaction rolled back


def test_leases_share_groups_between_runs_and_expire(tmp_path):
    key = ("copy", "rope", 0, 8)
    with Store(str(tmp_path / "a.sqlite")) as s:
        assert s.claim(key, "run-a", ttl=60)
        assert not s.claim(key, "run-b", ttl=60)  # held by a live run
        assert s.claim(key, "run-a", ttl=60)  # renewed by its owner
        assert s.claim(key, "run-b", ttl=60, stale=lambda owner: owner == "run-a")  # dead owner
        s.release(key, "run-b")
        assert s.claim(key, "run-c", ttl=-1)  # free again; claimed with a lease already expired
        assert s.claim(key, "run-d", ttl=60)  # an expired lease is taken over


def foreign_databases(tmp_path):
    """Other applications' SQLite files: a plain one, one in WAL mode, one that also holds a
    table named like the arena's with the arena's very columns."""
    from posenc.arena.store import SCHEMA

    out = []
    for name, statements in (
        ("plain", ["CREATE TABLE users (id INTEGER, name TEXT)"]),
        ("wal", ["PRAGMA journal_mode=WAL", "CREATE TABLE t (x)"]),
        ("lookalike", [SCHEMA, "CREATE TABLE orders (id INTEGER)"]),
    ):
        path = tmp_path / f"{name}.sqlite"
        conn = sqlite3.connect(path)
        for sql in statements:
            conn.execute(sql)
        conn.execute("CREATE TABLE IF NOT EXISTS users (id INTEGER)")
        conn.execute("INSERT INTO users (id) VALUES (7)")
        conn.commit()
        conn.close()
        out.append(path)
    return out


def digest(path) -> str:
    import hashlib

    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.mark.parametrize(
    "argv",
    [
        ["arena", "--tasks", "copy", "--encodings", "nope", "--steps", "1", "--db"],
        ["arena", "report", "--db"],
        ["explain", "--claims", "--arena"],
    ],
    ids=["arena", "arena-report", "explain-arena"],
)
def test_another_applications_database_is_refused_and_untouched(argv, tmp_path, capsys,
                                                                 monkeypatch):  # fmt: skip
    """--db / --arena on another application's SQLite file: one line, exit 2, and the file
    (and every file beside it) byte-for-byte as it was: no arena table added."""
    from posenc.cli import main

    monkeypatch.chdir(tmp_path)
    for path in foreign_databases(tmp_path):
        before = {p.name: digest(p) for p in tmp_path.iterdir() if p.is_file()}
        assert main([*argv, str(path)]) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and "not an arena" in err, err
        after = {p.name: digest(p) for p in tmp_path.iterdir() if p.is_file()}
        assert after == before
        with pytest.raises(ValueError, match="not an arena database"):
            Store(str(path))
        assert {p.name: digest(p) for p in tmp_path.iterdir() if p.is_file()} == before
