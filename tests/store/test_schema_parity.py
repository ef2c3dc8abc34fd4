"""Both engines describe one data model: each engine's schema and migrations are written by
hand (store/sqlite/, store/postgres/), so after migration their live catalogs are read back
and compared: tables, columns (kind of value, nullability, default), primary and unique keys,
indexes (columns, uniqueness, predicate), checks, foreign keys, the rows the schema seeds,
and what the triggers do, tried on both (which delivery moves are refused, whether the audit
can be changed; the moves allowed are store/delivery.py's own). The comparison is seen to
fail on a column added to one engine only."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from agents_room.store import Clock, Store
from agents_room.store.delivery import PREDECESSORS

# What one engine has and the other does not, on purpose (store/postgres/schema.sql says why):
# facts matching these are left out of the comparison.
ENGINE_ONLY = {
    "postgresql": (r"\bagents_room_meta\b", r"^column sessions\.ord "),  # the version; SQLite's rowid order
    "sqlite": (),
}
KINDS = {"text": "text", "integer": "integer", "bigint": "integer", "real": "real", "double precision": "real"}
STATES = ("stored", "offered", "accepted", "undeliverable", "read", "acked", "expired")


def _words(expr: str) -> str:
    """A predicate or default as both engines would agree on it: no casts, parentheses,
    quotes' types or case."""
    expr = re.sub(r"::[a-z ]+(\[\])?", "", expr.lower())
    return " ".join(re.sub(r"[()]", " ", expr).split())


def _check(table: str, expr: str, columns: set[str]) -> str:
    """A check as the columns it reads and the literals it allows (``x IN ('a', 'b')`` on
    SQLite is ``x = ANY (ARRAY['a', 'b'])`` on PostgreSQL)."""
    used = sorted(c for c in columns if re.search(rf"\b{c}\b", expr))
    literals = sorted(re.findall(r"'([^']*)'", expr))
    return f"check {table}({', '.join(used)}) in {literals}"


def sqlite_catalog(conn: Any) -> set[str]:
    facts: set[str] = set()
    tables = [r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table' "
                                                "AND name NOT LIKE 'sqlite\\_%' ESCAPE '\\'")]  # SQLite's own
    for table in tables:
        facts.add(f"table {table}")
        info = conn.execute(f"PRAGMA table_info({table})").fetchall()
        columns = {r[1] for r in info}
        pk = [r[1] for r in sorted((r for r in info if r[5]), key=lambda r: r[5])]
        for _cid, name, kind, notnull, default, _pk in info:
            # A key column counts as NOT NULL, as PostgreSQL makes it: SQLite would let NULL into
            # the TEXT key of a rowid table (sessions.id), a quirk no rule exercises (ids are given).
            null = "not null" if notnull or name in pk else "null"
            facts.add(f"column {table}.{name} {KINDS[kind.lower()]} {null} default {_words(default or 'null')}")
        if pk:
            facts.add(f"primary key {table}({', '.join(pk)})")
        for _seq, index, unique, origin, partial in conn.execute(f"PRAGMA index_list({table})"):
            cols = ", ".join(r[2] for r in conn.execute(f"PRAGMA index_info({index})"))
            if origin == "pk":
                continue
            if origin == "u":
                facts.add(f"unique {table}({cols})")
                continue
            sql = conn.execute("SELECT sql FROM sqlite_master WHERE name = ?", (index,)).fetchone()[0]
            where = _words(sql.split(" WHERE ", 1)[1]) if partial else ""
            facts.add(f"index {index} on {table}({cols}){' unique' if unique else ''}{' where ' + where if where else ''}")
        for row in conn.execute(f"PRAGMA foreign_key_list({table})"):
            facts.add(f"foreign key {table}({row[3]}) -> {row[2]}({row[4]})")
        create = conn.execute("SELECT sql FROM sqlite_master WHERE name = ?", (table,)).fetchone()[0]
        for expr in _checks_of(create):
            facts.add(_check(table, expr, columns))
    return facts


