"""Scenarios: a TOML file read strictly into frozen dataclasses, every key typed and bounded.

- ``tables``: strict reading of one TOML table (``ScenarioError`` names the table and key);
- ``faultplan``: the ``[faults]`` table, and when each planned fault is due (``schedule``);
- ``think``: ``[workload.think]``, the think-time distribution (an empirical one by its quantiles);
- ``drivers``: what each driver can run (wake levers, CLIs, guarded edits);
- ``fitted``: ``[fitted]``, the traffic ``sim fit`` measured, for the report to compare;
- ``scenario``: the whole file (``load``, ``parse``, overrides); ``totoml``: written back (``to_toml``).

Imports from sim: nothing (the standard library only).
"""
