"""The agents-room store: the data and the rules, no MCP in sight.

:class:`Store` has one method per operation of the protocol (the 18 tools, plus ``prune``
and ``health``). Each validates its arguments, then runs exactly one transaction through
the engine's :class:`~.engine.Database` (the contract, :mod:`.engine`; :mod:`.engines` picks
the engine, :mod:`.sqlite` or :mod:`.postgres`, from the location); the rules themselves
live in one module per concept.
"""

from __future__ import annotations

import contextlib
import json
import os
from typing import TYPE_CHECKING, Any

from . import bounds, callcounts, editclaim, leases, messages, news, overview, paths, reads, rooms, sessions
from .clock import Clock
from .errors import (
    ERROR_CODES,
    InvalidArgument,
    LeaseNotHeld,
    NotRecipient,
    RoomError,
    StoreBusy,
    StoreError,
    UnknownSession,
)
from .leases import Claim, Lease
from .hosts import host_id
from .wakecalls import WakeCalls
from .liveness import Judge, ProcessScan, liveness, recent_scan, scan_processes
from .messages import Inbox, Message, Sent, SentMessage
from .overview import Overview
from .reads import Drift
from .rooms import Member
from .served import Served
from .sessions import Caller, Joined, Session
from .location import Location, resolve
from .engine import Database
from .engines import busy_timeout_from_env, open_database
from .records import Event, LeaseState, LeaseView, Received
from .wake import RETRY_WINDOW_S, Offer, Pending

if TYPE_CHECKING:
    from pathlib import Path

__all__ = [
    "ERROR_CODES", "Claim", "Clock", "Drift", "Event", "Inbox", "InvalidArgument", "Joined", "Lease", "LeaseNotHeld",
    "LeaseState", "LeaseView", "Member", "Message", "NotRecipient", "Offer", "Overview", "Pending", "ProcessScan", "Received",
    "RETRY_WINDOW_S", "RoomError",
    "Sent", "SentMessage", "Session", "Store", "StoreBusy", "StoreError", "UnknownSession", "Location", "resolve",
    "liveness", "recent_scan", "scan_processes",
]

# A read-only call records last_seen only when the stored value is older than this, so
# reads stay reads (no write lock) under load.
TOUCH_INTERVAL_S = 30.0


