"""The oracle's state is split by concern (sim/check/oracle_state.py), and each concern is
written by one module: rooms by oracle_rooms.py, mail by oracle_mail.py, leases by
oracle_leases.py, wake by oracle_wake.py. The others may read it. A write is an assignment
to ``o.<concern>.<field>`` (or an item or attribute under it), an augmented assignment, a
``del``, or a call of a mutating method on it; the rule is seen to fail on a module writing
another's concern."""

from __future__ import annotations

import ast
import dataclasses
from pathlib import Path

from sim.check import oracle_state

CHECK = Path(oracle_state.__file__).parent
OWNERS = {"rooms": "oracle_rooms", "mail": "oracle_mail", "lease": "oracle_leases", "wake": "oracle_wake"}
MUTATORS = {"append", "add", "discard", "pop", "setdefault", "sort", "update", "clear", "remove", "extend",
            "insert", "popitem"}


def _concern(node: ast.AST) -> str | None:
    """``o.<concern>`` at the root of an attribute/subscript chain, else None."""
    while isinstance(node, ast.Attribute | ast.Subscript):
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "o":
            return node.attr if node.attr in OWNERS else None
        node = node.value
    return None


def writes(source: str) -> set[str]:
    """The concerns a module's code writes (see the module's docstring)."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(source)):
        targets: list[ast.AST] = []
        if isinstance(node, ast.Assign):
            targets = node.targets
        elif isinstance(node, ast.AugAssign | ast.AnnAssign):
            targets = [node.target]
        elif isinstance(node, ast.Delete):
            targets = node.targets
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in MUTATORS:
            targets = [node.func.value]
        for target in targets:
            for part in ast.walk(target) if isinstance(target, ast.Tuple) else [target]:
                concern = _concern(part)
                if concern is not None and (part is not target or _concern(target) == concern):
                    found.add(concern)
    return found


def test_each_concern_is_written_by_its_own_module_alone() -> None:
    fields = {f.name for f in dataclasses.fields(oracle_state.Oracle)}
    assert set(OWNERS) <= fields
    written: dict[str, set[str]] = {}
    for path in sorted(CHECK.glob("oracle*.py")):
        for concern in writes(path.read_text()):
            written.setdefault(concern, set()).add(path.stem)
    assert written == {concern: {owner} for concern, owner in OWNERS.items()}


def test_a_module_writing_another_concern_is_seen() -> None:
    assert writes("def f(o):\n    o.mail.unread[sid].add(3)\n    x = o.rooms.sessions[sid]\n") == {"mail"}
    assert writes("def f(o):\n    o.lease.leases[p].pop(s, None)\n    o.wake.touches = {}\n") == {"lease", "wake"}
    assert writes("def f(o):\n    o.rooms.sessions[s].live = False\n    o.checked['x'] += 1\n") == {"rooms"}
    assert writes("def f(o):\n    n = len(o.mail.unread.get(s, ()))\n    o.fail('X', 'm', 1, 0.0)\n") == set()