def _checks_of(create: str) -> list[str]:
    """The CHECK expressions of a CREATE TABLE, by matching parentheses."""
    out = []
    for match in re.finditer(r"CHECK\s*\(", create, re.I):
        depth, i = 1, match.end()
        while depth:
            depth += {"(": 1, ")": -1}.get(create[i], 0)
            i += 1
        out.append(create[match.end():i - 1])
    return out


def postgres_catalog(conn: Any) -> set[str]:
    facts: set[str] = set()
    here = "current_schema()"
    for (table,) in conn.execute(f"SELECT tablename FROM pg_tables WHERE schemaname = {here}").fetchall():
        facts.add(f"table {table}")
    columns: dict[str, set[str]] = {}
    for table, name, kind, nullable, default, identity in conn.execute(
            "SELECT table_name, column_name, data_type, is_nullable, column_default, is_identity "
            f"FROM information_schema.columns WHERE table_schema = {here}").fetchall():
        columns.setdefault(table, set()).add(name)
        null = "null" if nullable == "YES" else "not null"
        default = "null" if identity == "YES" else _words(default or "null")  # SQLite: AUTOINCREMENT
        facts.add(f"column {table}.{name} {KINDS[kind]} {null} default {default}")
    for table, kind, name, columns_of, definition in conn.execute(
            "SELECT c.conrelid::regclass::text, c.contype, c.conname, "
            "  (SELECT array_agg(a.attname ORDER BY k.i) FROM unnest(c.conkey) WITH ORDINALITY k(n, i) "
            "   JOIN pg_attribute a ON a.attrelid = c.conrelid AND a.attnum = k.n), pg_get_constraintdef(c.oid) "
            f"FROM pg_constraint c WHERE c.connamespace = {here}::regnamespace").fetchall():
        cols = ", ".join(columns_of)
        if kind == "p":
            facts.add(f"primary key {table}({cols})")
        elif kind == "u":
            facts.add(f"unique {table}({cols})")
        elif kind == "f":
            ref, ref_cols = re.match(r"FOREIGN KEY \(.*?\) REFERENCES (\w+)\((.*?)\)", definition).groups()
            facts.add(f"foreign key {table}({cols}) -> {ref}({ref_cols})")
        elif kind == "c":
            facts.add(_check(table, definition, columns[table]))
    for index, table, unique, cols, where in conn.execute(
            "SELECT i.relname, t.relname, x.indisunique, "
            "  (SELECT string_agg(a.attname, ', ' ORDER BY k.i) FROM unnest(x.indkey::int2[]) WITH ORDINALITY k(n, i) "
            "   JOIN pg_attribute a ON a.attrelid = x.indrelid AND a.attnum = k.n), pg_get_expr(x.indpred, x.indrelid) "
            "FROM pg_index x JOIN pg_class i ON i.oid = x.indexrelid JOIN pg_class t ON t.oid = x.indrelid "
            f"WHERE t.relnamespace = {here}::regnamespace AND NOT EXISTS "
            "  (SELECT 1 FROM pg_constraint c WHERE c.conindid = x.indexrelid)").fetchall():
        facts.add(f"index {index} on {table}({cols}){' unique' if unique else ''}"
                  f"{' where ' + _words(where) if where else ''}")
    return facts


def seeded(conn: Any) -> set[str]:
    """The rows the schema itself writes."""
    rows = conn.execute("SELECT from_state, to_state FROM delivery_transitions").fetchall()
    rows += conn.execute("SELECT name, value FROM counters").fetchall()
    return {f"row {a} {b}" for a, b in rows}


