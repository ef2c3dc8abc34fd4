"""``sim bench --store postgresql://...``: the store on SQLite, the store on PostgreSQL and
PostgreSQL's raw ceiling (bare psycopg, the store's statements and lock) in one tiny real run
on the throwaway cluster, each group on a schema of its own, dropped at the end."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import psycopg
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

from test_bench import sim  # noqa: E402

from sim.bench.engines import KINDS, table  # noqa: E402

pytestmark = pytest.mark.postgres_only


def schemas(url: str) -> set[str]:
    with psycopg.connect(url) as conn:
        return {r[0] for r in conn.execute("SELECT nspname FROM pg_namespace WHERE nspname LIKE 'bench_%'")}


@pytest.mark.slow
def test_bench_puts_the_engines_side_by_side(pg_cluster, tmp_path: Path) -> None:
    url, out = pg_cluster.url(), tmp_path / "bench"
    before = schemas(url)
    done = sim("bench", "--out", str(out), "--store", url, "--procs", "1,2", "--ops", "lease_claim", "--seconds",
               "0.4", "--rounds", "1", "--warmup", "0.1", "--hook-runs", "0", cwd=tmp_path)
    assert done.returncode == 0, done.stderr + done.stdout[-3000:]
    data = json.loads((out / "bench.json").read_text())
    cells = {(c["kind"], c["procs"]) for c in data["cells"] if c["op"] == "lease_claim" and c["count"] > 0}
    assert cells == {(k, n) for k in KINDS for n in (1, 2)}  # SQLite store, PostgreSQL store and raw, each count
    assert not any(c["errors"] for c in data["cells"]), data["cells"]
    rows = data["engines"]
    assert [r["procs"] for r in rows] == [1, 2]
    for r in rows:
        assert all(r[k]["per_s"] > 0 and r[k]["p99_ms"] > 0 for k in KINDS), r
        assert r["pg_store_over_raw"] == pytest.approx(r["store-pg"]["per_s"] / r["raw-pg"]["per_s"])
        # the true baseline: plain INSERT+COMMIT from as many processes, in the same run
        assert r["pg_store_over_plain"] == pytest.approx(r["store-pg"]["per_s"] / r["plain-pg"]["per_s"])
        assert r["pg_locked_over_plain"] == pytest.approx(r["locked-pg"]["per_s"] / r["plain-pg"]["per_s"])
    assert "PostgreSQL raw, one INSERT under the lock, plain INSERT+COMMIT" in done.stdout
    assert schemas(url) == before  # every group's schema dropped


def test_the_closing_table_lines_up_the_kinds() -> None:
    cell = {"op": "lease_claim", "procs": 4, "p99_ms": 2.0, "errors": {}}
    cells = [{**cell, "kind": "store", "per_s": 900.0}, {**cell, "kind": "store-pg", "per_s": 300.0},
             {**cell, "kind": "raw-pg", "per_s": 400.0}, {**cell, "kind": "raw", "per_s": 5.0},
             {**cell, "kind": "plain-pg", "per_s": 1000.0}, {**cell, "kind": "locked-pg", "per_s": 550.0},
             {**cell, "kind": "store-pg", "op": "lease_pair", "per_s": 200.0},
             {**cell, "kind": "store", "op": "msg_send", "per_s": 1.0}]
    [row] = table(cells)
    assert row["procs"] == 4 and row["store"]["per_s"] == 900 and row["pg_store_over_raw"] == 0.75
    assert row["pg_store_over_plain"] == 0.3
    assert row["pg_pair_writes_over_plain"] == 0.4  # a pair is two committed writes
    assert row["pg_locked_over_plain"] == 0.55  # the one lock's ceiling
    [alone] = table([c for c in cells if c["kind"] != "plain-pg"])
    assert alone["pg_store_over_plain"] is None and alone["pg_pair_writes_over_plain"] is None
    assert alone["pg_locked_over_plain"] is None


def test_the_plain_baseline_commits_each_insert_durably(pg_url: str) -> None:
    """plain-pg is INSERT + COMMIT with synchronous_commit on, whatever the server's default:
    each call's row is committed (seen from another connection) and no lock is taken."""
    from agents_room.store import Store
    from sim.bench.raw_pg import PlainPgRoom

    Store.open(pg_url).close()
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute("ALTER ROLE CURRENT_USER SET synchronous_commit = off")
        try:
            plain = PlainPgRoom(pg_url)
            assert plain.conn.execute("SHOW synchronous_commit").fetchone()[0] == "on"
            seq = plain.claim(plain.join("/w", "r", "w"), "/w/x.py", 1)["seq"]
            assert conn.execute("SELECT kind FROM events WHERE seq = %s", (seq,)).fetchone() == ("plain",)
            assert conn.execute("SELECT count(*) FROM pg_locks WHERE locktype = 'advisory'").fetchone()[0] == 0
            plain.close()
        finally:
            conn.execute("ALTER ROLE CURRENT_USER RESET synchronous_commit")


