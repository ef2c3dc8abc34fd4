"""Leases on paths: exclusive or shared, deny on conflict, a fencing token on every grant
and renewal. Every function that writes sweeps expired leases first, inside the same
BEGIN IMMEDIATE transaction, so the holder check sees exactly the live holders.

A lease of a directory (stored path ending in ``/``) covers every path beneath it
(store/coverage.py); it is one lease row, renewed, released, swept and left as one. Its
holders contend with the holders of every lease it covers or that covers it."""

from __future__ import annotations

from . import coverage, paths
from .clock import iso
from .errors import LeaseNotHeld
from .sessions import Caller
from .engine import Tx
from .leasecall import Claim, HeldLease, Lease

_LEASE = "l.path, l.session_id, s.label, l.mode, l.token, l.acquired_at, l.expires_at"
_HELD = _LEASE + ", l.at_edit"  # a HeldLease's: what lease_check and lease_list show
_FROM = "FROM leases l JOIN sessions s ON s.id = l.session_id"
_LIVE = "l.expires_at > ?"
# A lease of one of a path's identities (store/paths.py): its file's own, recorded at the claim,
# or its name in its folder (paths.recorded), each on its own index; a name is only ever looked
# up among the identities that are names ("<dev>:<ino>/rest"), never a folder's own.
_BY_IDENTITY = "(l.ident IN ({marks}){named})"
# The leases beneath a directory: a range of the primary key (path, session_id), compared
# byte-wise ({bytewise}: SQLite's BINARY; PostgreSQL's "C", the path column's own collation,
# so its index serves the range whatever the database's collation, en_US or ICU).
_BENEATH = f"SELECT {_LEASE} {_FROM} WHERE l.path {{bytewise}} > ? AND l.path {{bytewise}} < ? AND {_LIVE}"
# A claim needs only the first lease beneath that stands in its way (another session's; for
# a shared claim, an exclusive one): the scan stops there, whatever else is live.
_IN_THE_WAY_BENEATH = _BENEATH + " AND l.session_id <> ?{exclusive} ORDER BY l.path LIMIT 1"
# The folder of each live lease (its path up to the last "/", a directory's without its own
# name): few distinct ones, which beneath_elsewhere resolves.
_FOLDERS = ("SELECT DISTINCT rtrim(rtrim(path, '/'), replace(rtrim(path, '/'), '/', '')) FROM leases "
            "WHERE expires_at > ?")


def sweep(tx: Tx) -> int:
    """Delete every lease whose time is up, each with a ``lease_expire`` event."""
    rows = tx.all(
        "DELETE FROM leases WHERE expires_at <= ? RETURNING path, session_id, mode, token, expires_at", (tx.now,)
    )
    for path, sid, mode, token, expires_at in rows:
        tx.log("lease_expire", sid, path, mode=mode, token=token, expires_at=expires_at)
    return len(rows)


def _covering(tx: Tx, path: str, also: tuple[str, ...] = (), columns: str = _LEASE) -> list[tuple]:
    """Live leases of ``path`` itself or of a directory above it: one IN list on the
    primary key, at most one entry per path component (of each of ``also``, too: the
    spellings a lease granted before paths were canonical may be stored under)."""
    keys = list(dict.fromkeys(p for each in (path, *also) for p in coverage.covering_paths(each)))
    marks = ", ".join("?" * len(keys))
    return tx.all(f"SELECT {columns} {_FROM} WHERE l.path IN ({marks}) AND {_LIVE}", (*keys, tx.now))


def _by_identity(tx: Tx, path: str, idents: tuple[str, ...], also: tuple[str, ...] = (),
                 columns: str = _LEASE) -> list[tuple]:
    """Live leases of ``path``'s file, or of a directory above it, under another name: those
    whose recorded identity (or name in its folder) is one of ``idents`` (store/paths.py's
    identities of ``path``) and whose path does not cover it already, and is of its file now
    (store/paths.py's same, from where the holder's session reads its paths: an inode freed and
    reused is no lease's). One ``IN`` list on each identity index."""
    if not idents:
        return []
    near = set(coverage.covering_paths(path)).union(*(coverage.covering_paths(p) for p in also))
    where, params = _matching(idents)
    rows = tx.all(f"SELECT {columns}, l.ident, l.name_ident, s.view {_FROM} WHERE {where} AND {_LIVE}",
                  (*params, tx.now))
    return [r[:-3] for r in rows if r[0] not in near and paths.same(r[0], r[-3], path, r[-2], r[-1])]


