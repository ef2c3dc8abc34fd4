"""docs/history.md against the code: every record field the agents write and every invariant
the checker (and the fault report) can name is documented, and nothing else is."""

from __future__ import annotations

import ast
import re
from pathlib import Path

from sim.check.checker import INVARIANTS
from sim.check.history import Writer

ROOT = Path(__file__).resolve().parents[3]
DOC = (ROOT / "docs" / "history.md").read_text()


def section(title: str) -> str:
    start = DOC.index(f"## {title}")
    end = DOC.find("\n## ", start + 1)
    return DOC[start:end if end >= 0 else None]


def extra_fields() -> set[str]:
    """Keys of the ``extra`` dicts sim/run/agent.py adds to records (drain phase, open-loop time, the think drawn)."""
    tree = ast.parse((ROOT / "sim" / "run" / "agent.py").read_text())
    keys: set[str] = set()
    for node in ast.walk(tree):
        dicts: list[ast.AST] = []
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "extra" for t in node.targets):
            dicts.append(node.value)
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "perform":
            dicts += node.args[1:]
        keys |= {k.value for d in dicts if isinstance(d, ast.Dict) for k in d.keys if isinstance(k, ast.Constant)}
    return keys


def test_the_record_fields_table_matches_what_is_written(tmp_path: Path) -> None:
    w = Writer(tmp_path, 0, "a00")
    written = set(w.write("invoke", "room_join", {}))
    w.close()
    documented = set(re.findall(r"^\| `(\w+)` \|", section("Records").split("### Result digests")[0], re.M))
    assert extra_fields() == {"phase", "intended", "think_ms"}
    assert documented == written | extra_fields()


def test_every_invariant_is_documented() -> None:
    documented = set(re.findall(r"^\s*\d+\. \*\*([a-z-]+)\*\*", section("Invariants the checker asserts"), re.M))
    assert documented == {*INVARIANTS, "faults"}
