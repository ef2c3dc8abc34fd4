"""Issue 19's upgrade-safety target, checked by ``sim bench`` on a store of its own: an
admission side file of another layout version (servers of an older agents-room still
running) must not fail the open. The store must open beside it, say why fair admission is
off in this process (a ``RuntimeWarning``), write through SQLite's busy handler, and leave
the old servers' file as it was."""

from __future__ import annotations

import struct
import warnings
from pathlib import Path
from typing import Any


def check(folder: Path) -> dict[str, Any]:
    """``{"met": bool, "note": str}``: what happened when the store opened beside a side file
    whose layout version word says 2."""
    from agents_room.store import Store

    folder.mkdir(parents=True, exist_ok=True)
    db = folder / "room.db"
    Store.open(db).close()
    side = Path(f"{db}-admission")
    words = bytearray(side.read_bytes())
    struct.pack_into("I", words, 4, 2)  # the layout version word, as an older agents-room wrote it
    side.write_bytes(bytes(words))
    try:
        with warnings.catch_warnings(record=True) as said:
            warnings.simplefilter("always")
            store = Store.open(db)
        with store:
            claimed = store.lease_claim(store.room_join(cwd=str(folder), pid=None).session_id, "a.py").ok
            admission = store.db._admission
            off = admission is not None and not admission.enabled
    except Exception as exc:  # noqa: BLE001 (the target's answer: the open or the write failed)
        return {"met": False, "note": f"{type(exc).__name__}: {str(exc)[:120]}"}
    warned = any(issubclass(w.category, RuntimeWarning) and "another layout" in str(w.message) for w in said)
    untouched = side.read_bytes() == bytes(words)
    met = claimed and off and warned and untouched
    note = ("opened, warned, claimed through the busy handler, the old file untouched" if met else
            f"claimed {claimed}, admission off {off}, warned {warned}, old file untouched {untouched}")
    return {"met": met, "note": note}
