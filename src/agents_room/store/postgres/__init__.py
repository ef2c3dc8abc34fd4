"""The PostgreSQL engine (``postgresql://`` locations; the ``postgres`` extra, psycopg 3).

- :mod:`.database`: the connection, the one advisory write lock that orders the audit, the
  server's clock, the bounded lock wait, the migrations (``schema.sql``, ``migrate_N.sql``) and
  the mapping of PostgreSQL's errors onto the store's error tree;
- :mod:`.listen`: LISTEN/NOTIFY, a session's mail pushed to its waiters at the sender's commit.

Empty on purpose: importing the package needs no driver.
"""
