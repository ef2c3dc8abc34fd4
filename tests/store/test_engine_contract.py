"""Each engine has the shape the contract states (store/engine.py): every attribute and method
of ``Database`` and ``Tx``, methods with the contract's parameters, and the engine's name as
the location rule gives it (store/engines.py). A third engine passes these, the store tests
on its own ``engine`` (tests/store/conftest.py) and the schema parity test."""

from __future__ import annotations

import inspect
from typing import Any

import pytest

from agents_room.store import engine as contract
from agents_room.store import engines
from agents_room.store.postgres import database as postgres
from agents_room.store.sqlite import database as sqlite

IMPLEMENTATIONS = {"sqlite": sqlite, "postgresql": postgres}


def members(protocol: type) -> dict[str, Any]:
    """The contract's members: methods (by signature) and attributes (by annotation)."""
    found: dict[str, Any] = {name: inspect.signature(value) for name, value in vars(protocol).items()
                             if inspect.isfunction(value) and not name.startswith("_")}
    found.update({name: None for name in protocol.__annotations__})
    return found


def missing(implementation: type, protocol: type, instance_attributes: set[str]) -> list[str]:
    """What ``implementation`` lacks of ``protocol``, or has with other parameters."""
    out = []
    for name, signature in members(protocol).items():
        if not hasattr(implementation, name) and name not in instance_attributes:
            out.append(f"{implementation.__name__}.{name} is missing")
        elif signature is not None:
            mine = inspect.signature(getattr(implementation, name))
            if list(mine.parameters) != list(signature.parameters):
                out.append(f"{implementation.__name__}.{name}{mine} is not {name}{signature}")
    return out


@pytest.mark.parametrize("name", sorted(IMPLEMENTATIONS))
def test_each_engine_has_the_contracts_shape(name: str) -> None:
    module = IMPLEMENTATIONS[name]
    assert set(members(contract.Database)) >= {"read", "write", "mail_waiter", "health", "engine", "clock"}
    assert missing(module.Database, contract.Database, {"clock", "busy_timeout_s"}) == []
    assert missing(module.Tx, contract.Tx, {"now"}) == []
    assert module.Database.engine == name and name in engines.OPENERS


def test_a_shape_that_differs_is_named() -> None:
    class Partial:
        engine = "x"

        def read(self) -> None: ...

        def write(self, wait: float) -> None: ...

    lacking = missing(Partial, contract.Database, {"clock", "busy_timeout_s"})
    assert "Partial.mail_waiter is missing" in lacking and "Partial.health is missing" in lacking
    assert any(line.startswith("Partial.write(self, wait: 'float') -> 'None' is not write(self)") for line in lacking)
    assert not [line for line in lacking if ".read" in line or ".engine" in line]


def test_an_engine_whose_driver_is_not_installed_is_refused_in_words() -> None:
    """The opener's import fails for real (psycopg made unimportable in a fresh interpreter):
    one StoreError naming the location and what to install, no traceback, nothing opened."""
    import subprocess
    import sys

    code = ("import sys; sys.modules['psycopg'] = None\n"
            "from agents_room.store import Store, StoreError\n"
            "try:\n    Store.open('postgresql://agent:secret@198.18.0.1/room')\n"
            "except StoreError as exc:\n    print(exc.text)\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.stdout.strip() == (
        "postgresql://agent:***@198.18.0.1/room is a PostgreSQL store, and this installation has no PostgreSQL "
        "backend; install it with: pip install 'agents-room[postgres]'"), done.stderr
