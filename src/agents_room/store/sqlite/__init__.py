"""The SQLite engine: one file in WAL mode on this machine (the default store).

- :mod:`.database`: the connection, its transactions (``BEGIN IMMEDIATE``), the WAL's bound
  and the mapping of SQLite's errors onto the store's error tree;
- :mod:`.opening`: creating the file privately, the pragmas, the integrity check and the
  forward-only migrations (``schema.sql``, ``migrate_N.sql``);
- :mod:`.admission`, :mod:`.turnqueue`, :mod:`.sidefile`: the fair queue of writers in the
  side file ``<db>-admission`` (SQLite's own busy handler keeps no queue).

Empty on purpose: the hook's news path imports :mod:`.opening` alone.
"""
