"""``sim bench --store postgresql://...``: the store on SQLite, the store on PostgreSQL,
PostgreSQL's raw ceiling (``sim.bench.raw_pg``: the server function the store calls, through
bare psycopg), the one lock's ceiling (one INSERT under the store's write lock, committed as
the store commits) and PostgreSQL's plain baseline (one INSERT and its durable COMMIT per
call, no lock), side by side at each process count, their windows alternating round by round.

| kind | what a worker is | operations |
|---|---|---|
| ``store`` | the store on a fresh SQLite file | the store's five |
| ``store-pg`` | the store on a fresh schema of the given database | the store's five, lease_pair |
| ``raw-pg`` | bare psycopg on a fresh schema (made by the store): the claim function | lease_claim |
| ``locked-pg`` | bare psycopg: INSERT under the write lock, the store's commit and flush | lease_claim (as one such write) |
| ``plain-pg`` | bare psycopg: INSERT + COMMIT (synchronous_commit on) | lease_claim (as one such write) |

The closing table divides the PostgreSQL store by the plain baseline: its ``lease_claim``
calls per second, and (with ``lease_pair`` in ``--ops``) its claim+release writes per second
(two committed writes per pair) over plain commits per second; and ``locked-pg`` by the plain
baseline: what any write under the one lock can reach at most (docs/decisions.md, "What one
lock costs").

Each group gets its own schema (``CREATE SCHEMA``, dropped at the end), so the database must
let the URL's role create schemas, and take ``2 x procs`` connections at once besides its
others (64 processes: 128; PostgreSQL's default ``max_connections`` is 100).
"""

from __future__ import annotations

import math
import secrets
from typing import Any

STORE_OPS = ("lease_claim", "lease_release", "msg_send", "msg_recv", "drift_check")
KIND_OPS = {"store-pg": (*STORE_OPS, "lease_pair"), "raw-pg": ("lease_claim",), "locked-pg": ("lease_claim",),
            "plain-pg": ("lease_claim",)}
KINDS = ("store", "store-pg", "raw-pg", "locked-pg", "plain-pg")


def refuse(url: str | None) -> str | None:
    """Why ``--store`` cannot be benched (one line), else None (no ``--store`` at all too)."""
    if url is None:
        return None
    from agents_room.store import StoreError
    from agents_room.store.location import redact, resolve

    try:
        where = resolve(url, source="--store")
    except StoreError as exc:
        return exc.text
    if where.engine != "postgresql":
        return f"--store {url}: sim bench compares the engines, give a postgresql:// URL (SQLite is benched anyway)"
    if "options=" in url:
        return f"--store {redact(url)}: no options= please; sim bench makes a schema per group and sets search_path"
    try:
        import psycopg

        with psycopg.connect(url, connect_timeout=5) as conn:
            conn.execute("SELECT 1")
    except ImportError:
        return "--store: PostgreSQL needs psycopg: pip install 'agents-room[postgres]'"
    except psycopg.Error as exc:
        words = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        return f"--store {redact(url)}: cannot connect: {words.replace(url, redact(url))}"
    return None


def new_schema(url: str, kind: str, procs: int) -> tuple[str, str] | None:
    """For a PostgreSQL kind, a fresh schema of the database ``url`` names: (the store URL
    whose search_path is that schema, the schema's name); None for the other kinds."""
    if kind not in KIND_OPS:
        return None
    import psycopg

    name = f"bench_{kind.replace('-', '_')}_{procs}_{secrets.token_hex(4)}"
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(f"CREATE SCHEMA {name}")
    return f"{url}{'&' if '?' in url else '?'}options=-csearch_path%3D{name}", name


def drop_schema(url: str, name: str | None) -> None:
    if name is None:
        return
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(f"DROP SCHEMA IF EXISTS {name} CASCADE")


def plan(procs: tuple[int, ...], ops: tuple[str, ...]) -> list[list[tuple[str, int]]]:
    """The kinds at each process count (those that have an operation of ``ops``)."""
    kind_ops = {"store": STORE_OPS, **KIND_OPS}
    return [[(k, n) for k in KINDS if set(kind_ops[k]) & set(ops)] for n in procs]


def _cell(cells: list[dict[str, Any]], kind: str, op: str, n: int) -> dict[str, Any] | None:
    c = next((c for c in cells if (c["kind"], c["op"], c["procs"]) == (kind, op, n)), None)
    return None if c is None else {"per_s": c["per_s"], "p99_ms": c["p99_ms"], "errors": c["errors"]}


def _over(a: float | None, b: dict[str, Any] | None) -> float | None:
    return a / b["per_s"] if a is not None and b and b["per_s"] else None


def table(cells: list[dict[str, Any]], op: str = "lease_claim") -> list[dict[str, Any]]:
    """The closing table: per process count, ``op``'s throughput and p99 for each kind, the
    PostgreSQL store over its raw ceiling and over the plain baseline, and the store's
    ``lease_pair`` (claim+release: two writes) in writes per second over the plain baseline,
    and the one lock's ceiling over the plain baseline."""
    rows = []
    for n in sorted({c["procs"] for c in cells if c["kind"] in KINDS and c["op"] == op}):
        row: dict[str, Any] = {"procs": n, **{kind: _cell(cells, kind, op, n) for kind in KINDS}}
        pg, plain = row["store-pg"], row["plain-pg"]
        row["pg_store_over_raw"] = _over(pg and pg["per_s"], row["raw-pg"])
        row["pg_store_over_plain"] = _over(pg and pg["per_s"], plain)
        row["pair"] = pair = _cell(cells, "store-pg", "lease_pair", n)
        row["pg_pair_writes_over_plain"] = _over(pair and 2 * pair["per_s"], plain)
        row["pg_locked_over_plain"] = _over(row["locked-pg"] and row["locked-pg"]["per_s"], plain)
        rows.append(row)
    return rows


def print_table(console: Any, data: dict[str, Any], op: str = "lease_claim") -> None:
    """The closing table of a ``--store`` run (nothing without one)."""
    from rich.table import Table

    rows, machine = data.get("engines"), data["machine"]
    if not rows:
        return
    load = f"1-min load {machine['load_before'][0]:.2f} before, {machine['load_after'][0]:.2f} after"
    t = Table(title=f"{op}: SQLite store, PostgreSQL store, PostgreSQL raw, one INSERT under the lock, plain INSERT+COMMIT "
                    f"(one run; {load})")
    t.add_column("procs", justify="right")
    for kind in (*KINDS, "pair"):
        t.add_column(f"{'store-pg lease_pair' if kind == 'pair' else kind} /s", justify="right")
        t.add_column(f"{'pair' if kind == 'pair' else kind} p99 ms", justify="right")
    for name in ("pg store / raw", "pg store / plain", "pg claim+release writes / plain", "pg locked / plain"):
        t.add_column(name, justify="right")
    for r in rows:
        cols = []
        for kind in (*KINDS, "pair"):
            c = r[kind]
            cols += ["—", "—"] if c is None else [f"{c['per_s']:,.0f}", _ms(c["p99_ms"])]
        for key in ("pg_store_over_raw", "pg_store_over_plain", "pg_pair_writes_over_plain", "pg_locked_over_plain"):
            cols.append("—" if r[key] is None else f"{r[key]:.2f}")
        t.add_row(str(r["procs"]), *cols)
    console.print(t)


def _ms(x: float) -> str:
    return "—" if x is None or math.isnan(x) else f"{x:.2f}"