def trigger_effects(conn: Any, error: type[BaseException]) -> set[str]:
    """Which delivery moves the store refuses, and whether the audit can be changed: tried
    on the live database in one transaction, each try in its own savepoint, all rolled back."""
    def tries(sql: str, params: tuple = ()) -> bool:
        conn.execute("SAVEPOINT t")
        try:
            conn.execute(sql, params)
            return True
        except error:
            return False
        finally:
            conn.execute("ROLLBACK TO SAVEPOINT t")

    mark = "?" if conn.__class__.__module__.startswith(("sqlite3", "_sqlite3")) else "%s"
    facts = set()
    conn.execute("BEGIN")
    try:
        conn.execute("INSERT INTO sessions (id, harness, cwd, tags, autonomy, created_at, last_seen) "
                     "VALUES ('s', 'sim', '/', '[]', 'hold', 0, 0)")
        conn.execute("INSERT INTO messages (id, sender, selector, created_at) VALUES (1, 's', 's', 0)")
        conn.execute("INSERT INTO events (seq, at, kind) VALUES (1, 0, 'join')")
        for a in STATES:
            for b in STATES:
                conn.execute("SAVEPOINT pair")
                conn.execute("INSERT INTO deliveries (recipient, message_id, state, created_at, updated_at) "
                             f"VALUES ('s', 1, {mark}, 0, 0)", (a,))
                if tries(f"UPDATE deliveries SET state = {mark} WHERE recipient = 's'", (b,)):
                    facts.add(f"delivery {a} -> {b}")
                conn.execute("ROLLBACK TO SAVEPOINT pair")
        facts.add(f"events update {tries('UPDATE events SET kind = {0} WHERE seq = 1'.format(repr('x')))}")
        facts.add(f"events delete {tries('DELETE FROM events WHERE seq = 1')}")
    finally:
        conn.execute("ROLLBACK")
    return facts


def catalog(store: Store, engine: str) -> set[str]:
    conn = store.db.conn  # the engine's own connection, between the store's transactions
    if engine == "sqlite":
        import sqlite3

        facts = sqlite_catalog(conn) | seeded(conn) | trigger_effects(conn, sqlite3.DatabaseError)
    else:
        import psycopg

        facts = postgres_catalog(conn) | seeded(conn) | trigger_effects(conn, psycopg.Error)
    return {f for f in facts if not any(re.search(p, f) for p in ENGINE_ONLY[engine])}


def differences(sqlite: set[str], postgres: set[str]) -> list[str]:
    return sorted([f"only on sqlite: {f}" for f in sqlite - postgres] + [f"only on postgresql: {f}" for f in postgres - sqlite])


@pytest.fixture
def both(tmp_path: Path, pg_url: str) -> tuple[Store, Store]:
    clock = Clock(fixed=1_000_000.0)
    with Store.open(str(tmp_path / "room.db"), clock=clock) as lite, Store.open(pg_url, clock=clock) as pg:
        yield lite, pg


def test_both_engines_migrate_to_one_data_model(both: tuple[Store, Store]) -> None:
    lite, pg = both
    found = catalog(lite, "sqlite")
    # The catalog was read whole: every kind of fact is there, and the triggers did refuse.
    for fact in ("table events", "column sessions.host text null default null", "primary key leases(path, session_id)",
                 "index sessions_label on sessions(label) where label is not null",
                 "check room_caps(autonomy) in ['hold', 'notify', 'wake']",
                 "foreign key deliveries(message_id) -> messages(id)", "row read acked",
                 "delivery stored -> offered", "events update False", "events delete False"):
        assert fact in found, fact
    # The moves the trigger lets through are the rules' own (store/delivery.py), and no other.
    moves = {f for f in found if f.startswith("delivery ")}
    assert moves == {f"delivery {a} -> {b}" for b, before in PREDECESSORS.items() for a in before} | {
        f"delivery {s} -> {s}" for s in STATES}
    assert differences(found, catalog(pg, "postgresql")) == []


def test_a_column_added_to_one_engine_only_is_a_difference(both: tuple[Store, Store]) -> None:
    lite, pg = both
    with lite.db.write() as tx:
        tx.execute("ALTER TABLE sessions ADD COLUMN nickname TEXT NOT NULL DEFAULT ''")
    with pg.db.write() as tx:
        tx.execute("CREATE INDEX sessions_cwd ON sessions (cwd)")
        tx.execute("ALTER TABLE leases ALTER COLUMN ttl_s DROP NOT NULL")
    assert differences(catalog(lite, "sqlite"), catalog(pg, "postgresql")) == [
        "only on postgresql: column leases.ttl_s real null default null",
        "only on postgresql: index sessions_cwd on sessions(cwd)",
        "only on sqlite: column leases.ttl_s real not null default null",
        "only on sqlite: column sessions.nickname text not null default ''",
    ]
