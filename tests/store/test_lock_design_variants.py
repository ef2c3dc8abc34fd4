"""``bench/pg_lock_designs.py`` measures variants of the store's lease functions (docs/decisions.md,
"What one lock costs"), each made from the functions the server holds. Its figures mean
something only while every variant still applies to those functions and still keeps the
rules: a grant, a denial of the same path to another session, a release."""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path
from types import ModuleType

import psycopg
import pytest

pytestmark = pytest.mark.postgres_only

SCRIPT = Path(__file__).resolve().parents[2] / "bench" / "pg_lock_designs.py"


def designs() -> ModuleType:
    """The script, loaded as a module (bench/ is not a package)."""
    spec = importlib.util.spec_from_file_location("pg_lock_designs", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_every_variant_applies_to_the_shipped_functions_and_keeps_the_rules(pg_url: str) -> None:
    from agents_room.store import Store

    bench = designs()
    with Store.open(pg_url) as store, psycopg.connect(pg_url, autocommit=True) as conn:
        a, b = (store.room_join(cwd="/w", pid=None, label=who).session_id for who in ("a", "b"))
        made = bench.install(conn, a, b)
        assert set(made) == {"shipped", "lean", "try-sync", "per-path"}
        # each variant is its own pair of functions beside the store's, which stay as they were
        names = {r[0] for r in conn.execute("SELECT proname FROM pg_proc WHERE proname LIKE '%%_lease_%%'")}
        for prefix, _sql in made.values():
            assert {f"{prefix}_lease_claim", f"{prefix}_lease_release"} <= names
        shipped = conn.execute("SELECT pg_get_functiondef('agents_room_lease_claim'::regproc)").fetchone()[0]
        assert "pg_advisory_xact_lock(7018704367216558081)" in shipped and "nextval" not in shipped


def test_a_variant_that_answers_otherwise_stops_the_bench(pg_url: str) -> None:
    """The check is what keeps a broken variant's speed out of the figures: a claim function
    that grants to everyone is refused before anything is measured."""
    from agents_room.store import Store

    bench = designs()
    with Store.open(pg_url) as store, psycopg.connect(pg_url, autocommit=True) as conn:
        a, b = (store.room_join(cwd="/w", pid=None, label=who).session_id for who in ("a", "b"))
        source = conn.execute("SELECT pg_get_functiondef('agents_room_lease_claim'::regproc)").fetchone()[0]
        release = conn.execute("SELECT pg_get_functiondef('agents_room_lease_release'::regproc)").fetchone()[0]
        for sql in (bench._swap(source, "IF o_in_the_way > 0 THEN", "IF false THEN"), release):
            conn.execute(re.sub(r"FUNCTION (\S+\.)?agents_room_lease_", "FUNCTION broken_lease_", sql))
        with pytest.raises(SystemExit, match="broken: answered"):
            bench.check(conn, "broken", a, b)


def test_a_window_counts_writes_and_the_cpu_each_took(pg_url: str) -> None:
    """The CPU column is what bounds a kind on few cores (2 s / CPU per write a second): a
    window of plain commits reports a rate, and a CPU cost per write that is positive, finite,
    and no more than every core busy for the whole steady middle could spend on that many writes."""
    import math
    import os

    from agents_room.store import Store

    bench = designs()
    with Store.open(pg_url) as store:
        sid = store.room_join(cwd="/w", pid=None, label="w").session_id
    before = bench.busy_seconds()
    rate, cpu_us = bench.window(pg_url, "plain", "", [sid], 2.0)
    assert bench.busy_seconds() > before
    with psycopg.connect(pg_url) as conn:
        committed = conn.execute("SELECT count(*) FROM events WHERE kind = 'plain'").fetchone()[0]
    assert rate > 0 and committed >= rate  # every counted write is a committed row (2 s of them)
    # /proc/stat counts in ticks (10 ms): a tick either side of the 1 s middle is 2% of it
    assert math.isfinite(cpu_us) and 0 < cpu_us <= (os.cpu_count() or 1) / rate * 1e6 * 1.02
