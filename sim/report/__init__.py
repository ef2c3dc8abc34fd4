"""The report of a run: figures from the history (``stats``: per-operation latency and
throughput, fairness, expectations), ``plots`` (matplotlib, Agg), and ``writer``:
``report.json``, ``report.md`` and the terminal summary.

Imports from sim: ``scenario``, ``check``, ``hosts``, ``faults`` and ``run`` (facts of the run such as
which operations write and the store factory's variable).
"""
