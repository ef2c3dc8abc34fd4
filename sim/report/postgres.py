"""The database's figures of a run on PostgreSQL (sampled by sim/run/pgsample.py), in place of
the SQLite WAL file's size: the most connections, the most and the mean sessions waiting for
the store's write lock, the WAL bytes written and the commits, each per second too.

The WAL position and the commit count are cumulative counters. A crash of the server
(``pg_kill``) resets the commit count: a step down is counted as a restart from zero, so the
sum of the steps is what the run committed. Samples the server did not answer (cut off,
paused, restarting) are left out.
"""

from __future__ import annotations

from typing import Any


def answered(samples: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [r for r in samples if r.get("kind") == "sample" and r.get("pg_commits") is not None]


def grown(values: list[int]) -> int:
    """What a cumulative counter grew by over ``values``, a step down being a reset to zero."""
    return sum(b - a if b >= a else b for a, b in zip(values, values[1:]))


def rates(rows: list[dict[str, Any]], key: str) -> list[tuple[float, float]]:
    """(t, per second) between consecutive answered samples of a cumulative ``key``."""
    out = []
    for a, b in zip(rows, rows[1:]):
        dt = b["t"] - a["t"]
        if dt > 0:
            out.append((b["t"], grown([a[key], b[key]]) / dt))
    return out


def summary(samples: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The report's ``postgres`` block; None when no sample has database figures (SQLite)."""
    rows = answered(samples)
    if not rows:
        return None
    span = rows[-1]["t"] - rows[0]["t"]
    commits, wal = grown([r["pg_commits"] for r in rows]), grown([r["pg_wal_bytes"] for r in rows])
    waits = [r["pg_lock_waits"] for r in rows]
    unanswered = sum(1 for r in samples if r.get("kind") == "sample" and "pg_commits" in r) - len(rows)
    return {"samples": len(rows), "unanswered": unanswered, "seconds": span,
            "max_connections": max(r["pg_connections"] for r in rows),
            "max_lock_waits": max(waits), "mean_lock_waits": sum(waits) / len(waits),
            "wal_bytes": wal, "wal_bytes_per_s": wal / span if span > 0 else 0.0,
            "commits": commits, "commits_per_s": commits / span if span > 0 else 0.0}


def words(p: dict[str, Any]) -> str:
    """One sentence for report.md's Store section."""
    missed = f" ({p['unanswered']} samples unanswered: the server was cut off, paused or restarting)" \
        if p["unanswered"] else ""
    return (f"PostgreSQL, sampled {p['samples']} times over {p['seconds']:.1f} s{missed}: at most "
            f"{p['max_connections']} connections to the database; at most {p['max_lock_waits']} sessions waiting "
            f"for the write lock (mean {p['mean_lock_waits']:.2f}); {p['wal_bytes'] / 2**20:.1f} MiB of WAL "
            f"written ({p['wal_bytes_per_s'] / 2**20:.2f} MiB/s); {p['commits']:,} commits "
            f"({p['commits_per_s']:,.0f}/s).")


def line(p: dict[str, Any]) -> str:
    """The terminal's few words."""
    return (f"PostgreSQL: {p['max_connections']} connections max, write-lock waiters max {p['max_lock_waits']}, "
            f"WAL {p['wal_bytes'] / 2**20:.1f} MiB written, {p['commits_per_s']:,.0f} commits/s")
