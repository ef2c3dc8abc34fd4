"""Quiet markers: a file per harness process that says "nothing for this agent's hook to do",
so the hook line a harness runs on every tool call exits in its shell without starting Python
(agents_room/harnesses/hook_line.py reads it; agents_room/harnesses/quiet.py keeps it).

``<the SQLite store's folder>/quiet/<harness pid>``, holding the keeping server's pid and the
raw ``$AGENTS_ROOM_DB`` it serves, one a line. The store's part is the two rules that make a
marker never hide news from a hook that starts after ``msg_send`` returned:

- :func:`hold` writes the marker only inside a write transaction that found no news for the
  sessions it covers: a sender's transaction commits either before it (the news is seen and
  no marker is written) or after it;
- a transaction that makes news for a session (a message to it: store/messages.py; a wake
  offer: store/wake.py), once committed, removes the markers of those sessions' harness
  processes (:func:`unlink`, the SQLite engine's answer to ``notify_mail``; PostgreSQL
  notifies its waiters instead, and keeps no marker).

So a marker is present only while a look under the write lock found nothing and no news has
committed since. Stdlib only.
"""

from __future__ import annotations

import os

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable, Iterable
    from typing import Any

FOLDER = "quiet"

# The news of sessions by harness key or harness pid: the hook's own probe's rule
# (agents_room/harnesses/hook.py), over every session it might answer for.
_SESSIONS = "SELECT id FROM sessions WHERE left_at IS NULL AND (harness_key IN ({keys}) OR pid IN ({pids}))"
_NEWS = "SELECT 1 FROM deliveries d WHERE d.recipient IN ({ids}) AND {news} LIMIT 1"


def folder(store_path: str) -> str:
    """The markers' folder beside the SQLite file ``store_path``."""
    return os.path.join(os.path.dirname(store_path), FOLDER)


def news(tx: Any, keys: list[str], pids: list[int]) -> bool:
    """Might a live session with one of these harness keys or pids have something for its
    hook (store/delivery.py's rule)?"""
    from .delivery import news_sql

    if not keys and not pids:
        return False
    sql = _SESSIONS.format(keys=",".join("?" * len(keys)) or "NULL", pids=",".join("?" * len(pids)) or "NULL")
    ids = [r[0] for r in tx.all(sql, (*keys, *pids))]
    if not ids:
        return False
    return tx.one(_NEWS.format(ids=",".join("?" * len(ids)), news=news_sql()), tuple(ids)) is not None


def hold(db: Any, keys: list[str], pids: list[int], mark: Callable[[], None]) -> bool:
    """Under the write lock: when no session of these keys or pids has news, ``mark()`` (write
    the marker) and True; else False, nothing written."""
    with db.write() as tx:
        if news(tx, keys, pids):
            return False
        mark()
        return True


def unlink(store_path: str, pids: Iterable[int]) -> None:
    """Remove the markers of these harness pids (after the commit of mail to them), in the
    folder of the store file's real path (a server keeps a marker only there)."""
    where = folder(os.path.realpath(store_path))
    for pid in pids:
        try:
            os.unlink(os.path.join(where, str(int(pid))))
        except (OSError, ValueError):
            pass