def _matching(idents: tuple[str, ...]) -> tuple[str, tuple[str, ...]]:
    """The condition of a lease of one of ``idents`` (either column), and its parameters."""
    names = tuple(i for i in idents if paths.SEP in i)
    named = f" OR l.name_ident IN ({', '.join('?' * len(names))})" if names else ""
    return _BY_IDENTITY.format(marks=", ".join("?" * len(idents)), named=named), (*idents, *names)


def _own_elsewhere(tx: Tx, session: Caller, path: str, idents: tuple[str, ...]) -> Lease | None:
    """The caller's own live lease of ``path`` itself under another name (a folder above it
    renamed since, a symlink left in its place): one whose recorded identity is ``path``'s own
    (store/paths.py's identities: the first, or the second when it is the file's name in its
    folder, never a folder's above) and whose path still leads there (paths.same) and resolves
    to ``path`` now. Its claim is a re-claim of that lease, which then follows the file to
    ``path``: never a second row."""
    own = tuple(i for i in idents[:2] if i == idents[0] or paths.SEP in i)
    if not own:
        return None
    # (on the identity indexes alone: a session's own leases may be many, a file's identity has few)
    where, params = _matching(own)
    rows = tx.all(f"SELECT {_LEASE}, l.ident, l.name_ident {_FROM} WHERE {where} AND {_LIVE}", (*params, tx.now))
    # Its old name must lead to ``path`` now (through the symlink left in its place): a second name
    # of one inode that stays a name of its own (a hard link, a bind mount) keeps a row of its own.
    return next((Lease(*r[:-2]) for r in rows if r[1] == session.id and r[0] != path
                 and coverage.is_directory(r[0]) == coverage.is_directory(path)
                 and paths.same(r[0], r[-2], path, r[-1])
                 and paths.canonical(r[0]) == path), None)


def beneath_elsewhere(tx: Tx, directory: str, columns: str = _LEASE) -> list[tuple]:
    """Live leases beneath ``directory`` under another name of it (a folder above them renamed
    since they were granted, a symlink left in its place; the directory mounted at a second
    place): those in a folder that, resolved now (store/paths.py's canonical) or by the device
    and inode of the folders above it (a bind mount), lies beneath it though its path does not. A lease records its
    own identity only, so a directory finds them so: the distinct folders of the live leases
    (one statement, a few rows), each resolved, and the leases of those that moved beneath it
    (a range of the primary key each); for directory claims and checks alone."""
    out: list[tuple] = []
    mine = paths.identities(directory, own=True)  # the directory's device and inode, when it exists
    for (folder,) in tx.all(_FOLDERS, (tx.now,)):
        if not folder or coverage.covers(directory, folder):  # beneath it by its path: the range found it
            continue
        if coverage.covers(directory, coverage.as_directory(paths.canonical(folder.rstrip(paths.SEP) or paths.SEP))) \
                or beneath_by_identity(mine, folder):
            lo, hi = coverage.subtree_range(folder)
            out += tx.all(_BENEATH.replace(_LEASE, columns, 1).format(bytewise=tx.BYTEWISE), (lo, hi, tx.now))
    return list(dict.fromkeys(out))


def beneath_by_identity(directory: list[str], folder: str) -> bool:
    """Whether ``folder`` (a lease's, as stored) lies beneath the directory whose own identity
    is ``directory`` (store/paths.py's identities, ``own``), by device and inode, as the kernel
    sees both now: a folder reached through a bind mount of the directory, which no path
    resolved (realpath cannot see a mount) leads beneath it. One ``stat`` a component of ``folder``."""
    return bool(directory) and paths.SEP not in directory[0] and directory[0] in paths.identities(folder)


