"""The edit guard's read-only look (agents_room/harnesses/editguard.py): the common case
answered without a write and without importing the store package. An edit of files the
session holds exclusively, renewed less than :data:`RENEWED_WITHIN_S` ago, is allowed; a read
of bytes that are the session's baseline already records nothing. Everything else goes to the
store's own rule (store/editclaim.py).

Stdlib (``_sqlite3``, ``os``) and the store's path and location rules (loaded bare,
harnesses/hook_store.py) only: this runs on every edit of an agent's own files.
"""

from __future__ import annotations

import os
import sys

from .hook_store import store_modules

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

# The guard's wait for the store's write lock, then it lets the edit through.
BUSY_TIMEOUT_S = 2.0
# An edit of files the session already holds, renewed less than this long ago, is allowed on
# a read-only look (no write, no store import: the common case, an agent editing its own
# files); the next edit after it renews the lease (store/editclaim.py's EDIT_TTL_S).
RENEWED_WITHIN_S = 60.0


# Live, exclusive, granted or renewed (``expires_at - ttl_s``) within RENEWED_WITHIN_S.
_HELD = ("SELECT count(*) FROM leases WHERE session_id = ? AND mode = 'exclusive' AND expires_at > ? "
         "AND expires_at - ttl_s > ? AND path IN ({marks})")


def held_already(db: str | None, cwd: str, files: list[str], keys: list[str], pids: list[int]) -> bool:
    """Does the session of these keys (else harness pids: the store's order, store/news.py)
    hold a live exclusive lease of every file, renewed within :data:`RENEWED_WITHIN_S`? Then no
    other session can hold a lease covering any of them (its claim would have been denied, as
    would a claim of a directory above them), nor can one have drifted CRITICAL since (that
    needs another holder): the edit is allowed without a write. One read-only look at a SQLite
    store with the C module alone, by the store's own rules of where it is and what a path is
    (store/engines.py, store/paths.py); False (the whole rule) for anything else."""
    return _look(db, cwd, files, keys, pids, read=False)


def read_already(db: str | None, cwd: str, files: list[str], keys: list[str], pids: list[int]) -> bool:
    """Is every file's content now the session's read baseline already? Then the read changes
    nothing worth a write: the baseline stays the earlier read of the same bytes (which only
    widens what drift_check looks back over). A read-only look, as :func:`held_already`."""
    return _look(db, cwd, files, keys, pids, read=True)


def _look(db: str | None, cwd: str, files: list[str], keys: list[str], pids: list[int], *, read: bool) -> bool:
    engines, paths, digest = store_modules("engines", "paths", "digest")
    engine, path, _ = engines.locate(db, "--db") if db else engines.locate()
    if engine != engines.SQLITE or not os.path.exists(path) or not (keys or pids):
        return False
    targets = list(dict.fromkeys(paths.canonical(paths.absolute(os.path.expanduser(f), cwd))
                                 for f in files))
    uri = "file:" + path.replace("%", "%25").replace("?", "%3f").replace("#", "%23") + "?mode=rw"
    conn = _sqlite_module().connect(uri, uri=True, timeout=BUSY_TIMEOUT_S)
    try:
        session = None
        for key in keys:
            session = conn.execute("SELECT id FROM sessions WHERE harness_key = ? AND left_at IS NULL "
                                   "ORDER BY created_at DESC LIMIT 1", (key,)).fetchone()
            if session:
                break
        for pid in pids if session is None else ():
            session = conn.execute("SELECT id FROM sessions WHERE pid = ? AND left_at IS NULL "
                                   "ORDER BY created_at DESC LIMIT 1", (pid,)).fetchone()
            if session:
                break
        if session is None:
            return False
        marks = ",".join("?" * len(targets))
        if read:
            from stat import S_ISREG

            seen = dict(conn.execute(f"SELECT path, hash FROM reads WHERE session_id = ? AND path IN ({marks})",
                                     (session[0], *targets)).fetchall())
            for target in targets:
                try:  # as store/reads.py hashes: never waiting on a FIFO, regular files only
                    with open(os.open(target, os.O_RDONLY | os.O_NONBLOCK), "rb") as fh:
                        if not S_ISREG(os.fstat(fh.fileno()).st_mode) or \
                                seen.get(target) != digest.sha256_hex(fh):
                            return False
                except OSError:
                    return False
            return True
        import time

        now = time.time()
        found = conn.execute(_HELD.format(marks=marks), (session[0], now, now - RENEWED_WITHIN_S, *targets)).fetchone()
        return found[0] == len(targets)
    finally:
        conn.close()


def _sqlite_module() -> Any:
    """SQLite's C module, imported without ``functools``. ``_sqlite3`` takes
    ``functools.lru_cache`` for its statement cache when it is first imported, and ``functools``
    (with ``collections``, ``keyword``, ``operator``, ``reprlib``) was a third of the read-only
    look's imports. The cache is C underneath (``_functools._lru_cache_wrapper``, what
    ``lru_cache`` wraps), so a stand-in module gives ``_sqlite3`` exactly that for the import,
    and is forgotten after it: a later ``import functools`` in the process is the real one."""
    if "_sqlite3" in sys.modules or "functools" in sys.modules:
        import _sqlite3

        return _sqlite3
    try:
        import _functools
    except ImportError:  # an interpreter without the C accelerator: the real module
        import _sqlite3

        return _sqlite3
    stand_in = type(sys)("functools")

    def lru_cache(maxsize: int | None = 128, typed: bool = False) -> Any:
        return lambda function: _functools._lru_cache_wrapper(function, maxsize, typed, tuple)

    stand_in.lru_cache = lru_cache  # type: ignore[attr-defined]
    sys.modules["functools"] = stand_in
    try:
        import _sqlite3
    finally:
        if sys.modules.get("functools") is stand_in:
            del sys.modules["functools"]
    return _sqlite3
