"""The report of a run: figures from the history (``stats``: per-operation latency and
throughput, fairness, expectations), ``plots`` (matplotlib, Agg), ``hosts`` (the figures per
simulated host of a ``[hosts]`` run), ``writer`` (``report.json`` and ``report.md``) and
``terminal`` (the summary printed at the end).

Imports from sim: ``scenario``, ``check``, ``hosts``, ``faults`` and ``run`` (facts of the run such as
which operations write and the store factory's variable).
"""