class Store(WakeCalls):
    """One open store. Thread-safe; open one per process (never carry it across fork)."""

    def __init__(self, db: Database, location: Location, host: str | None = None) -> None:
        self.db, self.calls = db, callcounts.attach(db)  # its adapter counts calls here; None: off (callcounts.py)
        self.location = location
        self.served = Served(db)
        # The store's own files as every read path is made (canonical), resolved once: a read
        # of one of them is refused, and note_read and drift_check ask on every call.
        self.own_files = frozenset(os.path.realpath(p) for p in db.files())
        # The host this process runs on: sessions it joins record it; liveness reads /proc
        # for that host's sessions only (store/hosts.py).
        self.host = host or host_id()

    @classmethod
    def open(
        cls, where: str | Path | Location | None = None, *, clock: Clock | None = None,
        busy_timeout_s: float | None = None, verify: bool = True, create: bool = True,
    ) -> Store:
        """Open the store ``where`` names (see :mod:`.location`; default ``$AGENTS_ROOM_DB``,
        else ``~/.agents-room/room.db``). ``create=False`` refuses a store that does not exist
        yet instead of creating it (commands that only look). ``verify=False`` skips
        ``quick_check`` on open: for hooks only (see open_database). Raises ``StoreError``."""
        location = where if isinstance(where, Location) else resolve(where)
        host = host_id()  # a malformed AGENTS_ROOM_HOST_ID is refused before anything is opened
        if busy_timeout_s is None:
            busy_timeout_s = busy_timeout_from_env()
        return cls(open_database(location, clock or Clock(), busy_timeout_s, verify=verify, create=create),
                   location, host)

    @property
    def path(self) -> str:
        """The store as it may be shown to people and models (a URL without its password)."""
        return str(self.location)

    @property
    def clock(self) -> Clock:
        return self.db.clock

    def close(self) -> None:
        callcounts.flush(self.calls, self.db)  # what it counted and has not written yet, first
        self.db.close()

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- helpers ------------------------------------------------------------------------------

    def _session(self, tx: Any, session_id: Any, *, touch: bool) -> Caller:
        return sessions.resolve(tx, session_id, self.path, touch=touch)

    def _touch_if_stale(self, session: Caller, now: float) -> None:
        # ``now`` is the read transaction's time (on PostgreSQL the server's, like last_seen).
        if now - session.last_seen >= TOUCH_INTERVAL_S:
            # Best effort: the read has its answer already; a writer holding the lock past
            # the bounded wait must not turn that answer into store_busy.
            with contextlib.suppress(StoreBusy), self.db.write() as tx:
                tx.execute("UPDATE sessions SET last_seen = ? WHERE id = ? AND left_at IS NULL", (tx.now, session.id))

    def _readable_path(self, value: Any, cwd: str, me: Caller | None = None, tx: Any = None) -> str:
        """``value`` canonical, never the store's file; for ``me``, in its repositories (reads.py)."""
        path = bounds.path(value, cwd)  # canonical: the real path of the file
        if path in self.own_files:
            raise InvalidArgument("path", f"{path} is the store's own database file; it is never read or hashed")

        def others() -> list[str]:  # in tx, else a read of its own: only for a path outside its repository
            with contextlib.nullcontext(tx) if tx is not None else self.db.read() as t:
                return rooms.peer_folders(t, me.id) if me else []

        if me is not None:
            reads.within_repository(path, me.cwd, others)
        return path

    # -- sessions and rooms ---------------------------------------------------------------------

    def room_join(
        self, *, cwd: str, pid: int | None, room: Any = None, extra_rooms: Any = None, label: Any = None,
        tags: Any = None, autonomy: Any = None, harness: Any = None, harness_key: Any = None,
        wake_lever: str | None = None, host: str | None = None,
    ) -> Joined:
        """Join the repo room of ``cwd`` and any shared rooms; rejoin by harness key (``host``: an HTTP client's)."""
        room = None if room is None else bounds.room(room)
        extra = bounds.rooms(extra_rooms)
        label = bounds.label(label)
        tags = bounds.tags(tags)
        autonomy = None if autonomy is None else bounds.autonomy(autonomy)
        harness = bounds.harness(harness)
        harness_key = bounds.harness_key(harness_key)
        # Canonical, whoever hands it over (a harness may show its logical PWD): the repo room
        # and every relative path of the session are made from it (store/paths.py).
        cwd = paths.canonical(paths.absolute(cwd))
        repo = rooms.repo_room(cwd)
        with self.db.write() as tx:
            joined = sessions.join(
                tx, repo_room=repo, cwd=cwd, pid=pid, harness=harness, harness_key=harness_key,
                room=room, extra_rooms=extra, label=label, tags=tags, autonomy=autonomy, wake_lever=wake_lever,
                host=host or self.host,
            )
        self.served.cwds[joined.session_id] = cwd  # what its lease paths are made against
        return joined

    def room_leave(self, session_id: Any) -> None:
        """Leave every room; leases released, unread deliveries expired, tombstone kept."""
        with self.db.write() as tx:
            rooms.leave(tx, self._session(tx, session_id, touch=True))

    def room_leave_room(self, session_id: Any, room: Any) -> None:
        room = bounds.room(room)
        with self.db.write() as tx:
            rooms.leave_room(tx, self._session(tx, session_id, touch=True), room)

    def room_who(self, session_id: Any = None, room: Any = None, *, scan: ProcessScan | None = None) -> list[Member]:
        """Sessions with liveness: of ``room``, else of the caller's rooms, else all. Liveness
        as this host sees it (liveness.Judge; ``scan`` given: this host's verdicts from it)."""
        room = None if room is None else bounds.room(room)
        with self.db.read() as tx:
            me = None if session_id is None else self._session(tx, session_id, touch=False)
            judge = Judge(self.host, tx.now, scan)
            found = rooms.who(tx, judge, room, me)
        self._record_gone(judge)
        if me:
            self._touch_if_stale(me, tx.now)
        return found

    def _record_gone(self, judge: Judge) -> None:
        """Best effort, like a touch: what this host proved gone, for the other hosts to see."""
        if judge.proved_gone:
            with contextlib.suppress(StoreBusy), self.db.write() as tx:
                rooms.record_gone(tx, judge.proved_gone)

    def room_set_autonomy_cap(self, autonomy: Any, session_id: Any = None, room: Any = None) -> tuple[str, str]:
        """Cap a room's autonomy (default: the caller's repo room); members above are lowered."""
        autonomy = bounds.autonomy(autonomy)
        room = None if room is None else bounds.room(room)
        if room is None and session_id is None:
            raise InvalidArgument("room", "name the room, or pass session_id to cap your repo room")
        with self.db.write() as tx:
            me = None if session_id is None else self._session(tx, session_id, touch=True)
            target = room or rooms.home_room(tx, me)  # type: ignore[arg-type]
            rooms.set_cap(tx, target, autonomy, me.id if me else None)
            return target, autonomy

    def prune(self, quiet_s: Any, *, scan: ProcessScan | None = None, dry_run: bool = False) -> list[Session]:
        """Remove sessions quiet longer than ``quiet_s`` whose agent is proven gone (``dry_run``:
        only say which, in a read transaction). This host's: by a fresh process scan; another
        host's: only when its own host proved it gone after its last call (store/hosts.py)."""
        quiet = sessions.check_quiet(quiet_s)
        scan = scan or scan_processes()
        with self.db.read() if dry_run else self.db.write() as tx:
            gone = sessions.prune_candidates(tx, quiet, Judge(self.host, tx.now, scan))
            for s in () if dry_run else gone:
                rooms.leave(tx, s, reason="prune")
            return gone

    # -- messages ---------------------------------------------------------------------------------

    def msg_send(
        self, session_id: Any, to: Any, subject: Any = None, body: Any = None, reply_to: Any = None,
        ttl_s: Any = None,
    ) -> Sent:
        subject = bounds.subject(subject)
        body = bounds.body(body)
        reply_to = None if reply_to is None else bounds.message_id(reply_to, "reply_to")
        ttl = bounds.message_ttl(ttl_s)
        for _ in range(messages.SNAPSHOTS):
            known = messages.match_outside(self.db.read, to)  # a file: glob's costly part, outside the lock
            try:
                with self.db.write() as tx:
                    me = self._session(tx, session_id, touch=True)
                    return messages.send(tx, me, to, subject, body, reply_to, ttl, self.path, known)
            except messages.Stale:  # leases came faster than the matching: again, from a new snapshot
                continue
        raise StoreBusy(f"the live leases changed faster than the file: selector could be matched "
                        f"({messages.SNAPSHOTS} tries); nothing was sent, try again")

    def msg_recv(self, session_id: Any, limit: Any = None) -> Received:
        n = bounds.limit(limit, 100)
        with self.db.write() as tx:
            me = self._session(tx, session_id, touch=True)
            return Received(*messages.recv(tx, me, n))

    def msg_ack(self, session_id: Any, message_id: Any) -> None:
        mid = bounds.message_id(message_id)
        with self.db.write() as tx:
            messages.ack(tx, self._session(tx, session_id, touch=True), mid)

    def msg_unread(self, session_id: Any) -> int:
        with self.db.read() as tx:
            me = self._session(tx, session_id, touch=False)
            count = messages.unread(tx, me)
        self._touch_if_stale(me, tx.now)
        return count

    def msg_sent(self, session_id: Any, limit: Any = None) -> list[SentMessage]:
        n = bounds.limit(limit, 50)
        with self.db.read() as tx:
            me = self._session(tx, session_id, touch=False)
            out = messages.sent(tx, me, n)
        self._touch_if_stale(me, tx.now)
        return out

    def room_history(self, session_id: Any = None, room: Any = None, limit: Any = None) -> tuple[str, list[Message]]:
        """A room's messages, oldest first (default room: the caller's repo room). Read-only:
        never marks anything read."""
        n = bounds.limit(limit, 50)
        room = None if room is None else bounds.room(room)
        if room is None and session_id is None:
            raise InvalidArgument("room", "name the room, or pass session_id to read your repo room")
        with self.db.read() as tx:
            me = None if session_id is None else self._session(tx, session_id, touch=False)
            target = room or rooms.home_room(tx, me)  # type: ignore[arg-type]
            found = messages.history(tx, target, n)
        if me:
            self._touch_if_stale(me, tx.now)
        return target, found

    # -- leases -----------------------------------------------------------------------------------

    def lease_claim(self, session_id: Any, path: Any, ttl_s: Any = None, mode: Any = None) -> Claim:
        ttl = bounds.lease_ttl(ttl_s)
        mode = "exclusive" if mode is None else bounds.mode(mode)
        served = self.served.claim(session_id, path, ttl, mode)  # the engine's, where it answers (served.py)
        if served is not None:
            return served
        with self.db.write() as tx:
            me = self._session(tx, session_id, touch=True)
            where, spelled = bounds.lease_paths(path, me.cwd)
            return leases.claim(tx, me, where, ttl, mode, spelled=spelled, asked=path,
                                idents=tuple(paths.identities(where, me.cwd)))

    def lease_renew(self, session_id: Any, path: Any, ttl_s: Any = None) -> Lease:
        ttl = None if ttl_s is None else bounds.lease_ttl(ttl_s)
        served = self.served.renew(session_id, path, ttl)  # the engine's, where it answers (served.py)
        if served is not None:
            return served
        with self.db.write() as tx:
            me = self._session(tx, session_id, touch=True)
            where, spelled = bounds.lease_paths(path, me.cwd)
            return leases.renew(tx, me, where, ttl, spelled)

    def lease_release(self, session_id: Any, path: Any) -> None:
        if self.served.release(session_id, path):
            return
        with self.db.write() as tx:
            me = self._session(tx, session_id, touch=True)
            leases.release(tx, me, *bounds.lease_paths(path, me.cwd))

    def lease_check(self, session_id: Any, path: Any) -> LeaseState:
        with self.db.read() as tx:
            me = self._session(tx, session_id, touch=False)
            where, spelled = bounds.lease_paths(path, me.cwd)
            holders = leases.check(tx, where, spelled, tuple(paths.identities(where, me.cwd)))
        self._touch_if_stale(me, tx.now)
        return LeaseState(not holders, holders[0] if holders else None, holders)

    def lease_list(self, session_id: Any) -> list[LeaseView]:
        with self.db.read() as tx:
            me = self._session(tx, session_id, touch=False)
            found = leases.live(tx)
        self._touch_if_stale(me, tx.now)
        return [LeaseView.of(x, mine=x.session_id == me.id) for x in found]

    # -- reads and drift --------------------------------------------------------------------------

    def note_read(self, session_id: Any, path: Any) -> str:
        """Record the file's SHA-256 now, hashed between two transactions (never in the write lock)."""
        with self.db.read() as tx:
            me = self._session(tx, session_id, touch=False)
        normal = self._readable_path(path, me.cwd, me)
        digest = reads.file_hash(normal)
        if digest is None:
            raise InvalidArgument("path", f"{normal} does not exist")
        idents = tuple(paths.identities(normal, me.cwd))  # outside the write lock, as the hash
        with self.db.write() as tx:
            reads.note_read(tx, self._session(tx, session_id, touch=True), normal, digest, idents)
        return digest

    def drift_check(self, session_id: Any, path: Any) -> Drift:
        with self.db.read() as tx:
            me = self._session(tx, session_id, touch=False)
            normal = self._readable_path(path, me.cwd, me, tx)
            drift = reads.drift_check(tx, me, normal, reads.file_hash(normal), bounds.spelling(path, me.cwd),
                                      tuple(paths.identities(normal, me.cwd)))
        self._touch_if_stale(me, tx.now)
        return drift

    def sessions_by_id_or_key(self, session_id: str, harness_key: str | None) -> list[Session]:
        """The session whose id is ``session_id`` and every session whose harness key is
        ``harness_key``, live or left (the id's own first, then newest first): what an adapter asks to learn whether
        an id belongs to the agent it serves (server/selves.py). One read; no touch."""
        key = harness_key.lower() if harness_key else None
        with self.db.read() as tx:
            found = tx.all(
                f"SELECT {news.COLUMNS} FROM sessions WHERE id = ? OR (CAST(? AS TEXT) IS NOT NULL AND harness_key = ?) "
                "ORDER BY id = ? DESC, created_at DESC LIMIT 100",
                (session_id, key, key, session_id),
            )
        return [Session.from_row(row) for row in found]

    # -- the edit guard (store/editclaim.py) --------------------------------------------------------
    def edit_claim(self, *, cwd: str, files: list[str], harness: str, **kw: Any) -> editclaim.Verdict:
        """May a tool call write ``files``, and a lease of each for it (:func:`.editclaim.edit_claim`)."""
        return editclaim.edit_claim(self, cwd=cwd, files=files, harness=harness, **kw)

    def edit_read(self, *, cwd: str, path: str, harness: str, **kw: Any) -> str | None:
        """A harness read tool's read baseline (:func:`.editclaim.edit_read`)."""
        return editclaim.edit_read(self, cwd=cwd, path=path, harness=harness, **kw)

    def overview(self, room: Any = None, *, window_s: float = 300.0) -> Overview:
        """Everything a live view shows (store/overview.py), of ``room`` or of every room, with
        the lease history of the last ``window_s`` seconds: one read transaction, and never a
        write (no ``last_seen`` touch, no lease sweep), so watching costs writers nothing."""
        room = None if room is None else bounds.room(room)
        with self.db.read() as tx:
            return overview.snapshot(tx, Judge(self.host, tx.now), room, window_s)

    # -- operations ---------------------------------------------------------------------------------

    def events(self, after_seq: int = 0, limit: int = 10_000) -> list[Event]:
        """Audit rows after ``after_seq`` in commit order (what the simulator's checker replays)."""
        with self.db.read() as tx:
            rows = tx.all(
                "SELECT seq, at, session_id, kind, path, payload FROM events WHERE seq > ? ORDER BY seq LIMIT ?",
                (after_seq, limit),
            )
        return [Event(seq, at, sid, kind, path, json.loads(payload)) for seq, at, sid, kind, path, payload in rows]

    def health(self) -> dict[str, Any]:
        """The engine's health, this process's host id, and the live sessions of each host
        (``None``: a session joined before hosts were recorded)."""
        health = self.db.health()
        with self.db.read() as tx:
            hosts = tx.all("SELECT host, count(*) FROM sessions WHERE left_at IS NULL GROUP BY host ORDER BY 2 DESC, 1")
        return {**health, "host": self.host, "sessions_by_host": [[h, n] for h, n in hosts]}

    def integrity_check(self) -> str:
        return self.db.integrity_check()
