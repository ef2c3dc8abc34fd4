"""Scenarios: a TOML file read strictly into frozen dataclasses, every key typed and bounded.

- ``tables``: strict reading of one TOML table (``ScenarioError`` names the table and key);
- ``faultplan``: the ``[faults]`` table, and when each planned fault is due (``schedule``);
- ``scenario``: the whole file (``load``, ``parse``, ``to_toml``, overrides).

Imports from sim: nothing (the standard library only).
"""
