"""The side file ``<db>-admission`` behind :mod:`.turnqueue`: its layout, its locks, its
futex words, and the queue kept in it.

The file (0600) is mmap'd and read and written as native 32- and 64-bit words; nothing here
ever opens the database, ``-wal`` or ``-shm`` files. Its locks all belong to one open of the
file (an open file description, OFD), never to the process, so several opens in one process
never drop each other's locks (as POSIX ``fcntl`` locks would), and the kernel drops them
when their process dies, however it dies:

- the mutex: an OFD lock on byte 0, held for microseconds around every change of the queue.
  A process killed inside leaves ``dirty`` set; the next holder rebuilds the queue from the
  records of live participants, by arrival.
- liveness: participant ``i`` owns record ``i`` while it holds an OFD lock on byte
  ``_LIVE + i``; "is it alive" is one ``F_OFD_GETLK``.

The queue is a list linked through the records, in arrival order; :class:`SideFile`'s
``_…_locked`` methods change it (mutex held, after :meth:`SideFile._begin` set ``dirty``).
A participant sleeps in ``futex(FUTEX_WAIT)`` on its record's ``wake`` word; :meth:`SideFile._wake`
moves that word and wakes it.

Linux only (OFD locks, futex on a shared mapping; the futex syscall number is known here
for x86-64, arm64 and riscv64). :data:`SUPPORTED` says whether this machine qualifies.
"""

from __future__ import annotations

import errno
import fcntl
import functools
import mmap
import os
import struct
import sys
import threading
import time

from ..errors import StoreBusy, StoreError

SLOTS = 1024  # participants at once on one database (each open WriteAdmission is one)

_MAGIC, _VERSION = 0x33515241, 3  # "ARQ3"
_SIZE = 64 + SLOTS * 64  # a 64-byte header, then one 64-byte record per participant
# Word indexes into the mapping's ``w`` (32-bit) and ``q`` (64-bit, names ending ``_Q``)
# views. Header, the queue's fields (changed under the mutex):
# ``WAITERS`` counts the queue: a hint for sizing slices, which processes of an older
# agents-room (same layout, the word unused) do not keep; it is reset whenever the queue
# empties, so a count they put off only mis-sizes slices (within their bounds) meanwhile.
_MAGIC_W, _VERSION_W, DIRTY, HEAD, _TAIL, WAITERS, _SEQ_Q = 0, 1, 2, 3, 4, 5, 3
# … turn fields (written only by the turn's holder): holder slot (| BORROWED), turns taken,
# when (µs, modulo 2**32) the holder's slice began, and the lending of the slice: who lent
# it, borrows since, when the last of its turns was released.
HOLDER, SLICE_W, TICKET_Q, GRANTER, BORROWS, RELEASED_Q = 8, 9, 5, 12, 13, 7
BORROWED = 1 << 31
# Record of participant i: from word 16 * i (of w) / 8 * i (of q). The futex word, state,
# links, arrival number, pid, and whether it sleeps only until a lent slice's gap ends (so a
# releaser lending its slice need not wake it); and, written by the participant while it
# holds the turn, the length (µs) of the slice it opened last (0 from an older agents-room:
# the reader's own longest slice then).
WAKE, STATE, _PREV, NEXT, _RSEQ_Q, PID, DEFERS, SLICE_US = 0, 1, 2, 3, 2, 6, 7, 8
_MUTEX, _LIVE = 0, 1 << 20  # OFD lock bytes (locks need no bytes in the file)
IDLE, WAITING, PASSED = 0, 1, 2

_FLOCK = struct.Struct("hhqqi0q")  # struct flock on 64-bit Linux: type whence start len pid
_FUTEX_NR = {"x86_64": 202, "aarch64": 98, "arm64": 98, "riscv64": 98}.get(os.uname().machine)
SUPPORTED = sys.platform == "linux" and hasattr(fcntl, "F_OFD_SETLK") and _FUTEX_NR is not None


def _byte_lock(kind: int, byte: int) -> bytes:
    return _FLOCK.pack(kind, os.SEEK_SET, byte, 1, 0)


