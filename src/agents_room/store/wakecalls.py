"""The store's calls for hooks and wake levers (the rules are in store/wake.py): which session a
harness event belongs to, what a hook should tell, what a lever should signal and what it
said, and how a watcher waits between looks. A part of :class:`~agents_room.store.Store`,
kept in a module of its own so the facade stays readable."""

from __future__ import annotations

from typing import TYPE_CHECKING

from . import wake
from .sessions import Session
from .wake import RETRY_WINDOW_S, Offer, Pending

if TYPE_CHECKING:
    from .engine import Database
    from .mailwait import MailWaiter


class WakeCalls:
    db: Database

    def hook_session(self, harness_keys: list[str], pids: list[int] | None = None) -> Session | None:
        """The live session a harness event belongs to: by harness key (first that matches),
        else by the harness pid (nearest of ``pids`` first). None when nothing matches. (The
        hook's news path runs the same function on the bare database.)"""
        return wake.hook_session(self.db, harness_keys, pids)

    def hook_event(self, session_id: str, *, announce: bool) -> list[Pending]:
        """A hook of ``session_id`` runs, so the session is taking a turn: its ``offered``
        deliveries become ``accepted``; with ``announce``, its unannounced mail is returned
        and marked announced. A read-only probe first: nothing new costs no write lock."""
        return wake.hook_event(self.db, session_id, tell=announce)

    def wake_offers(
        self, *, session_id: str | None = None, lever: str | None = None, retry_s: float = RETRY_WINDOW_S
    ) -> list[Offer]:
        """Deliveries a wake lever should signal now (read-only)."""
        with self.db.read() as tx:
            return wake.offers(tx, session_id=session_id, lever=lever, retry_s=retry_s)

    def wake_signalled(
        self, session_id: str, message_ids: list[int], lever: str, accepted: bool | None,
        retry_s: float = RETRY_WINDOW_S,
    ) -> list[int]:
        """Record a wake signal and what the lever said: ``stored → offered`` (or a retry of
        ``offered``), then ``→ accepted`` in the same transaction when the lever confirmed it.
        Returns the ids signalled."""
        with self.db.write() as tx:
            done = wake.mark_offered(tx, session_id, message_ids, lever, retry_s)
            if accepted:
                wake.mark_accepted(tx, session_id, done)
            return done

    def wake_accepted(self, session_id: str, message_ids: list[int]) -> list[int]:
        """``offered → accepted``: the lever confirmed the harness took the signal."""
        with self.db.write() as tx:
            return wake.mark_accepted(tx, session_id, message_ids)

    def wake_undeliverable(self, session_id: str, message_ids: list[int]) -> list[int]:
        """``stored → undeliverable``: the session's wake lever does not exist here."""
        with self.db.write() as tx:
            return wake.mark_undeliverable(tx, session_id, message_ids)

    def wake_confirm(self, session_id: str) -> list[int]:
        """``offered → accepted`` for offers the session acted on since (a later tool call)."""
        with self.db.read() as tx:
            if not wake.has_offers(tx, session_id):
                return []
        with self.db.write() as tx:
            return wake.confirm_by_activity(tx, session_id)

    def mail_waiter(self, poll_s: float) -> MailWaiter:
        """What a wake watcher blocks on between looks (store/mailwait.py): told at the
        sender's commit on PostgreSQL, a poll of ``last_seq`` every ``poll_s`` on SQLite."""
        return self.db.mail_waiter(self.last_seq, poll_s)

    def last_seq(self) -> int:
        """The newest event's seq: pollers skip their query while it stays the same."""
        with self.db.read() as tx:
            return wake.last_seq(tx)
