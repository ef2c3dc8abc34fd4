"""Writing TOML values: the standard library reads TOML (``tomllib``) but does not write it.
Used for the Codex config ``agents-room install`` edits (agents_room/codex_config.py) and the
scenario a simulator run writes as run (sim/scenario/scenario.py)."""

from __future__ import annotations

import json
from typing import Any


def toml_value(value: Any) -> str:
    """``value`` (a bool, number, string, list or tuple of them, or a dict as an inline table)
    as TOML. Raises ``TypeError`` for anything else."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return repr(value)
    if isinstance(value, str):
        return json.dumps(value)  # a JSON string is a valid TOML basic string
    if isinstance(value, list | tuple):
        return "[" + ", ".join(toml_value(v) for v in value) + "]"
    if isinstance(value, dict):  # an inline table
        return "{ " + ", ".join(f"{json.dumps(k)} = {toml_value(v)}" for k, v in value.items()) + " }"
    raise TypeError(f"no TOML form for {type(value).__name__}")
