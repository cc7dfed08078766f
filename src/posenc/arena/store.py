"""The arena's results store: one SQLite file, one row per (task, encoding, seed, train_len,
eval_len, metric), status 'ok' or 'n/a' (+ reason). A cell's rows are written in one
transaction: a kill leaves a cell complete or absent.
"""

from __future__ import annotations

import json
import os
import sqlite3
import time
import urllib.parse
from collections.abc import Iterable
from dataclasses import astuple, dataclass, fields

SCHEMA = """
CREATE TABLE IF NOT EXISTS results (
    id            INTEGER PRIMARY KEY,
    task          TEXT    NOT NULL,
    encoding      TEXT    NOT NULL,
    seed          INTEGER NOT NULL,
    train_len     INTEGER NOT NULL,
    eval_len      INTEGER NOT NULL,
    metric        TEXT    NOT NULL,
    value         REAL,
    status        TEXT    NOT NULL CHECK (status IN ('ok', 'n/a')),
    reason        TEXT,
    config_hash   TEXT    NOT NULL,
    config        TEXT    NOT NULL,
    posenc_version TEXT   NOT NULL,
    torch_version TEXT    NOT NULL,
    wall_time     REAL    NOT NULL,
    created       TEXT    NOT NULL,
    UNIQUE (task, encoding, seed, train_len, eval_len, metric)
)
"""
LEASES = """
CREATE TABLE IF NOT EXISTS leases (
    task      TEXT    NOT NULL,
    encoding  TEXT    NOT NULL,
    seed      INTEGER NOT NULL,
    train_len INTEGER NOT NULL,
    owner     TEXT    NOT NULL,
    expires   REAL    NOT NULL,
    PRIMARY KEY (task, encoding, seed, train_len)
)
"""
FAILURES = """
CREATE TABLE IF NOT EXISTS failures (
    task      TEXT    NOT NULL,
    encoding  TEXT    NOT NULL,
    seed      INTEGER NOT NULL,
    train_len INTEGER NOT NULL,
    error     TEXT    NOT NULL,
    owner     TEXT    NOT NULL,
    created   TEXT    NOT NULL
)
"""


@dataclass
class Row:
    task: str
    encoding: str
    seed: int
    train_len: int
    eval_len: int
    metric: str
    value: float | None
    status: str = "ok"
    reason: str | None = None


# what write_cell inserts: a Row's fields, then the cell's
CELL_COLUMNS = ("config_hash", "config", "posenc_version", "torch_version", "wall_time", "created")
INSERTED = (*(f.name for f in fields(Row)), *CELL_COLUMNS)
COLUMNS = {"id", *INSERTED}

ARENA_TABLES = {"results", "leases", "failures"}


def _wal_mode(path: str) -> bool:
    """The file is an SQLite database in write-ahead-log mode (header bytes 18-19 are 2)."""
    with open(path, "rb") as f:
        head = f.read(20)
    return head[:16] == b"SQLite format 3\x00" and head[18:20] == b"\x02\x02"


def _tables(path: str, *, immutable: bool) -> tuple[set, set]:
    """(table names, columns of `results`) read without writing anything beside the file."""
    uri = "file:" + urllib.parse.quote(os.path.abspath(path)) + "?mode=ro"
    conn = sqlite3.connect(uri + "&immutable=1" * immutable, uri=True, timeout=30.0)
    try:
        found = conn.execute(
            "SELECT name FROM sqlite_master WHERE type IN ('table', 'view') "
            "AND name NOT LIKE 'sqlite_%'"
        ).fetchall()
        return {r[0] for r in found}, {r[1] for r in conn.execute("PRAGMA table_info(results)")}
    finally:
        conn.close()


def rows_of(rows: list[dict], tool: str) -> list[dict]:
    """The rows posenc `tool` ("arena" or "stretch") wrote: stretch's configs name its protocol."""
    out = []
    for r in rows:
        try:
            cfg = json.loads(r.get("config") or "{}")
        except (TypeError, ValueError):
            continue
        stretch = isinstance(cfg, dict) and str(cfg.get("protocol", "")).startswith("stretch")
        if isinstance(cfg, dict) and stretch == (tool == "stretch"):
            out.append(r)
    return out


def require_rows(rows: list[dict], tool: str, db: str) -> list[dict]:
    """rows_of(rows, tool); a ValueError naming --db when the database holds only another's."""
    mine = rows_of(rows, tool)
    if rows and not mine:
        other = "arena" if tool == "stretch" else "stretch"
        raise ValueError(f"--db {db}: holds {len(rows)} rows, none from posenc {tool} (another "
                         f"tool's database, {other}'s?); give a {tool} database")  # fmt: skip
    return mine


def check_db(path: str, *, create: bool = True) -> None:
    """ValueError (one line, naming --db) unless `path` is an arena database, or new or empty
    or missing (create). An existing file is only read (read-only, under SQLite's shared lock):
    another application's database is left byte-for-byte as it was. A WAL database (never one
    of ours), or one with a hot journal, is read immutable: a read-only connection would create
    -wal / -shm files beside it, or may not roll the journal back."""
    if not os.path.exists(path):
        if create:
            return
        raise ValueError(f"--db: no such database: {path}")
    if os.path.isdir(path):
        raise ValueError(f"--db {path} is a directory; give a file name")
    try:
        try:
            tables, cols = _tables(path, immutable=_wal_mode(path))
        except sqlite3.OperationalError as err:
            if "readonly" not in str(err):
                raise
            tables, cols = _tables(path, immutable=True)
    except sqlite3.DatabaseError as err:
        raise ValueError(f"--db: {path} is not a usable SQLite database ({err})") from None
    other = sorted(tables - ARENA_TABLES)
    if other:
        raise ValueError(f"--db: {path} is not an arena database (it holds other tables: "
                         f"{', '.join(other[:5])}); give a new file or an arena's")  # fmt: skip
    if "results" in tables and cols != COLUMNS:
        raise ValueError(f"--db: {path} has a 'results' table of another shape")


