"""The commit guard's rule, on plain rows: who is committing, and which live exclusive leases
of other sessions cover the paths a commit stages.

A staged path is blocked by a lease that covers it (store/coverage.py: the path itself, or a
directory lease of one of its ancestors, ``covering_paths``), that is ``exclusive``, that has not expired at the
transaction's time, and whose holder is not one of the committer's own sessions. Shared
leases never block a commit: a shared holder announced that others may write too.

The committer is named by a harness key in the commit's environment; failing that, it is
the one agent whose harness process is among the hook's ancestors. A process that hosts
several agents' MCP clients (an orchestrator, a test harness) is the recorded harness
process of each, and nothing in the commit says which of them made it: then the commit is
nobody's, so every agent's exclusive lease blocks it. Guessing one would let that agent's
lease wave through a commit another agent made.

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
    from collections.abc import Callable

    from .engine import Tx

# One staged path a lease blocks: the path, the lease's own path (the path itself, or a
# directory over it), and the holder.
Blocker = namedtuple("Blocker", "path lease_path session_id label harness expires_at")
# One session the committing process may belong to. ``keyed``: it joined with a harness key,
# so a commit can name it (a session without one can only be the committer by ancestry).
Committer = namedtuple("Committer", "session_id label harness keyed")
# Who commits: ``mine``, the committer's sessions (empty: the commit is nobody's), and
# ``candidates``, the sessions of the several agents found among the ancestors when none
# could be chosen (empty otherwise).
Committers = namedtuple("Committers", "mine candidates")

# Parameters per statement: well under SQLite's oldest limit (999) and PostgreSQL's (65535).
CHUNK = 500


def _marks(n: int) -> str:
    return ",".join("?" * n) or "NULL"


def committers(tx: Tx, keys: list[str], pids: list[int], host: str | None,
               lineage: Callable[[int], list[int]] | None = None) -> Committers:
    """Who commits. The live sessions of the first of ``keys`` (the environment's harness
    keys, the most explicit first) that names any; else those whose recorded harness pid is
    one of ``pids`` (the hook's ancestors) when the session runs on ``host`` (a pid means
    nothing on another host; None: the store has one host, a SQLite file), if they are one
    agent. An agent is its harness key, or the session itself when it joined without one:
    two keyless sessions of one process cannot be told apart from two agents, and taking
    them for one would be the unsafe guess. Several agents: nobody commits, and they are
    the candidates. One statement either way (the hook's cost).

    ``lineage``: a pid's ancestors on this host (its parent first). With it, a process found
    hosting an agent also hosts every session whose recorded process descends from it: a
    server started through a launcher that stays its parent (``npx``, ``uv run``, a shell
    wrapper) records the launcher, which is no ancestor of the commit, though the agent is
    the host's as much as the one it runs directly. Those sessions are candidates too, so
    the commit is the one agent's only when no other is hosted there. It only ever adds
    candidates: nobody commits more often, never less. A second statement (the host's live
    sessions with a pid) and a walk up each one's ancestry, only when ancestry found one."""
    if not keys and not pids:
        return Committers([], [])
    here = "" if host is None else " AND (host = ? OR host IS NULL)"
    rows = tx.all(
        f"SELECT id, label, harness, harness_key, pid, host FROM sessions WHERE left_at IS NULL AND (harness_key IN "
        f"({_marks(len(keys))}) OR (pid IN ({_marks(len(pids))}){here})) ORDER BY created_at",
        (*keys, *pids, *(() if host is None else (host,))),
    )
    for key in keys:
        named = [Committer(sid, label, harness, True) for sid, label, harness, k, _pid, _at in rows if k == key]
        if named:
            return Committers(named, [])
    ours = set(pids)
    hosting = [row for row in rows if row[4] in ours and (host is None or row[5] in (host, None))]
    found = [(sid, label, harness, k) for sid, label, harness, k, _pid, _at in hosting]
    if found and lineage is not None:
        found += _hosted_beneath(tx, {row[4] for row in hosting}, {row[0] for row in hosting}, host, lineage)
    candidates = [Committer(sid, label, harness, k is not None) for sid, label, harness, k in found]
    if len({k or sid for sid, _label, _harness, k in found}) == 1:
        return Committers(candidates, [])
    return Committers([], candidates)


def _hosted_beneath(tx: Tx, hosts: set[int], known: set[str], host: str | None,
                    lineage: Callable[[int], list[int]]) -> list[tuple]:
    """The live sessions (not in ``known``) of this host whose recorded process has one of
    ``hosts`` among its ancestors: ``(id, label, harness, harness_key)`` each."""
    here = "" if host is None else " AND (host = ? OR host IS NULL)"
    rows = tx.all(f"SELECT id, label, harness, harness_key, pid FROM sessions WHERE left_at IS NULL AND pid IS NOT NULL"
                  f"{here} ORDER BY created_at", () if host is None else (host,))
    return [(sid, label, harness, k) for sid, label, harness, k, pid in rows
            if sid not in known and pid not in hosts and hosts.intersection(lineage(pid))]


def _storable(path: str) -> bool:
    """Whether a lease could have this path: leases are text, and a name that is not UTF-8
    (kept by ``os.fsdecode`` as surrogates) cannot be one, though its folders can."""
    try:
        path.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def blockers(tx: Tx, paths: list[str], own: set[str], identify: Callable[[str], list[str]] | None = None,
             same: Callable[..., bool] | None = None, *, by_name: bool = True) -> list[Blocker]:
    """Every (staged path, lease) where a live exclusive lease of a session not in ``own``
    covers one of ``paths`` (absolute), sorted by path. Empty: the commit may go ahead.
    ``identify``: store/paths.py's identities: a lease of a staged file, or of a folder above
    it, under another name (a hard link, a bind mount, a folder renamed under the lease)
    blocks it too, when ``same`` (store/paths.py's) finds its path leads to that identity and
    the staged path to it, now (from the holder session's view: a container's own mount of the
    checkout by its name in its folder); one more ``IN`` list on each identity index (``by_name``: its
    file's name in its folder too, a store of schema 6 or later)."""
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
    if identify is not None and same is not None:
        found += _by_identity(tx, paths, own, identify, same, {(b.path, b.lease_path, b.session_id) for b in found},
                              by_name)
    return sorted(found, key=lambda b: (b.path, b.lease_path, b.session_id))


def _by_identity(tx: Tx, paths: list[str], own: set[str], identify: Callable[[str], list[str]],
                 same: Callable[..., bool], seen: set[tuple[str, str, str]],
                 by_name: bool) -> list[Blocker]:
    idents: dict[str, list[str]] = {}  # an identity -> the staged paths it is of (or above)
    for path in paths:
        for ident in identify(path):
            if _storable(ident):  # a name not created, not UTF-8: no lease has it
                idents.setdefault(ident, []).append(path)
    found = []
    names = list(idents)
    for start in range(0, len(names), CHUNK):
        chunk = names[start:start + CHUNK]
        # (a lease records its file's name in its folder too, from schema 6: store/paths.py's recorded)
        # (only the names among the identities: a recorded name is never a folder's own identity)
        names = [i for i in chunk if "/" in i] if by_name else []
        named = f" OR l.name_ident IN ({_marks(len(names))})" if names else ""
        for ident, name, seen_from, lease_path, sid, label, harness, expires_at in tx.all(
            f"SELECT l.ident, {'l.name_ident, s.view' if by_name else 'NULL, NULL'}, l.path, l.session_id, s.label, "
            f"s.harness, l.expires_at FROM leases l JOIN sessions s ON s.id = l.session_id "
            f"WHERE (l.ident IN ({_marks(len(chunk))}){named}) AND l.mode = 'exclusive' AND l.expires_at > ?",
            (*chunk, *names, tx.now),
        ):
            if sid in own:
                continue
            for recorded in dict.fromkeys(i for i in (ident, name) if i in idents):
                found += [Blocker(p, lease_path, sid, label, harness, expires_at) for p in idents[recorded]
                          if (p, lease_path, sid) not in seen and same(lease_path, recorded, p, None, seen_from)]
    return list(dict.fromkeys(found))