@pytest.mark.parametrize(("store", "words"), [
    ("/tmp/room.db", "give a postgresql:// URL"),
    ("postgresql://agents@/postgres?options=-csearch_path%3Dx", "no options="),
    ("postgresql://nobody:s3cret@127.0.0.1:1/db", "cannot connect"),
])
def test_bench_refuses_a_store_it_cannot_use(store: str, words: str, tmp_path: Path) -> None:
    done = sim("bench", "--out", str(tmp_path / "x"), "--store", store, cwd=tmp_path, timeout=60)
    assert done.returncode == 2 and words in done.stderr and done.stderr.count("\n") == 1, done.stderr
    assert "s3cret" not in done.stderr
    assert not (tmp_path / "x").exists()


def test_a_raw_claim_that_waits_past_the_lock_timeout_leaves_the_connection_usable(pg_url: str) -> None:
    """64 workers joining at once at load 87 waited past lock_timeout; the retry then found the
    transaction aborted. A lock held by another connection: the wait fails, then works."""
    from agents_room.store import Store
    from agents_room.store.postgres.database import WRITE_LOCK
    from sim.bench.raw_pg import RawPgRoom

    Store.open(pg_url).close()
    raw = RawPgRoom(pg_url)
    raw.conn.execute("SET lock_timeout = 200")
    with psycopg.connect(pg_url) as holder:
        holder.execute("SELECT pg_advisory_xact_lock(%s)", (WRITE_LOCK,))  # held until this block ends
        with pytest.raises(psycopg.errors.LockNotAvailable):
            raw.join("/work", "repo:work", "w")
        holder.rollback()
    sid = raw.join("/work", "repo:work", "w")
    assert raw.claim(sid, "/work/x.py", 30)["ok"] is True
    raw.close()


def test_the_raw_ceiling_runs_the_servers_claim_function(pg_url: str) -> None:
    """raw-pg sends what the store sends for a claim: the server's function, whose rules
    grant a free path, deny a held one and fence each grant with a new token."""
    from agents_room.store import Store
    from sim.bench.raw_pg import RawPgRoom

    Store.open(pg_url).close()
    raw = RawPgRoom(pg_url)
    a, b = raw.join("/w", "repo:w", "a"), raw.join("/w", "repo:w", "b")
    first = raw.claim(a, "/w/x.py", 30)
    assert first["ok"] is True and raw.claim(b, "/w/x.py", 30)["ok"] is False
    assert raw.claim(b, "/w/y.py", 30)["token"] > first["token"]  # type: ignore[operator]
    with psycopg.connect(pg_url) as conn:
        kinds = [r[0] for r in conn.execute("SELECT kind FROM events WHERE kind LIKE 'lease%' ORDER BY seq")]
        assert kinds == ["lease_grant", "lease_grant"]  # the denial changed nothing
        assert conn.execute("SELECT count(*) FROM pg_locks WHERE locktype = 'advisory'").fetchone()[0] == 0
    raw.close()


def test_the_locked_ceiling_waits_for_the_write_lock_and_commits_its_row(pg_url: str) -> None:
    """locked-pg's write takes the store's write lock (it waits while another holds it) and
    commits its one row; once the lock is free it goes through."""
    from agents_room.store import Store
    from agents_room.store.postgres.database import WRITE_LOCK
    from sim.bench.raw_pg import LockedPgRoom

    Store.open(pg_url).close()
    locked = LockedPgRoom(pg_url)
    locked.conn.execute("SET lock_timeout = 200")
    with psycopg.connect(pg_url) as holder:
        holder.execute("SELECT pg_advisory_xact_lock(%s)", (WRITE_LOCK,))
        with pytest.raises(psycopg.errors.LockNotAvailable):
            locked.claim("s", "/w/x.py", 1)
        holder.rollback()
    seq = locked.claim("s", "/w/x.py", 1)["seq"]
    with psycopg.connect(pg_url) as conn:
        assert conn.execute("SELECT kind, path FROM events WHERE seq = %s", (seq,)).fetchone() == ("locked", "/w/x.py")
        assert conn.execute("SELECT count(*) FROM events WHERE kind = 'locked'").fetchone()[0] == 1  # the refused one left none
    locked.close()
