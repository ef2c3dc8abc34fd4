"""The checker: what a run's files prove. Input: the clients' history (``history/*.jsonl``,
merged), the store's events and ``PRAGMA integrity_check``; output: the verdict (``valid``,
``invalid``, ``unknown``) with every violation. Invariants: docs/history.md.

- ``identity``: every path in its real spelling (a run that spells a repository two ways);
- ``cover``: which lease covers which path (directory leases), by the checker's own rule;
- ``history``: the history file format (written by the agents, read here);
- ``operation``: records paired into operations; ``model``: the lease and delivery model;
- ``replay``: the events through the model; ``crosscheck``: history against events;
  ``delivery``: exactly-once arithmetic; ``drift``: drift truth and stale-holder writes;
  ``blackbox``: lease windows from the history alone; ``oracle`` (rule ids in ``rules``): the
  protocol recomputed from commit order and the clients' arguments, its state one record per
  concern (``oracle_state``), each written by its own module (``oracle_rooms``,
  ``oracle_mail``, ``oracle_leases``, ``oracle_wake``), the reads judged by ``oracle_reads``;
- ``guarded``: the edits agents made through the edit guard (invariant ``edit-guard``);
- ``checker``: all of it, and the verdict (``check``).

Imports from sim: nothing, so it can judge a run made elsewhere (``agents_room.store`` for
the event type only).
"""
