"""The turn of :mod:`.admission`, and the queue of processes waiting for it, in the side file
``<db>-admission`` (:mod:`.sidefile`: its layout, locks, futex words and the queue's list).

- the turn: a ``flock`` of the whole file (cheaper to call than a byte lock, and kept apart
  from them). With nobody queued, a writer just takes it: two syscalls a turn.
- the queue: its head sleeps in ``futex(FUTEX_WAIT)`` on its record's ``wake`` word;
  whoever releases the turn moves that word and wakes it. Every ``CHECK_S`` of waiting, the
  head tries the turn again (its holder may have died without waking anyone) and the others
  look at the head: a dead head is removed, and a live one that leaves the turn free for
  ``GRACE_S`` (stopped) is passed over; it re-queues at the front when it runs again.
- the slice: a holder that releases the turn while others queue lends the rest of its slice
  to itself, so it may take the turn back (borrow) a few times before the head's turn. Its
  length is set when it opens, from how many wait then: ``round_s`` shared among them,
  within ``[slice_min_s, slice_s]`` (few waiters: long slices, few hand-overs; many: a round
  of the queue stays about ``round_s``). It lends only if its last turn began within
  ``borrow_s`` of its release before: a writer in a loop comes back that soon, while an MCP
  server between its client's calls would not, and the head would sleep out each lending.

Linux only: :data:`SUPPORTED` (from :mod:`.sidefile`) says whether this machine qualifies.
"""

from __future__ import annotations

import errno
import time

from ..errors import StoreBusy
from .sidefile import (
    BORROWED,
    BORROWS,
    DEFERS,
    DIRTY,
    GRANTER,
    HEAD,
    HOLDER,
    IDLE,
    NEXT,
    PASSED,
    PID,
    RELEASED_Q,
    SLICE_US,
    SLICE_W,
    SLOTS,
    STATE,
    SUPPORTED,
    TICKET_Q,
    WAITERS,
    WAITING,
    WAKE,
    SideFile,
)

TYPE_CHECKING = False
if TYPE_CHECKING:  # annotations only: the hook's news path imports this module
    from typing import Literal

if SUPPORTED:
    from .sidefile import TURN_OFF, TURN_ON, flock_call

__all__ = ["CHECK_S", "GRACE_S", "SUPPORTED", "TurnQueue"]

CHECK_S = 0.05  # how often a waiter checks the turn and the head: the recovery bound
GRACE_S = 0.2  # a head that leaves the turn free this long is passed over
_GRACE_NS = int(GRACE_S * 1e9)


