"""The report of a run: figures from the history (``stats``: per-operation latency and
throughput, fairness, expectations), ``plots`` (matplotlib, Agg), ``hosts`` (the figures per
simulated host of a ``[hosts]`` run), ``writer`` (``report.json`` and ``report.md``; ``checks``
its words for the checker's results and the faults) and
``terminal`` (the summary printed at the end), ``fitted`` (a fitted scenario's figures beside the
run's own).

Imports from sim: ``scenario``, ``check``, ``hosts``, ``faults``, ``run`` (facts of the run such as
which operations write and the store factory's variable) and ``fit`` (the same measure of traffic).
"""
