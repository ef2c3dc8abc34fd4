"""The PostgreSQL engine (``postgresql://`` locations; the ``postgres`` extra, psycopg 3).

- :mod:`.database`: the connection, the one advisory write lock that orders the audit, the
  server's clock, the bounded lock wait, the migrations (``schema.sql``, ``migrate_N.sql``) and
  the mapping of PostgreSQL's errors onto the store's error tree; the commit inside the lock
  without waiting for the WAL flush, and the flush outside it before any answer;
- :mod:`.tx`: the transaction the rules run their statements in, holding those whose results
  they do not need until the next round trip;
- :mod:`.listen`: LISTEN/NOTIFY, a session's mail pushed to its waiters at the sender's commit.

Empty on purpose: importing the package needs no driver.
"""