def _holders(tx: Tx, path: str, also: tuple[str, ...] = (), idents: tuple[str, ...] = ()) -> list[HeldLease]:
    """The live leases that contend with a lease of ``path`` (or of one of ``also``): those
    covering it (under any name of its file: ``idents``) and, for a directory, those beneath
    it. Exclusive first, then by token (the oldest grant first)."""
    rows = _covering(tx, path, also, _HELD) + _by_identity(tx, path, idents, also, _HELD)
    if coverage.is_directory(path):
        for directory in dict.fromkeys((path, *also)):
            lo, hi = coverage.subtree_range(directory)
            rows += tx.all(_BENEATH.replace(_LEASE, _HELD, 1).format(bytewise=tx.BYTEWISE), (lo, hi, tx.now))
        rows += beneath_elsewhere(tx, path, _HELD)
    return sorted(dict.fromkeys(_held(r) for r in rows), key=lambda x: (x.mode, x.token))


def _held(row: tuple) -> HeldLease:
    return HeldLease(*row[:7], at_edit=bool(row[7]))


def _first_beneath_in_the_way(tx: Tx, session: Caller, directory: str, mode: str) -> list[Lease]:
    lo, hi = coverage.subtree_range(directory)
    only = " AND l.mode = 'exclusive'" if mode == "shared" else ""
    sql = _IN_THE_WAY_BENEATH.format(bytewise=tx.BYTEWISE, exclusive=only)
    return [Lease(*r) for r in tx.all(sql, (lo, hi, tx.now, session.id))]


def _own(tx: Tx, session: Caller, path: str) -> Lease | None:
    row = tx.one(f"SELECT {_LEASE} {_FROM} WHERE l.path = ? AND l.session_id = ? AND {_LIVE}", (path, session.id, tx.now))
    return None if row is None else Lease(*row)


def _next_token(tx: Tx) -> int:
    return tx.scalar("UPDATE counters SET value = value + 1 WHERE name = 'lease_token' RETURNING value")


def claim(tx: Tx, session: Caller, path: str, ttl_s: float, mode: str, *, spelled: str | None = None,
          asked: str | None = None, idents: tuple[str, ...] = (), at_edit: bool = False) -> Claim:
    """Grant, extend or upgrade ``session``'s lease on ``path``, or deny naming the holder.

    Exclusive: one holder, blocks every other claim. Shared: several holders, blocks
    exclusive claims. The holder's own repeated claim extends it (new token); a sole
    shared holder may upgrade to exclusive; an exclusive holder may step down to shared.
    ``spelled``: the caller's spelling of ``path``, when it differs (another's lease granted
    under it before paths were canonical stands in the way too); ``asked``: its own words,
    which a denial quotes. ``idents``: store/paths.py's identities of ``path``; the first is
    stored with the lease, and a lease of any of them under another name stands in the way
    (a hard link, a bind mount, a folder renamed under a live lease). ``at_edit``: taken by the
    edit guard at an edit (store/editclaim.py), which its grant event says, and the lease while
    it lives (a renewal, or another edit, keeps it; the holder's own claim of the path ends it:
    then it is the model's lease, and an edit of a lease the model claimed leaves it so)."""
    sweep(tx)
    also = () if spelled in (None, path) else (spelled,)
    # Two index lookups, never a scan of every lease: the leases covering the path (an IN
    # list), and for a directory the first lease beneath it in the way (a range).
    covering = [Lease(*r) for r in _covering(tx, path, also)]
    # Only a lease of this very path is re-claimed; the caller's own leases above or
    # beneath it never stand in its way.
    mine = next((h for h in covering if h.session_id == session.id and h.path == path), None)
    if mine is None and idents:
        mine = _own_elsewhere(tx, session, path, idents)
    covering += [Lease(*r) for r in _by_identity(tx, path, idents, also)]
    others = [h for h in covering if h.session_id != session.id]
    in_the_way = others if mode == "exclusive" else [h for h in others if h.mode == "exclusive"]
    if coverage.is_directory(path):
        for directory in (path, *also):
            in_the_way += _first_beneath_in_the_way(tx, session, directory, mode)
        elsewhere = [Lease(*r) for r in beneath_elsewhere(tx, path)]
        in_the_way += [h for h in elsewhere if h.session_id != session.id and (mode == "exclusive" or h.mode == "exclusive")]
    if in_the_way:
        h = min(in_the_way, key=lambda x: (x.mode, x.token))
        shown = path if asked is None else paths.named(asked, spelled or path, path)
        return denial(path, h, len(in_the_way), mine is not None, shown)

    token = _next_token(tx)
    expires_at = tx.now + ttl_s
    ident, name = paths.recorded(idents)
    if mine is None:  # no result needed: sent with the commit where the engine can (Tx.later)
        tx.later(
            "INSERT INTO leases (path, session_id, mode, token, ttl_s, acquired_at, expires_at, ident, name_ident, "
            "at_edit) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (path, session.id, mode, token, ttl_s, tx.now, expires_at, ident, name, int(at_edit)),
        )
    else:
        # The holder's own lease_claim makes a lease taken at an edit the model's (at_edit 0, as
        # the PostgreSQL function of migrate_5.sql does); an edit of a lease keeps what it was.
        # (its path too: a lease found under its file's former name follows the file, _own_elsewhere)
        tx.later(
            "UPDATE leases SET path = ?, mode = ?, token = ?, ttl_s = ?, expires_at = ?, ident = coalesce(?, ident), "
            f"name_ident = coalesce(?, name_ident), at_edit = {'at_edit' if at_edit else '0'} "
            "WHERE path = ? AND session_id = ?",
            (path, mode, token, ttl_s, expires_at, ident, name, mine.path, session.id),
        )
    previous = mine.mode if mine else None
    marked = {"at_edit": True} if at_edit else {}
    if mine is not None and mine.path != path:
        marked["renamed_from"] = mine.path
    tx.log("lease_grant", session.id, path, mode=mode, token=token, expires_at=expires_at, previous_mode=previous,
           **marked)
    acquired_at = tx.now if mine is None else mine.acquired_at
    return grant(Lease(path, session.id, session.label, mode, token, acquired_at, expires_at), previous)


