"""Lease writes an engine answers itself, whole (:meth:`.engine.Database.serve_lease`): on
PostgreSQL a claim, a release or a renewal is one server function called in one round trip, so the
store's one write lock is held for that round trip alone (docs/decisions.md, "One round trip
in the lock"). The rules are :mod:`.leases`'s; the engine's function does what they do,
and what is not a rule stays here: the path's normal form, the words of the answer.

An engine that does not serve a call (SQLite: the rules run in-process, where a statement
costs no round trip) answers None, and so does this module wherever the Python rules must
run instead: any error (an unknown session, a bad path, a lease not held) is explained by
them, in a transaction of their own, exactly as without an engine's help; the engine's
answer of that kind has changed nothing.

The path of a call is made absolute and canonical (store/paths.py) against its session's cwd,
which only the store knows: the cwd this process last saw for the session is sent with the
call, and the engine refuses (``cwd``, nothing changed) a call made against another; then the
call is made again against the cwd it answered. An absolute path needs none.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any, Literal

from . import bounds, coverage, paths
from .errors import InvalidArgument
from .leasecall import Claim, Lease, LeaseAnswer, LeaseCall
from .leases import beneath_elsewhere, denial, grant

if TYPE_CHECKING:
    from .engine import Database

class Served:
    """One store's use of :meth:`.engine.Database.serve_lease`, with the cwd each session
    had at its last call from this process (a rejoin may move it: then the engine says so)."""

    def __init__(self, db: Database) -> None:
        self.db = db
        self.cwds: dict[str, str] = {}

    def claim(self, session_id: Any, path: Any, ttl_s: float, mode: str) -> Claim | None:
        """The claim's answer, or None: run :func:`.leases.claim` instead."""
        answered = self._call("claim", session_id, path, ttl_s, mode)
        if answered is None:
            return None
        answer, where = answered
        if answer.outcome == "granted" and answer.lease is not None:
            return grant(answer.lease, answer.previous_mode)
        if answer.outcome == "denied" and answer.holder is not None:
            if not coverage.overlaps(answer.holder.path, where) and not _same_file(answer.holder.path, where):
                return None  # in the way by a recorded identity its path no longer leads to: the rules judge
            return denial(where, answer.holder, answer.in_the_way, answer.previous_mode is not None)
        return None

    def release(self, session_id: Any, path: Any) -> bool:
        """True: released. False: run :func:`.leases.release` instead (which raises)."""
        answered = self._call("release", session_id, path, 0.0, "exclusive")
        return answered is not None and answered[0].outcome == "released"

    def renew(self, session_id: Any, path: Any, ttl_s: float | None) -> Lease | None:
        """The renewed lease, or None: run :func:`.leases.renew` instead (which may raise)."""
        answered = self._call("renew", session_id, path, ttl_s, "exclusive")
        return answered[0].lease if answered is not None and answered[0].outcome == "renewed" else None

    def _call(self, op: Literal["claim", "release", "renew"], session_id: Any, path: Any, ttl_s: float | None,
              mode: str) -> tuple[LeaseAnswer, str] | None:
        if not self.db.serves_leases:
            return None  # asked each call: a test may turn it off on an open store
        try:
            sid = bounds.session_id_text(session_id)
        except InvalidArgument:
            return None  # the rules word it (after looking the session up, as they do)
        for _attempt in range(2):
            made = _absolute(path, self.cwds.get(sid))
            if made is None:
                return None
            cwd, where = made
            idents = tuple(paths.identities(where, self.cwds.get(sid, ""))) if op == "claim" else ()
            if op == "claim" and coverage.is_directory(where) and self._beneath_elsewhere(where):
                return None  # a lease beneath it under a former name: the rules look (the function cannot)
            answer = self.db.serve_lease(LeaseCall(op, sid, cwd, where, ttl_s, mode, idents))
            if answer is None or answer.outcome in ("unknown", "not_held", "renamed"):
                return None
            if answer.cwd is not None:
                self.cwds[sid] = answer.cwd
            if answer.outcome != "cwd":
                return answer, where
        return None  # the session moved twice meanwhile: the rules' own transaction


    def _beneath_elsewhere(self, directory: str) -> bool:
        """Whether a live lease lies beneath ``directory`` under another name of it (a folder
        renamed under it: :func:`.leases.beneath_elsewhere`), in a read before the call: one
        more round trip, for directory claims alone. A lease granted under a former name after
        this read and before the call is not seen (a claim resolved before a rename, committed
        after it)."""
        with self.db.read() as tx:
            return bool(beneath_elsewhere(tx, directory))


def _same_file(holder: str, path: str) -> bool:
    """Whether the lease of ``holder``, in the way of a claim of ``path`` by identity alone
    (the engine found its recorded identity among ``path``'s, without the file system), still
    leads to it: its path's identity now is one of ``path``'s, both looked at together (paths.same,
    as the rules check)."""
    now = paths.identities(holder, own=True)
    return bool(now) and paths.same(holder, now[0], path)


def _absolute(path: Any, cwd: str | None) -> tuple[str | None, str] | None:
    """``(the cwd it depends on, the lease path)``, or None when it cannot be made here (a
    bad path: the rules word it, after the session, as they do) or when the caller spelled
    it otherwise than its canonical form: the rules then also look for a lease stored under
    that spelling before paths were canonical, and name the path as the caller asked."""
    if not isinstance(path, str):
        return None
    absolute = os.path.isabs(os.path.expanduser(path))
    if not absolute and cwd is None:
        cwd = ""  # no session's cwd: the engine answers with the session's, nothing changed
    try:
        where, spelled = bounds.lease_paths(path, cwd or "/")
    except InvalidArgument:
        return None
    return None if spelled != where else ((None if absolute else cwd), where)

