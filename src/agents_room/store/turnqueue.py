"""The side file behind :mod:`.admission`: the turn, and the queue of processes waiting for it.

``<db>-admission`` (0600) is mmap'd and read and written as native 32- and 64-bit words;
nothing here ever opens the database, ``-wal`` or ``-shm`` files. Its locks all belong to one
open of the file (an open file description, OFD), never to the process, so several opens in
one process never drop each other's locks (as POSIX ``fcntl`` locks would), and the kernel
drops them when their process dies, however it dies:

- the turn: a ``flock`` of the whole file (cheaper to call than a byte lock, and kept apart
  from them). With nobody queued, a writer just takes it: two syscalls a turn.
- the mutex: an OFD lock on byte 0, held for microseconds around every change of the queue.
  A process killed inside leaves ``dirty`` set; the next holder rebuilds the queue from the
  records of live participants, by arrival.
- liveness: participant ``i`` owns record ``i`` while it holds an OFD lock on byte
  ``_LIVE + i``; "is it alive" is one ``F_OFD_GETLK``.

The queue is a list linked through the records, in arrival order. Its head sleeps in
``futex(FUTEX_WAIT)`` on its record's ``wake`` word; whoever releases the turn moves that
word and wakes it. Every ``CHECK_S`` of waiting, the head tries the turn again (its holder
may have died without waking anyone) and the others look at the head: a dead head is
removed, and a live one that leaves the turn free for ``GRACE_S`` (stopped) is passed over;
it re-queues at the front when it runs again.

Linux only (OFD locks, futex on a shared mapping; the futex syscall number is known here
for x86-64, arm64 and riscv64). :data:`SUPPORTED` says whether this machine qualifies.
"""

from __future__ import annotations

import ctypes
import errno
import fcntl
import mmap
import os
import struct
import sys
import threading
import time
from pathlib import Path
from typing import Literal

from .errors import StoreBusy, StoreError

SLOTS = 1024  # participants at once on one database (each open WriteAdmission is one)
CHECK_S = 0.05  # how often a waiter checks the turn and the head: the recovery bound
GRACE_S = 0.2  # a head that leaves the turn free this long is passed over

_MAGIC, _VERSION = 0x33515241, 3  # "ARQ3"
_SIZE = 64 + SLOTS * 64  # a 64-byte header, then one 64-byte record per participant
# Word indexes into the mapping's ``w`` (32-bit) and ``q`` (64-bit, names ending ``_Q``)
# views. Header, the queue's fields (changed under the mutex):
_MAGIC_W, _VERSION_W, _DIRTY, _HEAD, _TAIL, _SEQ_Q = 0, 1, 2, 3, 4, 3
# … turn fields (written only by the turn's holder): holder slot (| _BORROWED), turns taken,
# when (µs, modulo 2**32) the holder's slice began, and the lending of the slice: who lent
# it, borrows since, when the last of its turns was released.
_HOLDER, _SLICE_W, _TICKET_Q, _GRANTER, _BORROWS, _RELEASED_Q = 8, 9, 5, 12, 13, 7
_BORROWED = 1 << 31
# Record of participant i: from word 16 * i (of w) / 8 * i (of q). The futex word, state,
# links, arrival number, pid, and whether it sleeps only until a lent slice's gap ends (so a
# releaser lending its slice need not wake it).
_WAKE, _STATE, _PREV, _NEXT, _RSEQ_Q, _PID, _DEFERS = 0, 1, 2, 3, 2, 6, 7
_MUTEX, _LIVE = 0, 1 << 20  # OFD lock bytes (locks need no bytes in the file)
IDLE, WAITING, PASSED = 0, 1, 2

_FLOCK = struct.Struct("hhqqi0q")  # struct flock on 64-bit Linux: type whence start len pid
_FUTEX_NR = {"x86_64": 202, "aarch64": 98, "arm64": 98, "riscv64": 98}.get(os.uname().machine)
SUPPORTED = sys.platform == "linux" and hasattr(fcntl, "F_OFD_SETLK") and _FUTEX_NR is not None
_GRACE_NS = int(GRACE_S * 1e9)