def denial(path: str, h: Lease, in_the_way: int, upgrading: bool, shown: str | None = None) -> Claim:
    """A claim of ``path`` denied: ``h`` is the first of ``in_the_way`` holders in its way
    (by mode, then token); ``upgrading`` when the caller holds ``path`` itself already;
    ``shown``: how the reason names ``path`` (:func:`.paths.named`; default ``path``).
    Shared with an engine that answers a claim itself (:meth:`.engine.Database.serve_lease`)."""
    who = f"{h.session_id}" + (f" ({h.label})" if h.label else "")
    more = " and others" if in_the_way > 1 else ""
    shown = shown or path
    where = shown if h.path == path else f"{shown} {_relation(h.path, path)} {h.path}, which"
    reason = f"{where} is held {h.mode} by {who}{more} until {iso(h.expires_at)}"
    if upgrading:
        reason = f"cannot upgrade to exclusive: {reason}"
    return Claim(False, h, reason, None)


def grant(lease: Lease, previous_mode: str | None) -> Claim:
    """A claim granted: ``lease`` the caller's, ``previous_mode`` its mode before (None: new)."""
    if previous_mode is None:
        reason = "granted"
    else:
        reason = "extended" if previous_mode == lease.mode else f"changed from {previous_mode} to {lease.mode}"
    return Claim(True, lease, reason, lease)


def _relation(lease: str, path: str) -> str:
    if coverage.covers(lease, path):
        return "is beneath"
    if coverage.covers(path, lease):
        return "covers"
    if coverage.is_directory(path) and coverage.covers(path, paths.canonical(lease)):
        return "covers, by the name it has now,"  # a lease taken under its former name (beneath_elsewhere)
    return "is, by device and inode, the file or beneath the folder of"  # another name (_by_identity)


def _not_held(tx: Tx, session: Caller, path: str, verb: str) -> LeaseNotHeld:
    if not coverage.is_directory(path) and _own(tx, session, coverage.as_directory(path)) is not None:
        # The directory is gone from disk (or never was), so the name without "/" read as a file.
        return LeaseNotHeld(f"cannot {verb} {path}: session {session.id} holds the directory "
                            f"{coverage.as_directory(path)}: name it with a trailing /", holders=[session.id])
    holders = [Lease(*r) for r in tx.all(f"SELECT {_LEASE} {_FROM} WHERE l.path = ? AND {_LIVE} ORDER BY l.mode, l.token",
                                          (path, tx.now))]
    if holders:
        names = ", ".join(f"{h.session_id} ({h.mode})" for h in holders)
        return LeaseNotHeld(f"cannot {verb} {path}: session {session.id} does not hold it; held by {names}",
                            holders=[h.session_id for h in holders])
    return LeaseNotHeld(f"cannot {verb} {path}: session {session.id} does not hold it (expired or never claimed); "
                        "it is free, lease_claim it again", holders=[])


