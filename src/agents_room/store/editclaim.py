"""Claim for edit: the edit guard's rule, one write transaction per tool call.

A harness hook (agents_room/harnesses/editguard.py) asks this before a file-writing tool runs,
with every path the call would write. The call is judged whole: it is **denied** when any
path is covered by another session's live lease (exclusive or shared: an edit needs the
file to itself; a directory lease above it counts) or has drifted CRITICAL for the editing
session (changed on disk since its read baseline while another session held a lease covering
it, store/reads.py); else, when ``claim``, the session takes or renews an exclusive lease of
each path (store/leases.py's own claim), its grant event marked ``at_edit``. Nothing is
written on a denial. A session the harness never joined (its model did not call
``room_join``) is joined here on its behalf, with the tag ``edit-guard``, before anything is
judged, so its edits are attributed to it from the first one.

The hashes are taken before the transaction (never under the write lock), as ``note_read``
takes them. A holder's liveness is judged after it, outside the lock too: a holder whose agent
is proven gone (by ``prune``'s own rule, store/liveness.py) is left as ``prune`` leaves it, and
the call judged again once.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from . import bounds, leases, news, paths, reads, rooms, sessions
from .clock import iso
from .engine import Tx
from .errors import InvalidArgument
from .leasecall import Lease
from .liveness import Judge, ProcessScan
from .sessions import Caller

# The lease an edit takes: 10 minutes, renewed by every edit of the file. Long enough to
# cover the gap between two edits of one piece of work (the model reads, thinks, runs the
# tests, edits again); short enough that a file an agent stopped touching, in a session
# that stays open, is free again soon. A session that ends releases it at once, and a holder
# whose agent is proven gone is left by the next edit that meets it.
EDIT_TTL_S = 600.0
# The tag a session joined by the guard carries (``agents-room who`` shows it): its model
# never called room_join. Its own later room_join, from the same harness process, is the same
# session (sessions.join).
JOINED_TAG = sessions.EDIT_GUARD_TAG


@dataclass(frozen=True)
class Target:
    """One path a tool call would write: its stored lease path, the caller's spelling (as
    store/bounds.py's lease_paths makes them) and its SHA-256 now (None: absent, or not a
    regular file)."""

    path: str
    spelled: str
    digest: str | None
    idents: tuple[str, ...] = ()  # store/paths.py's identities of path: a lease under another name of its file


@dataclass(frozen=True)
class Holder:
    """Another session's live lease in the way, with what the denial names and what the
    liveness judge needs."""

    lease: Lease
    harness: str
    pid: int | None
    harness_key: str | None
    host: str | None
    last_seen: float
    gone_at: float | None


@dataclass(frozen=True)
class Verdict:
    """The answer to one tool call. ``ok``: it may write; ``granted``: the leases it took or
    renewed. Denied: ``path`` (as the caller spelled it), and either ``holder`` (a lease in the
    way) or ``drift`` (CRITICAL); ``reason``: the words for the model."""

    ok: bool
    session_id: str
    joined: bool
    reason: str
    path: str | None = None
    holder: Holder | None = None
    drift: reads.Drift | None = None
    granted: tuple[Lease, ...] = ()


# -- the session ------------------------------------------------------------------------------


def find_or_join(tx: Tx, keys: list[str], pids: list[int], *, cwd: str, harness: str, harness_pid: int | None,
                 join_key: str | None, host: str) -> tuple[Caller, bool]:
    """The live session of these harness keys or harness pids (as the hook finds it,
    store/news.py), else a new one joined on its behalf: in ``cwd``'s repo room, tagged
    :data:`JOINED_TAG`, with ``join_key`` as its harness key. ``(caller, joined)``."""
    row = next((r for r in (news.session_for_key(tx, k) for k in keys) if r), None) or news.session_for_pids(tx, pids)
    if row is None:
        joined = sessions.join(
            tx, repo_room=rooms.repo_room(cwd), cwd=cwd, pid=harness_pid, harness=harness, harness_key=join_key,
            room=None, extra_rooms=[], label=None, tags=[JOINED_TAG], autonomy=None, wake_lever=None, host=host,
        )
        return sessions.resolve(tx, joined.session_id, "", touch=True), True
    return sessions.resolve(tx, row.id, "", touch=True), False


# -- the rule ---------------------------------------------------------------------------------


def _holders(tx: Tx, me: Caller, target: Target) -> list[Holder]:
    found = [h for h in leases.check(tx, target.path, target.spelled, target.idents) if h.session_id != me.id]
    out = []
    for lease in found:
        row = tx.one("SELECT harness, pid, harness_key, host, last_seen, gone_at FROM sessions WHERE id = ?",
                     (lease.session_id,))
        out.append(Holder(lease, *row))
    return out


def judge(tx: Tx, me: Caller, targets: list[Target], joined: bool, *, claim: bool, ttl_s: float) -> Verdict:
    """Judge the whole call, in the caller's write transaction: the first path held by another
    session (or drifted CRITICAL) denies it, with nothing written but the join and the touch;
    else, with ``claim``, an exclusive lease of each path, granted or renewed."""
    leases.sweep(tx)
    for target in targets:
        holders = _holders(tx, me, target)
        if holders:
            first = min(holders, key=lambda h: (h.lease.mode, h.lease.token))
            return Verdict(False, me.id, joined, denial(target, first, len(holders)), target.spelled, holder=first)
    for target in targets:
        if target.digest is None and not _exists(target.path):
            continue  # a new file: nobody can have read it
        drift = reads.drift_check(tx, me, target.path, target.digest, target.spelled, target.idents)
        if drift.severity == "CRITICAL":
            return Verdict(False, me.id, joined, drifted(target, drift), target.spelled, drift=drift)
    granted = []
    if claim:
        for target in targets:
            got = leases.claim(tx, me, target.path, ttl_s, "exclusive", spelled=target.spelled,
                               idents=target.idents, at_edit=True)
            if not got.ok:  # never: nobody was in the way a moment ago, in this transaction
                raise AssertionError(got.reason)
            granted.append(got.lease)
    return Verdict(True, me.id, joined, "granted" if claim else "allowed", granted=tuple(granted))


def _exists(path: str) -> bool:
    return os.path.lexists(path.rstrip("/"))


def denial(target: Target, h: Holder, in_the_way: int) -> str:
    """The words the model sees when a lease stands in the way of its edit."""
    lease = h.lease
    who = f"session {lease.session_id}" + (f" ({lease.label})" if lease.label else "") + f", harness {h.harness}"
    more = " (and others)" if in_the_way > 1 else ""
    where = target.spelled if lease.path in (target.path, target.spelled) else \
        f"{target.spelled} (beneath {lease.path}, a directory lease)"
    return (f"agents-room: edit denied: {where} is held {lease.mode} by {who}{more} until {iso(lease.expires_at)}. "
            f"The file is untouched. Ask the holder with msg_send to 'file:{target.path}', wait for the lease to "
            "end, or pick other work.")


def drifted(target: Target, drift: reads.Drift) -> str:
    """The words the model sees when the file changed under it (CRITICAL drift)."""
    return (f"agents-room: edit denied: {target.spelled} changed on disk since you read it, while another session "
            f"held a lease on it ({drift.message}). The file is untouched. Read it again, then make your edit "
            f"against what is there now, or ask the holder with msg_send to 'file:{target.path}'.")


def check_paths(values: list[str]) -> list[str]:
    if not values:
        raise InvalidArgument("files", "name at least one path the tool call would write")
    return values


# -- the store's operations (Store.edit_claim, Store.edit_read) ------------------------------------


def edit_claim(store: Any, *, cwd: str, files: list[str], harness: str, keys: Sequence[str] = (),
               pids: Sequence[int] = (), harness_pid: int | None = None, join_key: str | None = None,
               claim: bool = True, ttl_s: float = EDIT_TTL_S, scan: ProcessScan | None = None) -> Verdict:
    """May a tool call write ``files`` (relative to ``cwd``), and (``claim``) an exclusive lease
    of each for the session these harness ``keys`` or ``pids`` find (else joined on its behalf,
    with ``harness_pid`` and ``join_key``). One write transaction; a holder whose agent is
    proven gone (judged after it, outside the lock) is left as ``prune`` leaves it, and the
    call judged again once."""
    cwd = paths.canonical(paths.absolute(cwd))
    targets = []
    for value in check_paths(list(files)):
        where, spelled = bounds.lease_paths(value, cwd)
        bare = where.rstrip("/")
        try:
            digest = None if bare in store.own_files else reads.file_hash(bare)
        except InvalidArgument:  # a directory, a device: nothing to compare
            digest = None
        targets.append(Target(where, spelled, digest, tuple(paths.identities(where, cwd))))
    harness, join_key = bounds.harness(harness), bounds.harness_key(join_key)
    verdict = None
    for attempt in range(2):
        with store.db.write() as tx:
            me, joined = find_or_join(tx, list(keys), list(pids), cwd=cwd, harness=harness, harness_pid=harness_pid,
                                      join_key=join_key, host=store.host)
            verdict = judge(tx, me, targets, joined, claim=claim, ttl_s=ttl_s)
        if verdict.ok or verdict.holder is None or attempt:
            return verdict
        h = verdict.holder
        if Judge(store.host, tx.now, scan, fresh=True)(h.lease.session_id, h.pid, h.harness_key, h.host, h.last_seen,
                                            h.gone_at) != "gone":
            return verdict
        with store.db.write() as tx:  # its agent is gone: left as prune leaves it
            gone = tx.one("SELECT id, cwd, label, last_seen FROM sessions WHERE id = ? AND left_at IS NULL",
                          (h.lease.session_id,))
            if gone is not None:
                rooms.leave(tx, Caller(*gone), reason="prune")
    return verdict


def edit_read(store: Any, *, cwd: str, path: str, harness: str, keys: Sequence[str] = (), pids: Sequence[int] = (),
              harness_pid: int | None = None, join_key: str | None = None) -> str | None:
    """The read baseline a harness's read tool records: ``note_read`` of ``path`` for the
    session found or joined as :func:`edit_claim` finds it. The digest; None when the file
    does not exist (nothing was read)."""
    cwd = paths.canonical(paths.absolute(cwd))
    normal = store._readable_path(path, cwd)
    digest = reads.file_hash(normal)
    if digest is None:
        return None
    idents = tuple(paths.identities(normal, cwd))
    with store.db.write() as tx:
        me, _ = find_or_join(tx, list(keys), list(pids), cwd=cwd, harness=bounds.harness(harness),
                             harness_pid=harness_pid, join_key=bounds.harness_key(join_key), host=store.host)
        reads.note_read(tx, me, normal, digest, idents)
    return digest
