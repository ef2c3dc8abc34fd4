"""``sim bench`` and the capacity sweep, beside the pipeline.

- ``bench``: the command: groups of worker processes, the store against bare SQLite and
  ``agents-room serve`` against a bare MCP server; ``report``: its ratios, tables, plot;
- ``worker``: one bench process, ``python -m sim.bench.worker``; ``raw``: the raw ceiling
  (bare ``sqlite3``); ``bare``: the bare MCP server, ``python -m sim.bench.bare``;
- ``sweep``: ``sim run --sweep``, one full run per value, and the knee;
- ``hook``: each harness's installed hook, CPU and wall per run (quiet, news, no marker),
  ``python -m sim.bench.hook``;
- ``counting``: what counting calls costs (store/callcounts.py), on and off,
  ``python -m sim.bench.counting``; ``fitscale``: ``sim fit`` on a shared-room run's store and
  the fitted scenario at ``--scale 1, 4, 10``, ``python -m sim.bench.fitscale``.

Imports from sim: ``scenario``, ``check``, ``hosts``, ``faults``, ``run``, ``report``, ``pipeline`` and ``fit``.
"""