def _former(tx: Tx, session: Caller, path: str, spelled: str | None) -> str | None:
    """The stored path of ``session``'s own lease of ``path`` granted before paths were
    canonical: under the caller's spelling, or under any spelling that names the same file
    on this host (the host its session runs on, where the spelling was made). Looked for
    only once the canonical path missed; None: there is none."""
    own = [r[0] for r in tx.all("SELECT path FROM leases WHERE session_id = ? AND path <> ? AND expires_at > ?",
                                (session.id, path, tx.now))]
    if spelled in own:
        return spelled
    return next((p for p in own if paths.canonical(p) == path), None)


def renew(tx: Tx, session: Caller, path: str, ttl_s: float | None, spelled: str | None = None) -> Lease:
    """Extend the caller's live lease with a new token. ``ttl_s`` defaults to the lease's own.
    ``spelled``: the caller's spelling of ``path`` (a lease granted before paths were
    canonical is renewed under the path it was stored with).

    Raises ``LeaseNotHeld`` (naming the current holder) if it expired or was never held."""
    sweep(tx)
    row = tx.one("SELECT mode, ttl_s, acquired_at FROM leases WHERE path = ? AND session_id = ?", (path, session.id))
    if row is None and (former := _former(tx, session, path, spelled)) is not None:
        path = former
        row = tx.one("SELECT mode, ttl_s, acquired_at FROM leases WHERE path = ? AND session_id = ?", (path, session.id))
    if row is None:
        raise _not_held(tx, session, path, "renew")
    mode, own_ttl, acquired_at = row
    ttl = own_ttl if ttl_s is None else ttl_s
    token = _next_token(tx)
    expires_at = tx.now + ttl
    tx.execute(
        "UPDATE leases SET token = ?, ttl_s = ?, expires_at = ? WHERE path = ? AND session_id = ?",
        (token, ttl, expires_at, path, session.id),
    )
    tx.event("lease_renew", session.id, path, mode=mode, token=token, expires_at=expires_at)
    return Lease(path, session.id, session.label, mode, token, acquired_at, expires_at)


def release(tx: Tx, session: Caller, path: str, spelled: str | None = None) -> None:
    """Release the caller's lease (``spelled``: as :func:`renew`). Raises ``LeaseNotHeld``
    saying who holds it, if anyone."""
    sweep(tx)
    delete = "DELETE FROM leases WHERE path = ? AND session_id = ? RETURNING mode, token"
    row = tx.one(delete, (path, session.id))
    if row is None and (former := _former(tx, session, path, spelled)) is not None:
        path = former
        row = tx.one(delete, (path, session.id))
    if row is None:
        raise _not_held(tx, session, path, "release")
    tx.log("lease_release", session.id, path, mode=row[0], token=row[1], reason="release")


def release_all(tx: Tx, session_id: str, reason: str) -> None:
    rows = tx.all("DELETE FROM leases WHERE session_id = ? RETURNING path, mode, token", (session_id,))
    for path, mode, token in rows:
        tx.event("lease_release", session_id, path, mode=mode, token=token, reason=reason)


def check(tx: Tx, path: str, spelled: str | None = None, idents: tuple[str, ...] = ()) -> list[Lease]:
    """The live leases in the way of an exclusive claim of ``path`` (exclusive first): its
    own, every directory lease above it, and for a directory every lease beneath it; under
    the caller's ``spelled`` path too, where a lease granted before paths were canonical
    may be stored, and under another name of its file (``idents``, as :func:`claim`)."""
    return _holders(tx, path, () if spelled in (None, path) else (spelled,), idents)


def live(tx: Tx) -> list[HeldLease]:
    rows = tx.all(f"SELECT {_HELD} {_FROM} WHERE l.expires_at > ? ORDER BY l.path, l.token", (tx.now,))
    return [_held(r) for r in rows]
