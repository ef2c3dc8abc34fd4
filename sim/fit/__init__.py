"""``sim fit``: a scenario from a store's own traffic, and the comparison of a run with it.

- ``distribution``: quantiles, mean and spread of a histogram or a sample;
- ``traffic``: what a store's events and call counts say of a stretch of time (``measure``):
  numbers only, never a name;
- ``scenario_of``: that traffic as a scenario the simulator runs (``fit``), with a comment block
  saying what it could not see;
- ``compare``: a run's own traffic beside the fitted figures, per agent (``sim run``'s report).

Imports from sim: ``scenario``.
"""