class TurnQueue(SideFile):
    """One participant's handle on the turn. Methods named ``_…_locked`` (of
    :class:`.sidefile.SideFile`) run with the mutex held, after ``_begin`` set ``dirty``."""

    def __init__(self, path: str, timeout_s: float, borrow_max: int, borrow_s: float, slice_s: float,
                 slice_min_s: float, round_s: float) -> None:
        self.borrow_max, self.borrow_ns, self.slice_us = borrow_max, int(borrow_s * 1e9), int(slice_s * 1e6)
        self.slice_min_us, self.round_us = min(int(slice_min_s * 1e6), self.slice_us), int(round_s * 1e6)
        self.ticket = 0
        self.holding = False
        # Whether we lend our slice to ourselves when we release (see ``leave``): we do when
        # our last turn began within ``borrow_s`` of our release before it, so we are likely
        # to come back that soon again (a writer in a loop), not when we came back later (a
        # server between its client's calls: the head would sleep out the lending for nothing).
        self.lends = True
        self.left_ns = 0
        super().__init__(path, timeout_s)

    # -- the turn (hot paths: plain locals, since a Python call costs about what a syscall does)

    def take(self) -> bool:
        """The common case, tried first: nobody is queued and the turn is free. True when
        the turn is ours (it runs around every write transaction: kept to two syscalls)."""
        if self.left_ns:
            self.lends = time.monotonic_ns() - self.left_ns < self.borrow_ns
        if self.w[HEAD]:
            return False
        try:
            flock_call(self.fd, TURN_ON)
        except OSError as exc:
            if exc.errno not in (errno.EAGAIN, errno.EACCES):
                raise
            return False
        self.hold(False)
        return True

    def enter(self, deadline: float) -> bool:
        """Take the turn (borrowing it if we may), else queue for it and wait; False when
        ``deadline`` passes first."""
        head = self.w[HEAD]
        if head == 0 or self._may_borrow():
            try:
                flock_call(self.fd, TURN_ON)
                self.hold(head != 0)
                return True
            except OSError as exc:
                if exc.errno not in (errno.EAGAIN, errno.EACCES):
                    raise
        if not self._lock_mutex(deadline):
            return False
        try:
            self._begin()
            if self.w[self.rec + STATE] != WAITING:  # (else queued from an attempt that gave up)
                self._append_locked(front=False)
            self.w[DIRTY] = 0
        finally:
            self._unlock_mutex()
        return self._wait(deadline)

    def hold(self, borrowed: bool) -> None:
        """We have the turn: count it, and say who holds it (only the holder writes these)."""
        w = self.w
        self.ticket = self.q[TICKET_Q] = self.q[TICKET_Q] + 1
        if borrowed:
            w[HOLDER] = self.me | BORROWED
            w[BORROWS] += 1
        else:
            w[HOLDER] = self.me
            w[GRANTER] = 0  # a new slice: the last one's lending is over
            w[SLICE_W] = (time.monotonic_ns() // 1000) & 0xFFFFFFFF
            waiters = w[WAITERS]
            w[self.rec + SLICE_US] = (max(self.slice_min_us, min(self.slice_us, self.round_us // waiters))
                                       if waiters else self.slice_us)
        self.holding = True

    def leave(self) -> None:
        w = self.w
        self.left_ns = now = time.monotonic_ns()
        if w[HEAD]:
            if self.lends:  # lend the rest of our slice to ourselves: the head defers to it
                if not w[HOLDER] & BORROWED:
                    w[GRANTER], w[BORROWS] = self.me, 0
                self.q[RELEASED_Q] = now
            else:  # we will not be back within borrow_s: the head has the turn at once
                w[GRANTER] = 0
        w[HOLDER] = 0
        self.holding = False
        flock_call(self.fd, TURN_OFF)
        # Read after the release (a kernel lock operation, so ordered after it): anyone who
        # queued and then failed to take the turn from us is seen here. A head deferring to
        # our open slice wakes on its own when the gap ends: no wake-up per borrowed turn.
        if (head := w[HEAD]) and not (w[16 * head + DEFERS] and self._may_borrow()):
            self._wake(head)

    def abandon(self) -> None:
        """After an exception part-way through ``enter``: let go of the turn if we took it
        (unlocking what we do not hold is a no-op) and leave the queue, best effort."""
        if self.holding:
            self.leave()
        else:
            flock_call(self.fd, TURN_OFF)
            self._give_up()

    def _may_borrow(self) -> bool:
        return self.w[GRANTER] == self.me and self._lent_until() > 0

    def _lent_until(self) -> int:
        """While the last holder's slice is open (it began less than its length ago, it has
        borrowed fewer than ``borrow_max`` turns, and its last release was less than
        ``borrow_s`` ago), the monotonic ns when its lending ends; else 0. Read without the
        mutex: a hint, never a lock (flock alone makes turns exclusive)."""
        w = self.w
        granter = w[GRANTER]
        if not granter or w[BORROWS] >= self.borrow_max:
            return 0
        now = time.monotonic_ns()
        if ((now // 1000 - w[SLICE_W]) & 0xFFFFFFFF) >= (w[16 * granter + SLICE_US] or self.slice_us):
            return 0
        until = self.q[RELEASED_Q] + self.borrow_ns
        return until if now < until else 0

    def _wait(self, deadline: float) -> bool:
        w, rec, me = self.w, self.rec, self.me
        check_at = time.monotonic() + CHECK_S
        watch: tuple[int, int] | None = None  # (head, since when it has left the turn free)
        while True:
            seen = w[rec + WAKE]
            if w[rec + STATE] != WAITING:  # passed over while we were away: back to the front
                if not self._change(deadline, self._append_locked, True):
                    return self._give_up()
                continue
            lent_until = 0
            if w[HEAD] == me and w[GRANTER] != me:
                lent_until = self._lent_until()
            w[rec + DEFERS] = 1 if lent_until else 0  # set before every sleep: never stale
            if w[HEAD] == me and not lent_until:
                try:
                    flock_call(self.fd, TURN_ON)
                except OSError as exc:
                    if exc.errno not in (errno.EAGAIN, errno.EACCES):
                        raise
                else:
                    if not self._change(deadline + GRACE_S, self._unlink_locked, me, IDLE):  # the new head sleeps on
                        flock_call(self.fd, TURN_OFF)  # the mutex's holder is stopped: give up
                        return False
                    self.hold(False)
                    return True
            now = time.monotonic()
            if now >= deadline:
                return self._give_up()
            if now >= check_at:
                watch = self._check(deadline, watch)
                check_at = now + CHECK_S
                continue
            until = min(deadline, check_at)
            if lent_until:  # the releaser may come back for its slice: not before its lending ends
                until = min(until, now + (lent_until - time.monotonic_ns()) / 1e9)
            self._futex_wait(rec + WAKE, seen, max(until - now, 0.0))

    def _check(self, deadline: float, watch: tuple[int, int] | None) -> tuple[int, int] | None:
        """The periodic look at the head: remove it if dead; pass it over if it has left
        the turn free for GRACE_S (as seen by this waiter). Returns what to watch next."""
        woken = 0
        if not self._lock_mutex(deadline):
            return watch
        try:
            self._begin()
            head = self.w[HEAD]
            if head and head != self.me:
                if not self._alive(head):
                    woken, watch = self._unlink_locked(head, IDLE), None
                elif self._turn_free():
                    now = time.monotonic_ns()
                    if watch is None or watch[0] != head:
                        watch = (head, now)
                    elif now - watch[1] >= _GRACE_NS:
                        woken, watch = self._unlink_locked(head, PASSED), None
                else:
                    watch = None
            self.w[DIRTY] = 0
        finally:
            self._unlock_mutex()
        if woken != self.me:
            self._wake(woken)
        return watch

    def _give_up(self) -> bool:
        """The deadline passed: leave the queue. If the mutex is not had either (its holder
        is stopped), the record stays queued: passed over in time, or resumed by the next
        ``enter``."""
        if self._lock_mutex(time.monotonic() + GRACE_S):
            try:
                self._begin()
                woken = self._unlink_locked(self.me, IDLE)
                self.w[DIRTY] = 0
            finally:
                self._unlock_mutex()
            self._wake(woken)  # the new head: the turn may be free
        return False

    def places(self) -> list[tuple[int, Literal["holding", "borrowing", "waiting"]]]:
        w = self.w
        if not self._lock_mutex(time.monotonic() + 1.0):
            raise StoreBusy("the admission queue's mutex has been held for a second (a stopped process?)")
        try:
            holder = w[HOLDER]
            places: list[tuple[int, Literal["holding", "borrowing", "waiting"]]] = []
            if holder & ~BORROWED and (self.holding or not self._turn_free()):
                places.append((w[16 * (holder & ~BORROWED) + PID], "borrowing" if holder & BORROWED else "holding"))
            self._begin()
            slot = w[HEAD]
            while slot and len(places) <= SLOTS:
                places.append((w[16 * slot + PID], "waiting"))
                slot = w[16 * slot + NEXT]
            w[DIRTY] = 0
            return places
        finally:
            self._unlock_mutex()
