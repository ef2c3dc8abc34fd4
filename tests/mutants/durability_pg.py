"""The answer-before-flush mutant on PostgreSQL: the store's write transactions still commit
inside the write lock without waiting for their WAL flush (``synchronous_commit`` off for
themselves), but nothing makes the WAL durable before the answer goes out: a write ends with
a bare ``COMMIT`` (a lease write's function call too), a read with a bare ``ROLLBACK``. A server lost right after the answer loses
the commit the caller was told of (its own, or another's that its read saw).
tests/store/test_pg_durability.py crashes a real server there and catches it."""

from __future__ import annotations

from agents_room.store.postgres import database as postgres

from .mutation import rewrite


def answer_before_flush() -> None:
    """Rewrite the shipped engine in this process: the write's COMMIT and the read's end
    without the flush (each snippet must still occur once in the shipped source)."""
    rewrite(postgres, "_Write.__exit__", 'sent_with(f"COMMIT; {DURABLE}")', 'sent_with("COMMIT")')
    # a lease claim or release in one round trip (postgres/leasecalls.py): nothing after its COMMIT
    rewrite(postgres, "Database.serve_lease", "serve(self, call, BEGIN_WRITE, DURABLE)",
            'serve(self, call, BEGIN_WRITE, "SELECT 1")')
    rewrite(postgres, "Database._end_read", "conn.execute(f\"ROLLBACK; {durable(repr(seen) + '::pg_lsn')}\")",
            'conn.execute("ROLLBACK")')

