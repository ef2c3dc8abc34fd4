"""Waiting for a session's mail: what the wake watchers (agents_room/harnesses/wake.py, the Claude Code
channel) and ``agents-room hook --wait`` block on between their looks at the store.

``waiter.watch(session_id)`` names the session; ``waiter.wait(timeout)`` returns True as soon
as something may have arrived for it (then the caller looks), False when ``timeout`` passed
quietly. The first wait after ``watch`` is True at once: mail sent before the watch began is
found by that first look.

Each engine's ``Database.mail_waiter`` gives its own (the engine contract, :mod:`.engine`):

- PostgreSQL: pushed. ``msg_send`` NOTIFYs each recipient's channel in its own transaction, so
  the waiter, which LISTENs on its own connection, wakes at the sender's commit, on any host;
  no query runs while nothing happens (:class:`.postgres.listen.Listener`).
- SQLite: polled (:class:`SeqPoller`): the newest event's seq (one b-tree probe; every change
  writes an event) every ``poll_s``; True when it moved.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Protocol


class MailWaiter(Protocol):
    pushed: bool  # True: told at commit; False: polls

    def watch(self, session_id: str | None) -> None: ...

    def wait(self, timeout: float) -> bool: ...

    def close(self) -> None: ...


class SeqPoller:
    """Polls the newest event's seq (SQLite, or any engine without push): ``last_seq`` is the
    store's (:meth:`~agents_room.store.Store.last_seq`)."""

    pushed = False

    def __init__(self, last_seq: Callable[[], int], poll_s: float) -> None:
        self.last_seq, self.poll_s = last_seq, poll_s
        self.seen = -1
        self.looked_at = float("-inf")  # one look every poll_s, however the waits are cut

    def watch(self, session_id: str | None) -> None:
        """Any change moves the seq: the session only matters to the caller's look."""

    def wait(self, timeout: float) -> bool:
        deadline = time.monotonic() + timeout
        while True:
            early = self.looked_at + self.poll_s - time.monotonic()
            if early > 0:
                if deadline - time.monotonic() < early:
                    time.sleep(max(0.0, deadline - time.monotonic()))
                    return False
                time.sleep(early)
            self.looked_at = time.monotonic()
            seq = self.last_seq()
            if seq != self.seen:
                # The seq from before the caller's look: its own writes make one more look run
                # (and find nothing), but nothing another process writes meanwhile is missed.
                self.seen = seq
                return True
            if deadline - time.monotonic() <= 0:
                return False

    def close(self) -> None:
        pass

