"""The store's modules the hook runs on, loaded without the store's package.

The hook runs on every harness event and must stay cheap, yet it follows the store's own
rules rather than copies of them: where the store is and which engine it is
(``store.engines``), what counts as news for a session (``store.delivery``), and, when there
is news, the hook's rules on rows (``store.news``) over the SQLite database
(``store.sqlite.opening``). The package's ``__init__`` imports every module of the store
(the dashboard's overview, leases, rooms, reads, ...) and their records (``dataclasses``,
with ``inspect``); that import was most of the hook's time. So the modules are loaded under a
bare ``agents_room.store`` (its folder only); then it and every module loaded under it are
forgotten (the caller keeps what it uses), so a later ``import agents_room.store`` loads the
real package whole, with nothing half-made. In a process that has the store imported
already, nothing changes.

Stdlib only, and only ``os`` and ``sys``: the hook's quiet path imports this module.
"""

from __future__ import annotations

import os
import sys

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

PACKAGE = "agents_room.store"


def store_modules(*names: str) -> list[Any]:
    """The modules ``agents_room.store.<name>`` for each name, in order (see the module's
    docstring). None of them may import the package itself."""
    if PACKAGE in sys.modules:
        return [__import__(f"{PACKAGE}.{name}", fromlist=["_"]) for name in names]
    bare = type(sys)(PACKAGE)  # types.ModuleType, without importing types
    bare.__path__ = [os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "store")]
    bare.__package__ = PACKAGE
    before = set(sys.modules)
    sys.modules[PACKAGE] = bare
    try:
        return [__import__(f"{PACKAGE}.{name}", fromlist=["_"]) for name in names]
    finally:  # forget them all: a later import of the store loads it whole, on its own
        for name in set(sys.modules) - before:
            if name == PACKAGE or name.startswith(PACKAGE + "."):
                del sys.modules[name]