if SUPPORTED:
    _fcntl, _SETLK, _GETLK = fcntl.fcntl, fcntl.F_OFD_SETLK, fcntl.F_OFD_GETLK
    _MUTEX_ON, _MUTEX_OFF = _byte_lock(fcntl.F_WRLCK, _MUTEX), _byte_lock(fcntl.F_UNLCK, _MUTEX)
    flock_call, TURN_ON, TURN_OFF = fcntl.flock, fcntl.LOCK_EX | fcntl.LOCK_NB, fcntl.LOCK_UN


class _Futex:
    """The futex syscall, through ``ctypes``. Made at a process's first wait or wake
    (:func:`_futex`), not at import: an uncontended turn needs neither, and importing ctypes
    would cost the hook's news path (which opens the store to write once) milliseconds."""

    def __init__(self) -> None:
        import ctypes

        class Timespec(ctypes.Structure):
            _fields_ = [("tv_sec", ctypes.c_long), ("tv_nsec", ctypes.c_long)]

        self.c = ctypes
        self.timespec = Timespec
        self.syscall = ctypes.CDLL(None, use_errno=True).syscall
        self.syscall.restype = ctypes.c_long
        # Every argument a full-width long: syscall() is variadic and reads longs.
        self.nr, self.wait_op, self.wake_op = ctypes.c_long(_FUTEX_NR or 0), ctypes.c_long(0), ctypes.c_long(1)
        self.one, self.zero = ctypes.c_long(1), ctypes.c_long(0)

    def pin(self, mm: mmap.mmap) -> tuple[object, int]:
        """A ctypes view of the mapping (an export, so the mapping stays where it is while it
        lives) and the mapping's address, where the futex words are."""
        pin = self.c.c_char.from_buffer(mm)
        return pin, self.c.addressof(pin)

    def wait(self, address: int, seen: int, seconds: float) -> None:
        c = self.c
        ts = self.timespec(int(seconds), int((seconds % 1) * 1e9))
        self.syscall(self.nr, c.c_void_p(address), self.wait_op, c.c_long(seen), c.byref(ts), None, self.zero)

    def wake(self, address: int) -> None:
        self.syscall(self.nr, self.c.c_void_p(address), self.wake_op, self.one, None, None, self.zero)


@functools.cache
def _futex() -> _Futex:
    """The process's :class:`_Futex`, made at the first call."""
    return _Futex()


class LayoutMismatch(StoreError):
    """The side file is laid out by another version of agents-room (servers of both may run
    during an upgrade): this process must not queue in it."""