def _byte_lock(kind: int, byte: int) -> bytes:
    return _FLOCK.pack(kind, os.SEEK_SET, byte, 1, 0)


if SUPPORTED:
    _syscall = ctypes.CDLL(None, use_errno=True).syscall
    _syscall.restype = ctypes.c_long
    # Every argument a full-width long: syscall() is variadic and reads longs.
    _NR, _WAIT_OP, _WAKE_OP = ctypes.c_long(_FUTEX_NR or 0), ctypes.c_long(0), ctypes.c_long(1)
    _ONE, _ZERO = ctypes.c_long(1), ctypes.c_long(0)
    _fcntl, _SETLK, _GETLK = fcntl.fcntl, fcntl.F_OFD_SETLK, fcntl.F_OFD_GETLK
    _MUTEX_ON, _MUTEX_OFF = _byte_lock(fcntl.F_WRLCK, _MUTEX), _byte_lock(fcntl.F_UNLCK, _MUTEX)
    _flock_call, _TURN_ON, _TURN_OFF = fcntl.flock, fcntl.LOCK_EX | fcntl.LOCK_NB, fcntl.LOCK_UN


class _Timespec(ctypes.Structure):
    _fields_ = [("tv_sec", ctypes.c_long), ("tv_nsec", ctypes.c_long)]