class Store:
    """Results in SQLite. Raises ValueError (one line) for a file that is not an arena DB
    (check_db), and leaves that file untouched."""

    def __init__(self, path: str, *, create: bool = True):
        self.path = path
        check_db(path, create=create)
        try:
            self.conn = sqlite3.connect(path, timeout=30.0, isolation_level=None)
            tables = {r[0] for r in self.conn.execute("SELECT name FROM sqlite_master")}
            if "results" not in tables and not create:
                raise ValueError(f"--db: {path} holds no arena results")
            if create:
                for table in (SCHEMA, LEASES, FAILURES):
                    self.conn.execute(table)
        except sqlite3.DatabaseError as err:
            raise ValueError(f"--db: {path} is not a usable SQLite database ({err})") from None

    def close(self) -> None:
        self.conn.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def written(self, key: tuple, config_hash: str, name: str) -> dict[int, set[str]]:
        """{eval_len: metrics} written for the cell key (task, encoding, seed, train_len);
        ValueError naming --db where they come from another configuration."""
        have: dict[int, set[str]] = {}
        for eval_len, metric, found in self.conn.execute(
            "SELECT eval_len, metric, config_hash FROM results "
            "WHERE task=? AND encoding=? AND seed=? AND train_len=?",
            key,
        ):
            if found != config_hash:
                raise ValueError(
                    f"--db: {self.path} already holds {name} from another configuration "
                    f"(hash {found}, this run {config_hash}); use another --db"
                )
            have.setdefault(eval_len, set()).add(metric)
        return have

    def write_cell(
        self,
        rows: Iterable[Row],
        *,
        config: dict,
        config_hash: str,
        wall_time: float,
        posenc_version: str,
        torch_version: str,
    ) -> None:
        """Insert all rows of a cell in one transaction (all or nothing)."""
        cfg = json.dumps(config, sort_keys=True)
        per_cell = (config_hash, cfg, posenc_version, torch_version, wall_time)
        created = time.strftime("%Y-%m-%dT%H:%M:%S")
        values = [(*astuple(r), *per_cell, created) for r in rows]
        marks = ", ".join("?" * len(INSERTED))
        insert = f"INSERT INTO results ({', '.join(INSERTED)}) VALUES ({marks})"
        with self.conn:
            self.conn.execute("BEGIN IMMEDIATE")
            self.conn.executemany(insert, values)

    def all_rows(self) -> list[dict]:
        cur = self.conn.execute(
            f"SELECT {', '.join(INSERTED[:-1])} FROM results "
            "ORDER BY task, encoding, seed, train_len, eval_len, metric"
        )
        names = [d[0] for d in cur.description]
        return [dict(zip(names, r)) for r in cur.fetchall()]

    def encoding_rows(self, encoding: str) -> list[tuple]:
        """(task, train_len, eval_len, metric, value, status, reason) of every row of one
        encoding, all seeds, by task, train_len, eval_len, metric (`posenc explain --arena`)."""
        return self.conn.execute(
            "SELECT task, train_len, eval_len, metric, value, status, reason FROM results "
            "WHERE encoding = ? ORDER BY task, train_len, eval_len, metric",
            (encoding,),
        ).fetchall()

    def count(self) -> int:
        return self.conn.execute("SELECT COUNT(*) FROM results").fetchone()[0]

    def claim(self, key: tuple, owner: str, ttl: float, stale=None) -> bool:
        """Lease a group (task, encoding, seed, train_len) for `ttl` seconds: False if another
        live run holds it (stale(owner): its process is dead), else True (taken or renewed)."""
        now = time.time()
        with self.conn:
            self.conn.execute("BEGIN IMMEDIATE")
            row = self.conn.execute(
                "SELECT owner, expires FROM leases WHERE task=? AND encoding=? AND seed=? "
                "AND train_len=?",
                key,
            ).fetchone()
            held = row is not None and row[0] != owner and row[1] > now
            if held and (stale is None or not stale(row[0])):
                return False
            self.conn.execute(
                "INSERT OR REPLACE INTO leases (task, encoding, seed, train_len, owner, expires) "
                "VALUES (?, ?, ?, ?, ?, ?)",
                (*key, owner, now + ttl),
            )
        return True

    def record_failure(self, key: tuple, error: str, owner: str) -> None:
        """A group (task, encoding, seed, train_len) whose cell raised, and its error."""
        with self.conn:
            self.conn.execute(
                "INSERT INTO failures (task, encoding, seed, train_len, error, owner, created) "
                "VALUES (?, ?, ?, ?, ?, ?, datetime('now'))",
                (*key, error, owner),
            )

    def failures(self) -> list[tuple]:
        """(task, encoding, seed, train_len, error) of every recorded failure, oldest first."""
        return self.conn.execute(
            "SELECT task, encoding, seed, train_len, error FROM failures ORDER BY rowid"
        ).fetchall()

    def release(self, key: tuple, owner: str) -> None:
        with self.conn:
            self.conn.execute(
                "DELETE FROM leases WHERE task=? AND encoding=? AND seed=? AND train_len=? "
                "AND owner=?",
                (*key, owner),
            )
