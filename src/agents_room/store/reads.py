"""note_read and drift_check: did a file change under me since I read it, and did someone
else hold a lease on it meanwhile?"""

from __future__ import annotations

import os
import stat
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

from . import coverage, paths
from .clock import iso
from .errors import InvalidArgument
from .sessions import Caller
from .engine import Tx

Severity = Literal["SAFE", "MINOR", "CRITICAL"]


@dataclass(frozen=True)
class Drift:
    path: str
    severity: Severity
    changed: bool
    holder: str | None  # another session that held a lease on the path since the read
    since: float | None  # when the baseline was read
    message: str
    baseline: bool = True  # False: note_read was never called for this path (SAFE says nothing then)


# Folders that are the system's, never a repository's: a session whose folder is one of these
# (or beneath one, outside any git work tree) reads nothing through it.
_SYSTEM = ("/proc", "/sys", "/dev", "/etc", "/boot", "/run")


def repository(cwd: str) -> str | None:
    """The folder a session at ``cwd`` may read files of: the git work tree holding it, else
    ``cwd`` itself; None when that is the whole file system or a system folder."""
    from .rooms import git_toplevel  # here: the hook's news path imports this module, never this function

    top = paths.canonical(git_toplevel(cwd) or cwd)
    if top == os.sep or any(top == f or top.startswith(f + os.sep) for f in _SYSTEM):
        return None
    return top


def within_repository(path: str, cwd: str, others: Callable[[], list[str]]) -> None:
    """Refuse (``InvalidArgument``) a ``path`` (canonical) outside the session's repository
    (:func:`repository`) and outside those of the live sessions sharing a room with it
    (``others``: their folders, asked for only when needed), which a shared room lets it
    coordinate with. note_read and drift_check hash what the server can read, and over
    ``serve --http`` the caller is anyone with the token: without this, a guess of any
    file's contents (``/etc/shadow`` as root, ``/proc/self/environ``) could be confirmed."""
    def inside(top: str | None) -> bool:
        return top is not None and (path == top or path.startswith(top.rstrip(os.sep) + os.sep))

    mine = repository(cwd)
    if inside(mine) or any(inside(repository(c)) for c in dict.fromkeys(others())):
        return
    where = f"this session's repository ({mine})" if mine else f"any repository (the session's folder {cwd} is none)"
    raise InvalidArgument("path", f"{path} is outside {where} and those of the sessions sharing a room with it; "
                          "note_read and drift_check read only files of those repositories")


def file_hash(path: str) -> str | None:
    """SHA-256 of the file's bytes now; ``None`` if it does not exist. Raises
    ``InvalidArgument`` for something that is not a readable regular file."""
    from .digest import sha256_hex  # here: the hook's news path imports this module, never this function

    try:
        # O_NONBLOCK: opening a FIFO would otherwise wait for a writer, for ever (it is then
        # refused below, as a device is); on a regular file the flag changes nothing.
        with open(os.open(path, os.O_RDONLY | os.O_NONBLOCK), "rb") as fh:
            if not stat.S_ISREG(os.fstat(fh.fileno()).st_mode):
                raise InvalidArgument("path", f"{path} is not a regular file")
            return sha256_hex(fh)
    except FileNotFoundError:
        return None
    except IsADirectoryError:
        raise InvalidArgument("path", f"{path} is a directory") from None
    except PermissionError:
        raise InvalidArgument("path", f"{path} cannot be read (permission denied)") from None
    except OSError as exc:
        raise InvalidArgument("path", f"{path} cannot be read ({exc.strerror})") from None


def _marks(values: list[str]) -> str:
    return ", ".join("?" * len(values))


def note_read(tx: Tx, session: Caller, path: str, digest: str, idents: tuple[str, ...] = ()) -> None:
    """Record ``digest`` as what ``session`` saw of ``path`` now, and whether another
    session held a lease covering it (of the file, or of a directory above it) at that moment,
    under any name of its file (``idents``: store/paths.py's identities of ``path``; a lease
    taken under a folder's former name, a bind mount's other name or a hard link's)."""
    cover = coverage.covering_paths(path)
    other = tx.scalar(
        f"SELECT session_id FROM leases WHERE path IN ({_marks(cover)}) AND session_id <> ? AND expires_at > ? "
        "ORDER BY token LIMIT 1",
        (*cover, session.id, tx.now),
    ) or _held_elsewhere(tx, session, path, idents)
    seq = tx.event("note_read", session.id, path, hash=digest)
    tx.execute(
        "INSERT INTO reads (session_id, path, hash, read_at, read_seq, held_by_other) VALUES (?, ?, ?, ?, ?, ?) "
        "ON CONFLICT (session_id, path) DO UPDATE SET hash = excluded.hash, read_at = excluded.read_at, "
        "read_seq = excluded.read_seq, held_by_other = excluded.held_by_other",
        (session.id, path, digest, tx.now, seq, other),
    )


