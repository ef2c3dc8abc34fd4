"""On PostgreSQL, a claim's holder checks are index lookups in byte order, whatever the
database's collation: the IN list of covering leases and the range beneath a directory both
use the leases' primary key, and the range compares with COLLATE "C" (under en-US, "/" sorts
among the punctuation, so a range in the database's order holds the wrong paths)."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from agents_room.store import Clock, Store
from agents_room.store.postgres import database as postgres

pytestmark = pytest.mark.postgres_only


@pytest.fixture
def recorded(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, tuple]]:
    """Every statement the PostgreSQL transactions run through ``all`` (they still run)."""
    seen: list[tuple[str, tuple]] = []
    real = postgres.Tx.all

    def all_(self: postgres.Tx, sql: str, params: tuple | dict = ()) -> list[tuple]:
        seen.append((sql, params))  # type: ignore[arg-type]
        return real(self, sql, params)

    monkeypatch.setattr(postgres.Tx, "all", all_)
    return seen


def _plan(store: Store, sql: str, params: tuple) -> str:
    with store.db.read() as tx:
        return "\n".join(r[0] for r in tx.all(f"EXPLAIN {sql}", params))


def test_a_claim_s_holder_checks_use_the_primary_key(
    store: Store, repo: Path, recorded: list[tuple[str, tuple]]
) -> None:
    store.db.serves_leases = False  # the rules' own statements (the server's functions: the next test)
    other = _filled(store, repo)
    recorded.clear()
    assert not store.lease_claim(other, "d7/").ok
    assert store.lease_claim(other, "e/x.py").ok
    covering = [(s, p) for s, p in recorded if "l.path IN (" in s]
    beneath = [(s, p) for s, p in recorded if 'l.path COLLATE "C" >' in s]
    assert covering and beneath
    for sql, params in covering + beneath:
        plan = _plan(store, sql, params)
        assert "leases_pkey" in plan and "Seq Scan on leases" not in plan, plan
    assert "Index Cond: ((path > " in _plan(store, *beneath[0]), "the range is not an index condition"


def _filled(store: Store, repo: Path) -> str:
    """5,000 live leases of one session, enough that a sequential scan would cost more; the
    id of another session, who claims."""
    sid = store.room_join(cwd=str(repo), pid=None, label="filler").session_id
    with store.db.write() as tx:
        tx.many("INSERT INTO leases (path, session_id, mode, token, ttl_s, acquired_at, expires_at) "
                "VALUES (?, ?, 'exclusive', ?, 600, ?, ?)",
                [(f"{repo}/d{i % 50}/f{i}.py", sid, i + 1, tx.now, tx.now + 600) for i in range(5000)])
        tx.execute("ANALYZE leases")
    return store.room_join(cwd=str(repo), pid=None, label="claimer").session_id


def test_the_claim_function_s_holder_checks_use_the_primary_key(store: Store, repo: Path) -> None:
    """The same of migrate_6.sql's claim function, its statements' plans as the server ran
    them (auto_explain, nested statements, sent to this client as notices)."""
    other = _filled(store, repo)
    conn = store.db._connection()  # type: ignore[attr-defined]
    plans: list[str] = []
    conn.add_notice_handler(lambda notice: plans.append(notice.message_primary or ""))
    conn.execute("LOAD 'auto_explain'; SET auto_explain.log_min_duration = 0; "
                 "SET auto_explain.log_nested_statements = on; SET auto_explain.log_level = notice")
    assert not store.lease_claim(other, "d7/").ok
    assert store.lease_claim(other, "e/x.py").ok
    covering = [p for p in plans if "l.path = ANY (covering)" in p]  # or l.ident = ANY (p_idents): migrate_5.sql's
    beneath = [p for p in plans if 'l.path COLLATE "C" > p_path' in p]
    assert len(covering) == 2 and len(beneath) == 1, plans
    for plan in covering + beneath:
        assert "leases_pkey" in plan and "Seq Scan on leases" not in plan, plan
    for plan in covering:
        assert "leases_ident" in plan and "leases_name_ident" in plan, plan
    assert "Index Cond: ((path > " in beneath[0], "the range is not an index condition"
    plans.clear()  # the filler, holding 5,000 leases, claims: its own leases under another name by identity
    filler = next(x.session_id for x in store.lease_list(other) if x.session_id != other)
    assert store.lease_claim(filler, "e/y.py").ok
    renamed = [p for p in plans if "l.name_ident = v_own" in p]
    assert len(renamed) == 1 and "Seq Scan on leases" not in renamed[0], plans
    assert "leases_ident" in renamed[0] and "leases_name_ident" in renamed[0], renamed[0]


@pytest.fixture
def icu_store(pg_cluster: object, clock: Clock) -> Iterator[Store]:
    """A store in a database whose default collation is ICU's en-US."""
    import psycopg

    name = f"icu_{uuid.uuid4().hex[:12]}"
    base = pg_cluster.url()  # type: ignore[attr-defined]
    with psycopg.connect(base, autocommit=True) as conn:
        conn.execute(f"CREATE DATABASE {name} TEMPLATE template0 ENCODING 'UTF8' LOCALE 'C' "
                     "LOCALE_PROVIDER icu ICU_LOCALE 'en-US'")
    s = Store.open(pg_cluster.url(name), clock=clock, busy_timeout_s=2.0)  # type: ignore[attr-defined]
    yield s
    s.close()


def _icu_claims(store: Store) -> tuple[bool, bool]:
    a = store.room_join(cwd="/r", pid=None, label="a").session_id
    b = store.room_join(cwd="/r", pid=None, label="b").session_id
    # "#" sorts after "/" and before "0" under en-US, bytes put it before "/" ("/" = 0x2f, "#" = 0x23)
    assert store.lease_claim(a, "/r/src/api#x.py").ok
    assert store.lease_claim(a, "/r/src/api/x.py").ok
    return store.lease_claim(b, "/r/src/api/").ok, store.lease_claim(b, "/r/src/").ok


def test_coverage_holds_in_a_database_ordered_by_en_us(icu_store: Store) -> None:
    assert _icu_claims(icu_store) == (False, False)
    a = icu_store.room_join(cwd="/r", pid=None, label="a2").session_id
    assert icu_store.lease_claim(a, "/r/lib/").ok
    b = icu_store.room_join(cwd="/r", pid=None, label="b2").session_id
    assert icu_store.lease_claim(b, "/r/lib#x.py").ok  # not beneath /r/lib/, whatever en-US says


def test_the_collation_check_fails_where_the_range_is_in_en_us_order(icu_store: Store) -> None:
    """The check above can fail: with the database's collation on the range, a lease that is
    not beneath the directory falls inside it."""
    a = icu_store.room_join(cwd="/r", pid=None, label="a").session_id
    b = icu_store.room_join(cwd="/r", pid=None, label="b").session_id
    assert icu_store.lease_claim(a, "/r/lib#x.py").ok
    with icu_store.db.write() as tx:
        in_en_us = tx.all('SELECT path FROM leases WHERE path COLLATE "default" >= ? AND path COLLATE "default" < ?',
                          ("/r/lib/", "/r/lib0"))
    assert in_en_us == [("/r/lib#x.py",)]
    assert icu_store.lease_claim(b, "/r/lib/").ok