class TurnQueue:
    """One participant's handle on the side file. Methods named ``_…_locked`` run with the
    mutex held, after :meth:`_begin` set ``dirty``."""

    def __init__(self, path: Path, timeout_s: float, borrow_max: int, borrow_s: float, slice_s: float) -> None:
        self.borrow_max, self.borrow_ns, self.slice_us = borrow_max, int(borrow_s * 1e9), int(slice_s * 1e6)
        # Threads of one instance share its open file, whose OFD locks never conflict with
        # each other: this makes the mutex exclusive between them too.
        self._inner = threading.Lock()
        self.ticket = 0
        self.holding = False
        self.pid = os.getpid()
        self.mm: mmap.mmap | None = None
        try:
            self.fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        except OSError as exc:
            raise StoreError(f"cannot open the admission file {path}: {exc.strerror}") from exc
        try:
            if os.fstat(self.fd).st_size < _SIZE:
                os.ftruncate(self.fd, _SIZE)  # extends only: never zeroes what another wrote
            self.mm = mmap.mmap(self.fd, _SIZE)
            self.w, self.q = memoryview(self.mm).cast("I"), memoryview(self.mm).cast("Q")
            self._pin: ctypes.c_char | None = ctypes.c_char.from_buffer(self.mm)
            self.base = ctypes.addressof(self._pin)  # where the futex words are
            self.me = self._claim_slot(path)
            self.rec = 16 * self.me
            if not self._lock_mutex(time.monotonic() + timeout_s):
                raise StoreBusy(f"the mutex of {path} was not had within {timeout_s:g} s (a stopped process?)")
            try:
                w = self.w
                if w[_MAGIC_W] == 0:
                    w[_VERSION_W], w[_MAGIC_W] = _VERSION, _MAGIC
                elif w[_MAGIC_W] != _MAGIC or w[_VERSION_W] != _VERSION:
                    raise StoreError(f"{path} is not an agents-room admission file of this version; remove it")
                self._begin()
                woken = self._unlink_locked(self.me, IDLE)  # a dead participant had this slot, maybe queued
                w[self.rec + _PID] = self.pid
                w[_DIRTY] = 0
            finally:
                self._unlock_mutex()
            self._wake(woken)
        except BaseException:
            self.close()
            raise

    # -- the turn (hot paths: plain locals, since a Python call costs about what a syscall does)

    def take(self) -> bool:
        """The common case, tried first: nobody is queued and the turn is free. True when
        the turn is ours (it runs around every write transaction: kept to two syscalls)."""
        if self.w[_HEAD]:
            return False
        try:
            _flock_call(self.fd, _TURN_ON)
        except OSError as exc:
            if exc.errno not in (errno.EAGAIN, errno.EACCES):
                raise
            return False
        self.hold(False)
        return True

    def enter(self, deadline: float) -> bool:
        """Take the turn (borrowing it if we may), else queue for it and wait; False when
        ``deadline`` passes first."""
        head = self.w[_HEAD]
        if head == 0 or self._may_borrow():
            try:
                _flock_call(self.fd, _TURN_ON)
                self.hold(head != 0)
                return True
            except OSError as exc:
                if exc.errno not in (errno.EAGAIN, errno.EACCES):
                    raise
        if not self._lock_mutex(deadline):
            return False
        try:
            self._begin()
            if self.w[self.rec + _STATE] != WAITING:  # (else queued from an attempt that gave up)
                self._append_locked(front=False)
            self.w[_DIRTY] = 0
        finally:
            self._unlock_mutex()
        return self._wait(deadline)

    def hold(self, borrowed: bool) -> None:
        """We have the turn: count it, and say who holds it (only the holder writes these)."""
        w = self.w
        self.ticket = self.q[_TICKET_Q] = self.q[_TICKET_Q] + 1
        if borrowed:
            w[_HOLDER] = self.me | _BORROWED
            w[_BORROWS] += 1
        else:
            w[_HOLDER] = self.me
            w[_GRANTER] = 0  # a new slice: the last one's lending is over
            w[_SLICE_W] = (time.monotonic_ns() // 1000) & 0xFFFFFFFF
        self.holding = True

    def leave(self) -> None:
        w = self.w
        if w[_HEAD]:  # lend the rest of our slice to ourselves: the head defers to it
            if not w[_HOLDER] & _BORROWED:
                w[_GRANTER], w[_BORROWS] = self.me, 0
            self.q[_RELEASED_Q] = time.monotonic_ns()
        w[_HOLDER] = 0
        self.holding = False
        _flock_call(self.fd, _TURN_OFF)
        # Read after the release (a kernel lock operation, so ordered after it): anyone who
        # queued and then failed to take the turn from us is seen here. A head deferring to
        # our open slice wakes on its own when the gap ends: no wake-up per borrowed turn.
        if (head := w[_HEAD]) and not (w[16 * head + _DEFERS] and self._may_borrow()):
            self._wake(head)

    def abandon(self) -> None:
        """After an exception part-way through ``enter``: let go of the turn if we took it
        (unlocking what we do not hold is a no-op) and leave the queue, best effort."""
        if self.holding:
            self.leave()
        else:
            _flock_call(self.fd, _TURN_OFF)
            self._give_up()

    def _may_borrow(self) -> bool:
        return self.w[_GRANTER] == self.me and self._lent_until() > 0

    def _lent_until(self) -> int:
        """While the last holder's slice is open (it began less than ``slice_s`` ago, it has
        borrowed fewer than ``borrow_max`` turns, and its last release was less than
        ``borrow_s`` ago), the monotonic ns when its lending ends; else 0. Read without the
        mutex: a hint, never a lock (flock alone makes turns exclusive)."""
        w = self.w
        if not w[_GRANTER] or w[_BORROWS] >= self.borrow_max:
            return 0
        now = time.monotonic_ns()
        if ((now // 1000 - w[_SLICE_W]) & 0xFFFFFFFF) >= self.slice_us:
            return 0
        until = self.q[_RELEASED_Q] + self.borrow_ns
        return until if now < until else 0

    def _wait(self, deadline: float) -> bool:
        w, rec, me = self.w, self.rec, self.me
        check_at = time.monotonic() + CHECK_S
        watch: tuple[int, int] | None = None  # (head, since when it has left the turn free)
        while True:
            seen = w[rec + _WAKE]
            if w[rec + _STATE] != WAITING:  # passed over while we were away: back to the front
                if not self._change(deadline, self._append_locked, True):
                    return self._give_up()
                continue
            lent_until = 0
            if w[_HEAD] == me and w[_GRANTER] != me:
                lent_until = self._lent_until()
            w[rec + _DEFERS] = 1 if lent_until else 0  # set before every sleep: never stale
            if w[_HEAD] == me and not lent_until:
                try:
                    _flock_call(self.fd, _TURN_ON)
                except OSError as exc:
                    if exc.errno not in (errno.EAGAIN, errno.EACCES):
                        raise
                else:
                    if not self._change(deadline + GRACE_S, self._unlink_locked, me, IDLE):  # the new head sleeps on
                        _flock_call(self.fd, _TURN_OFF)  # the mutex's holder is stopped: give up
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
            self._futex_wait(rec + _WAKE, seen, max(until - now, 0.0))

    def _check(self, deadline: float, watch: tuple[int, int] | None) -> tuple[int, int] | None:
        """The periodic look at the head: remove it if dead; pass it over if it has left
        the turn free for GRACE_S (as seen by this waiter). Returns what to watch next."""
        woken = 0
        if not self._lock_mutex(deadline):
            return watch
        try:
            self._begin()
            head = self.w[_HEAD]
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
            self.w[_DIRTY] = 0
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
                self.w[_DIRTY] = 0
            finally:
                self._unlock_mutex()
            self._wake(woken)  # the new head: the turn may be free
        return False

    def _change(self, deadline: float, change, *args) -> bool:  # type: ignore[no-untyped-def]
        if not self._lock_mutex(deadline):
            return False
        try:
            self._begin()
            change(*args)
            self.w[_DIRTY] = 0
        finally:
            self._unlock_mutex()
        return True

    def places(self) -> list[tuple[int, Literal["holding", "borrowing", "waiting"]]]:
        w = self.w
        if not self._lock_mutex(time.monotonic() + 1.0):
            raise StoreBusy("the admission queue's mutex has been held for a second (a stopped process?)")
        try:
            holder = w[_HOLDER]
            places: list[tuple[int, Literal["holding", "borrowing", "waiting"]]] = []
            if holder & ~_BORROWED and (self.holding or not self._turn_free()):
                places.append((w[16 * (holder & ~_BORROWED) + _PID], "borrowing" if holder & _BORROWED else "holding"))
            self._begin()
            slot = w[_HEAD]
            while slot and len(places) <= SLOTS:
                places.append((w[16 * slot + _PID], "waiting"))
                slot = w[16 * slot + _NEXT]
            w[_DIRTY] = 0
            return places
        finally:
            self._unlock_mutex()

    # -- changes of the queue (mutex held, ``dirty`` set) -------------------------------------

    def _begin(self) -> None:
        """Rebuild if a process died mid-change; then mark a change in progress."""
        w = self.w
        if w[_DIRTY] or (w[_HEAD] == 0) != (w[_TAIL] == 0):
            self._rebuild_locked()
        w[_DIRTY] = 1

    def _append_locked(self, front: bool) -> None:
        """Queue this participant at the tail, or (passed over: it was first) behind the head."""
        w, me, rec = self.w, self.me, self.rec
        head, tail = w[_HEAD], w[_TAIL]
        prev = head if front else tail
        nxt = w[16 * prev + _NEXT] if prev else 0
        self.q[_SEQ_Q] += 1
        self.q[8 * me + _RSEQ_Q] = self.q[_SEQ_Q]
        w[rec + _PREV], w[rec + _NEXT], w[rec + _DEFERS], w[rec + _STATE] = prev, nxt, 0, WAITING
        if prev:
            w[16 * prev + _NEXT] = me
        else:
            w[_HEAD] = me
        if nxt:
            w[16 * nxt + _PREV] = me
        else:
            w[_TAIL] = me

    def _unlink_locked(self, slot: int, state: int) -> int:
        """Take ``slot`` out of the queue (if in it) and set its state. Returns the new head
        if ``slot`` was the head (0 otherwise), for the caller to wake after the unlock."""
        w, at = self.w, 16 * slot
        if w[at + _STATE] != WAITING:
            w[at + _STATE] = state
            return 0
        prev, nxt = w[at + _PREV], w[at + _NEXT]
        if prev:
            w[16 * prev + _NEXT] = nxt
        else:
            w[_HEAD] = nxt
        if nxt:
            w[16 * nxt + _PREV] = prev
        else:
            w[_TAIL] = prev
        w[at + _STATE], w[at + _PREV], w[at + _NEXT], w[at + _DEFERS] = state, 0, 0, 0
        return nxt if prev == 0 else 0

    def _rebuild_locked(self) -> None:
        """A process died mid-change: relink the waiting records of live participants by
        arrival. Runs rarely; reads every record."""
        w, q = self.w, self.q
        queued = []
        for slot in range(1, SLOTS + 1):
            state = w[16 * slot + _STATE]
            if state == WAITING and self._alive(slot):
                queued.append((q[8 * slot + _RSEQ_Q], slot))
            elif state != IDLE and not self._alive(slot):
                w[16 * slot + _STATE] = IDLE
        order = [slot for _, slot in sorted(queued)]
        for i, slot in enumerate(order):
            w[16 * slot + _PREV] = order[i - 1] if i else 0
            w[16 * slot + _NEXT] = order[i + 1] if i + 1 < len(order) else 0
        q[_SEQ_Q] = max([q[_SEQ_Q]] + [seq for seq, _ in queued])
        w[_HEAD], w[_TAIL] = (order[0], order[-1]) if order else (0, 0)

    # -- primitives --------------------------------------------------------------------------

    def _claim_slot(self, path: Path) -> int:
        """A free participant slot, probing from one that depends on the pid (so that
        processes rarely probe the same ones). Held until close or death."""
        start = self.pid % SLOTS
        for i in range(SLOTS):
            slot = (start + i) % SLOTS + 1
            try:
                _fcntl(self.fd, _SETLK, _byte_lock(fcntl.F_WRLCK, _LIVE + slot))
                return slot
            except OSError as exc:
                if exc.errno not in (errno.EAGAIN, errno.EACCES):
                    raise
        raise StoreError(f"all {SLOTS} places in {path} are taken by open writers")

    def _alive(self, slot: int) -> bool:
        if slot == self.me:
            return True  # our own lock never conflicts with us
        probe = _fcntl(self.fd, _GETLK, _byte_lock(fcntl.F_WRLCK, _LIVE + slot))
        return _FLOCK.unpack(probe)[0] != fcntl.F_UNLCK

    def _turn_free(self) -> bool:
        """Whether nobody holds the turn, by the holder's word (flock has no query): a
        holder that died has let go of it, whatever its word says."""
        holder = self.w[_HOLDER] & ~_BORROWED
        return holder == 0 or not self._alive(holder)

    def _lock_mutex(self, deadline: float) -> bool:
        """Take the mutex, or give up (False) when ``deadline`` passes: a holder stopped
        inside its microseconds must not stall a bounded wait."""
        if not self._inner.acquire(timeout=max(deadline - time.monotonic(), 0.0)):
            return False
        pause = 0.0
        while True:
            try:
                _fcntl(self.fd, _SETLK, _MUTEX_ON)
                return True
            except OSError as exc:
                if exc.errno not in (errno.EAGAIN, errno.EACCES):
                    self._inner.release()
                    raise
            if time.monotonic() >= deadline:
                self._inner.release()
                return False
            time.sleep(pause)
            pause = min(pause * 2 or 20e-6, 1e-3)

    def _unlock_mutex(self) -> None:
        _fcntl(self.fd, _SETLK, _MUTEX_OFF)
        self._inner.release()

    def _futex_wait(self, word: int, seen: int, seconds: float) -> None:
        """Sleep until woken, ``seconds`` pass, or not at all if the word is no longer ``seen``."""
        ts = _Timespec(int(seconds), int((seconds % 1) * 1e9))
        _syscall(_NR, ctypes.c_void_p(self.base + 4 * word), _WAIT_OP, ctypes.c_long(seen), ctypes.byref(ts),
                 None, _ZERO)

    def _wake(self, slot: int) -> None:
        """Wake ``slot``'s owner. The word moves first, so an owner that read it before and
        is only now going to sleep does not sleep through this."""
        if slot:
            word = 16 * slot + _WAKE
            self.w[word] = (self.w[word] + 1) & 0xFFFFFFFF
            _syscall(_NR, ctypes.c_void_p(self.base + 4 * word), _WAKE_OP, _ONE, None, None, _ZERO)

    def close(self) -> None:
        if self.mm is not None:
            for view in (getattr(self, "w", None), getattr(self, "q", None)):
                if view is not None:
                    view.release()
            self._pin = None
            self.mm.close()
            self.mm = None
        if getattr(self, "fd", -1) >= 0:
            os.close(self.fd)  # drops this description's locks, and no one else's
            self.fd = -1