def _held_elsewhere(tx: Tx, session: Caller, path: str, idents: tuple[str, ...]) -> str | None:
    """Another session whose live lease is of ``path``'s file, or of a folder above it, under
    another name (store/leases.py's lookup by identity, whose paths do not cover ``path``: the
    lookups by path answer for those), the oldest grant first; None when there is none."""
    if not idents:
        return None
    from .leases import _by_identity  # here: the hook's news path imports this module, never this function

    held = [(token, sid) for _path, sid, _label, _mode, token, *_ in _by_identity(tx, path, idents) if sid != session.id]
    return min(held)[1] if held else None


def _former(tx: Tx, session: Caller, path: str, spelled: str | None) -> str | None:
    """The stored path of ``session``'s baseline of ``path`` noted before paths were canonical:
    under the caller's spelling, or under another spelling of the same base name that names
    the same file on this host (where the session's spelling was made). Looked for only once
    the canonical path missed; None: there is none."""
    base = path[path.rfind("/") + 1:]
    own = [r[0] for r in tx.all("SELECT path FROM reads WHERE session_id = ? AND path <> ?", (session.id, path))]
    if spelled in own:
        return spelled
    return next((p for p in own if p.endswith("/" + base) and paths.canonical(p) == path), None)


def _granted_under_another_name(tx: Tx, session: Caller, path: str, read_seq: int, cover: list[str]) -> str | None:
    """Another session granted or renewed a lease since the read under another name of
    ``path``'s file now (a bind mount, a hard link): the lease events since the read (one range
    of the events' seq; they hold no identity) under another path, each distinct path looked
    at once, as the kernel sees it now (its own identity, store/paths.py's identities, among
    ``path``'s: the file, or a folder above it). Only for a changed file no lease by its name held."""
    mine: set[str] | None = None
    seen = set(cover)
    for sid, other in tx.all("SELECT session_id, path FROM events WHERE seq > ? AND session_id <> ? "
                             "AND kind IN ('lease_grant', 'lease_renew') ORDER BY seq", (read_seq, session.id)):
        if other is None or other in seen:
            continue
        seen.add(other)
        mine = set(paths.identities(path)) if mine is None else mine
        own = paths.identities(other, own=True)
        if own and own[0] in mine:
            return sid
    return None


def drift_check(tx: Tx, session: Caller, path: str, digest: str | None, spelled: str | None = None,
                idents: tuple[str, ...] = ()) -> Drift:
    """SAFE: unchanged, or no baseline. MINOR: changed, nobody else held a lease covering it
    since the read. CRITICAL: changed while another session held a lease covering it (of the
    file, or of a directory above it) at some time since the read (from the lease events, not
    only the current holder). A deleted file has changed. ``spelled``: the caller's spelling
    of ``path`` (a baseline noted before paths were canonical is found under it). ``idents``:
    store/paths.py's identities of ``path``: a live lease of another session under another
    name of the file (a hard link, a bind mount, a folder renamed under it) held it too."""
    query = "SELECT hash, read_at, read_seq, held_by_other FROM reads WHERE session_id = ? AND path = ?"
    row, stored = tx.one(query, (session.id, path)), path
    if row is None and (former := _former(tx, session, path, spelled)) is not None:
        row, stored = tx.one(query, (session.id, former)), former
    if row is None:
        return Drift(path, "SAFE", False, None, None,
                     f"no baseline: note_read was never called for {path} by this session, so nothing can be "
                     "compared (SAFE only by default); note_read it when you read it", baseline=False)
    baseline, read_at, read_seq, held_then = row
    if digest == baseline:
        return Drift(path, "SAFE", False, None, read_at, f"{path} is unchanged since you read it")
    # the events index (path, seq): one range per entry; a baseline stored under an old
    # spelling is followed by the lease events of that spelling too
    cover = list(dict.fromkeys(coverage.covering_paths(path) + coverage.covering_paths(stored)))
    holder = held_then or tx.scalar(
        f"SELECT session_id FROM events WHERE path IN ({_marks(cover)}) AND seq > ? AND session_id <> ? "
        "AND kind IN ('lease_grant', 'lease_renew') ORDER BY seq LIMIT 1",
        (*cover, read_seq, session.id),
    )
    if not holder:
        holder = _held_elsewhere(tx, session, path, idents)
    what = "was deleted" if digest is None else "changed"
    holder = holder or _granted_under_another_name(tx, session, path, read_seq, cover)
    if holder:
        label = tx.scalar("SELECT label FROM sessions WHERE id = ?", (holder,))
        who = f"session {holder}" + (f" ({label})" if label else "")
        return Drift(path, "CRITICAL", True, holder, read_at,
                     f"{path} {what} since you read it at {iso(read_at)}, while {who} held a lease covering it: "
                     "re-read before editing")
    return Drift(path, "MINOR", True, None, read_at,
                 f"{path} {what} since you read it; nobody else held a lease covering it: re-read it")
