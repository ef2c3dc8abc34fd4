"""The commit guard's rule, on plain rows: who is committing, and which live exclusive leases
of other sessions cover the paths a commit stages.

A staged path is blocked by a lease that covers it (store/coverage.py: the path itself, or a
directory lease of one of its ancestors, ``covering_paths``), that is ``exclusive``, that has not expired at the
transaction's time, and whose holder is not one of the committer's own sessions. Shared
leases never block a commit: a shared holder announced that others may write too.

The lookup is an ``IN`` list on the leases' path index, one entry per path and ancestor, so
its cost follows the commit's size and not the number of live leases.

Like :mod:`.news`, this module defines no dataclass: the guard runs it from a git hook on a
bare database (agents_room/guard.py), where building the store's records costs more than the
queries. Both engines run it through their ``Tx``.
"""

from __future__ import annotations

from collections import namedtuple

from .coverage import ancestors

TYPE_CHECKING = False
if TYPE_CHECKING:
    from .engine import Tx

# One staged path a lease blocks: the path, the lease's own path (the path itself, or a
# directory over it), and the holder.
Blocker = namedtuple("Blocker", "path lease_path session_id label harness expires_at")
# One session the committing process belongs to.
Committer = namedtuple("Committer", "session_id label harness")

# Parameters per statement: well under SQLite's oldest limit (999) and PostgreSQL's (65535).
CHUNK = 500


def _marks(n: int) -> str:
    return ",".join("?" * n) or "NULL"


def committers(tx: Tx, keys: list[str], pids: list[int], host: str | None) -> list[Committer]:
    """The live sessions the committing process belongs to: those whose harness key is one of
    ``keys`` (the environment's), or whose recorded harness pid is one of ``pids`` (the hook's
    ancestors) when the session runs on ``host`` (a pid means nothing on another host; None:
    the store has one host, a SQLite file). Several when an agent joined more than once."""
    if not keys and not pids:
        return []
    here = "" if host is None else " AND (host = ? OR host IS NULL)"
    rows = tx.all(
        f"SELECT id, label, harness FROM sessions WHERE left_at IS NULL AND (harness_key IN ({_marks(len(keys))}) "
        f"OR (pid IN ({_marks(len(pids))}){here})) ORDER BY created_at",
        (*keys, *pids, *(() if host is None else (host,))),
    )
    return [Committer(*r) for r in rows]


def _storable(path: str) -> bool:
    """Whether a lease could have this path: leases are text, and a name that is not UTF-8
    (kept by ``os.fsdecode`` as surrogates) cannot be one, though its folders can."""
    try:
        path.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def blockers(tx: Tx, paths: list[str], own: set[str]) -> list[Blocker]:
    """Every (staged path, lease) where a live exclusive lease of a session not in ``own``
    covers one of ``paths`` (absolute), sorted by path. Empty: the commit may go ahead."""
    wanted: dict[str, list[str]] = {}  # lease path -> the staged paths it would cover
    above: dict[str, list[str]] = {}  # a folder -> the lease paths over what it holds
    for path in paths:
        # A commit's paths share their folders: the folders' lease paths are worked out once.
        folder = path[:path.rfind("/") + 1]
        over = above.get(folder)
        if over is None:
            over = above[folder] = [p for p in ancestors(path) if _storable(p)]
        for lease_path in (*over, path) if _storable(path) else over:
            wanted.setdefault(lease_path, []).append(path)
    found = []
    names = list(wanted)
    for start in range(0, len(names), CHUNK):
        chunk = names[start:start + CHUNK]
        for lease_path, sid, label, harness, expires_at in tx.all(
            "SELECT l.path, l.session_id, s.label, s.harness, l.expires_at FROM leases l "
            f"JOIN sessions s ON s.id = l.session_id WHERE l.path IN ({_marks(len(chunk))}) "
            "AND l.mode = 'exclusive' AND l.expires_at > ?",
            (*chunk, tx.now),
        ):
            if sid not in own:
                found += [Blocker(p, lease_path, sid, label, harness, expires_at) for p in wanted[lease_path]]
    return sorted(found, key=lambda b: (b.path, b.lease_path, b.session_id))
