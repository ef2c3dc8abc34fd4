"""The quiet marker a stdio ``agents-room serve`` keeps for its harness, so the hook line the
harness runs on every tool call and prompt exits in its shell when there is nothing to say
(agents_room/harnesses/hook_line.py), without starting Python.

The server is already beside its harness for the whole session, and is its harness's child
as the hook's shell is: the marker is named by that pid (``quiet/<harness pid>`` beside the
SQLite store, store/quiet.py) and holds this process's pid, the raw ``$AGENTS_ROOM_DB`` it
serves and its host id. A thread waits on the store's mail waiter (the newest event's seq,
polled) and, when something changed while the marker is missing, looks under the write lock:
nothing for
any session of this harness (its harness key, its pid and the three processes above it, as
the hook looks) means the marker is written; news means it stays away. Whatever makes news
for a session removes its marker at commit (a message to it, a wake offer: store/quiet.py),
so news is never hidden, and the look here only puts the marker back once the hook has told
it. While the marker is there, a busy store costs the keeper only its seq polls.

Where the hook cannot trust a marker, none is written, and the hook runs Python as before:
a store given by ``--db`` (the hook reads ``$AGENTS_ROOM_DB``), a PostgreSQL store, a value
the hook line does not read the same way (relative, a URL, a newline), a store not yet
reachable at start. A server that dies leaves a marker whose pid is gone, which the hook
line checks (``/proc/<pid>``); a server that stops removes its own.
"""

from __future__ import annotations

import os
import sqlite3
import sys
import threading
import time
from collections.abc import Mapping

from ..store import Store
from ..store import quiet as rules

# How often the seq is looked at (the mail waiter's poll): how soon after the hook told the
# news the marker is back (until then the hooks run Python); not how soon news is seen, which
# removes the marker itself. About 1 s of CPU an idle hour (docs/performance.md). And a look
# for real at least this often even when the seq did not move.
POLL_S = 1.0
LOOK_S = 30.0
# The processes above the harness a hook also looks at (agents_room/harnesses/hook.py's
# ANCESTOR_DEPTH, counted from the hook's parent, the harness).
ANCESTORS = 4


def marker_path(env: Mapping[str, str], store_path: str, harness_pid: int | None) -> str | None:
    """Where the hook line looks for this server's marker, when it reads ``env``'s
    ``$AGENTS_ROOM_DB`` as naming ``store_path`` by the same text, and that is the file's
    real path (no ``..``, no link on the way); else None (no marker)."""
    raw = env.get("AGENTS_ROOM_DB", "")
    home = env.get("HOME", "")
    if not harness_pid or harness_pid <= 1 or "\n" in raw or not home.startswith("/"):
        return None
    if raw == "":
        named = f"{home}/.agents-room/room.db"
    elif raw.startswith("~/"):
        named = f"{home}/{raw[2:]}"
    elif raw.startswith("/"):
        named = raw
    else:
        return None
    # The text the line builds, the store's own path, and the file's real path, all one: a
    # sender removes the marker in the real path's folder (store/quiet.py).
    if named != store_path or os.path.realpath(store_path) != store_path:
        return None
    return f"{named.rpartition('/')[0]}/{rules.FOLDER}/{harness_pid}"


def ancestors(pid: int, depth: int = ANCESTORS) -> list[int]:
    """``pid`` and the processes above it, nearest first (the hook's own rule)."""
    from .hook import lineage

    return lineage(pid, depth)


class Keeper:
    """The thread that keeps one marker (see the module's docstring)."""

    def __init__(self, store: Store, path: str, raw: str, host: str, keys: list[str], pids: list[int], *,
                 poll_s: float = POLL_S) -> None:
        self.store, self.path, self.keys, self.pids, self.poll_s = store, path, keys, pids, poll_s
        self.text = f"{os.getpid()}\n{raw}\n{host}\n"
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="quiet-marker", daemon=True)

    def start(self) -> Keeper:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=5)
        self.remove()

    def mark(self) -> None:
        """Write the marker whole (a reader sees it all or not at all)."""
        folder = os.path.dirname(self.path)
        os.makedirs(folder, mode=0o700, exist_ok=True)
        tmp = f"{self.path}.{os.getpid()}.tmp"
        with open(tmp, "w") as f:
            f.write(self.text)
        os.replace(tmp, self.path)

    def remove(self) -> None:
        """Remove the marker, if it is this process's."""
        try:
            with open(self.path) as f:
                if f.read() != self.text:
                    return
            os.unlink(self.path)
        except OSError:
            pass

    def look(self) -> bool:
        """One look: the marker written (True) or removed (False)."""
        if rules.hold(self.store.db, self.keys, self.pids, self.mark):
            return True
        self.remove()
        return False

    def _run(self) -> None:
        waiter = None
        last = float("-inf")
        while not self._stop.is_set():
            try:
                waiter = waiter or self.store.mail_waiter(self.poll_s)
                told = waiter.wait(self.poll_s)
                # While the marker is there, nothing that makes news can have happened without
                # removing it (store/quiet.py): only a missing marker is looked for again.
                if (told and not os.path.exists(self.path)) or time.monotonic() - last >= LOOK_S:
                    last = time.monotonic()
                    self.look()
            except sqlite3.ProgrammingError:  # the server closed its store: it is stopping
                self.remove()
                break
            except OSError as exc:  # the folder cannot hold a marker: the hooks run Python, as before
                self.remove()
                print(f"agents-room: no quiet marker: {exc}".splitlines()[0], file=sys.stderr)
                break
            except Exception as exc:  # noqa: BLE001 (the marker goes; the hooks run Python meanwhile)
                self.remove()
                print(f"agents-room: quiet marker: {exc}".splitlines()[0], file=sys.stderr)
                self._stop.wait(self.poll_s)
        if waiter is not None:
            waiter.close()


def keeper(store: Store, identity: object, env: Mapping[str, str]) -> Keeper | None:
    """The running keeper of a stdio server whose hooks can read its marker, else None."""
    from ..store.engines import SQLITE

    if not isinstance(store, Store):  # not reachable at start (cli.open_store_or_wait): no marker
        return None
    db = store.db
    if getattr(db, "engine", None) != SQLITE:
        return None
    pid = getattr(identity, "pid", None)
    path = marker_path(env, str(db.path), pid)
    if path is None:
        return None
    from ..store import StoreError
    from ..store.hosts import host_id

    try:
        host = host_id(dict(env))
    except StoreError:
        return None
    key = getattr(identity, "harness_key", None)
    return Keeper(store, path, env.get("AGENTS_ROOM_DB", ""), host, [key] if key else [], ancestors(pid)).start()