class SideFile:
    """One participant's open of the side file: its slot, the mutex, the queue's changes,
    the futex words. :class:`.turnqueue.TurnQueue` builds the turn on it."""

    def __init__(self, path: str, timeout_s: float) -> None:
        # Threads of one instance share its open file, whose OFD locks never conflict with
        # each other: this makes the mutex exclusive between them too.
        self._inner = threading.Lock()
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
            self._pin: object | None = None  # see _address
            self.base = 0
            self.me = self._claim_slot(path)
            self.rec = 16 * self.me
            if not self._lock_mutex(time.monotonic() + timeout_s):
                raise StoreBusy(f"the mutex of {path} was not had within {timeout_s:g} s (a stopped process?)")
            try:
                w = self.w
                if w[_MAGIC_W] == 0:
                    w[_VERSION_W], w[_MAGIC_W] = _VERSION, _MAGIC
                elif w[_MAGIC_W] != _MAGIC or w[_VERSION_W] != _VERSION:
                    raise LayoutMismatch(f"{path} is an admission file of another layout (version "
                                         f"{w[_VERSION_W]}, magic {w[_MAGIC_W]:#x}; this agents-room uses {_VERSION})")
                self._begin()
                woken = self._unlink_locked(self.me, IDLE)  # a dead participant had this slot, maybe queued
                w[self.rec + PID] = self.pid
                w[DIRTY] = 0
            finally:
                self._unlock_mutex()
            self._wake(woken)
        except BaseException:
            self.close()
            raise

    # -- changes of the queue (mutex held, ``dirty`` set) -------------------------------------

    def _begin(self) -> None:
        """Rebuild if a process died mid-change; then mark a change in progress."""
        w = self.w
        if w[DIRTY] or (w[HEAD] == 0) != (w[_TAIL] == 0):
            self._rebuild_locked()
        w[DIRTY] = 1

    def _append_locked(self, front: bool) -> None:
        """Queue this participant at the tail, or (passed over: it was first) behind the head."""
        w, me, rec = self.w, self.me, self.rec
        head, tail = w[HEAD], w[_TAIL]
        prev = head if front else tail
        nxt = w[16 * prev + NEXT] if prev else 0
        self.q[_SEQ_Q] += 1
        self.q[8 * me + _RSEQ_Q] = self.q[_SEQ_Q]
        w[rec + _PREV], w[rec + NEXT], w[rec + DEFERS], w[rec + STATE] = prev, nxt, 0, WAITING
        if prev:
            w[16 * prev + NEXT] = me
        else:
            w[HEAD] = me
        if nxt:
            w[16 * nxt + _PREV] = me
        else:
            w[_TAIL] = me
        w[WAITERS] = w[WAITERS] + 1 if head else 1

    def _unlink_locked(self, slot: int, state: int) -> int:
        """Take ``slot`` out of the queue (if in it) and set its state. Returns the new head
        if ``slot`` was the head (0 otherwise), for the caller to wake after the unlock."""
        w, at = self.w, 16 * slot
        if w[at + STATE] != WAITING:
            w[at + STATE] = state
            return 0
        prev, nxt = w[at + _PREV], w[at + NEXT]
        if prev:
            w[16 * prev + NEXT] = nxt
        else:
            w[HEAD] = nxt
        if nxt:
            w[16 * nxt + _PREV] = prev
        else:
            w[_TAIL] = prev
        w[at + STATE], w[at + _PREV], w[at + NEXT], w[at + DEFERS] = state, 0, 0, 0
        w[WAITERS] = max(w[WAITERS] - 1, 0) if w[HEAD] else 0
        return nxt if prev == 0 else 0

    def _rebuild_locked(self) -> None:
        """A process died mid-change: relink the waiting records of live participants by
        arrival. Runs rarely; reads every record."""
        w, q = self.w, self.q
        queued = []
        for slot in range(1, SLOTS + 1):
            state = w[16 * slot + STATE]
            if state == WAITING and self._alive(slot):
                queued.append((q[8 * slot + _RSEQ_Q], slot))
            elif state != IDLE and not self._alive(slot):
                w[16 * slot + STATE] = IDLE
        order = [slot for _, slot in sorted(queued)]
        for i, slot in enumerate(order):
            w[16 * slot + _PREV] = order[i - 1] if i else 0
            w[16 * slot + NEXT] = order[i + 1] if i + 1 < len(order) else 0
        q[_SEQ_Q] = max([q[_SEQ_Q]] + [seq for seq, _ in queued])
        w[HEAD], w[_TAIL] = (order[0], order[-1]) if order else (0, 0)
        w[WAITERS] = len(order)

    # -- primitives --------------------------------------------------------------------------

    def _claim_slot(self, path: str) -> int:
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
        holder = self.w[HOLDER] & ~BORROWED
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

    def _change(self, deadline: float, change, *args) -> bool:  # type: ignore[no-untyped-def]
        if not self._lock_mutex(deadline):
            return False
        try:
            self._begin()
            change(*args)
            self.w[DIRTY] = 0
        finally:
            self._unlock_mutex()
        return True

    def _address(self, word: int) -> int:
        """Where futex word ``word`` is: the mapping's address (pinned at the first wait or
        wake, see :class:`_Futex`) plus its offset."""
        if not self.base:
            self._pin, self.base = _futex().pin(self.mm)
        return self.base + 4 * word

    def _futex_wait(self, word: int, seen: int, seconds: float) -> None:
        """Sleep until woken, ``seconds`` pass, or not at all if the word is no longer ``seen``."""
        _futex().wait(self._address(word), seen, seconds)

    def _wake(self, slot: int) -> None:
        """Wake ``slot``'s owner. The word moves first, so an owner that read it before and
        is only now going to sleep does not sleep through this."""
        if slot:
            word = 16 * slot + WAKE
            self.w[word] = (self.w[word] + 1) & 0xFFFFFFFF
            _futex().wake(self._address(word))

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
