"""Fair admission to SQLite's write lock: one FIFO queue of writers shared by every process.

SQLite's busy handler keeps no queue: a waiter sleeps 1, 2, 5 … 100 ms and retries, so a
process that just committed usually beats one that has waited for seconds. Writers here
take a *turn* first, in arrival order, then ``BEGIN IMMEDIATE``. SQLite's lock stays the
real one: correctness never depends on this module, it only orders writers.

The queue lives in a side file ``<db>-admission`` (0600, mmap'd), never in the database,
``-wal`` or ``-shm`` files (closing a descriptor of those drops SQLite's POSIX locks):

- a header (``dirty``, ``head``, ``tail``, a turn counter, the borrowing fields) and one
  64-byte record per participant (``wake`` futex word, ``state``, ``prev``/``next`` links,
  ticket, grant time, pid). A participant is one :class:`WriteAdmission`; it owns record
  ``i`` while it holds an open-file-description (OFD) lock on byte ``_LIVE + i``, which the
  kernel drops when the process dies, however it dies: "is it alive" is one ``F_OFD_GETLK``.
- changes happen under an OFD lock on byte 0 (the mutex), held for microseconds. A process
  killed inside leaves ``dirty`` set; the next holder rebuilds the queue from the records
  of live participants, by ticket.
- a waiter sleeps in ``futex(FUTEX_WAIT)`` on its own ``wake`` word: woken by the kernel,
  no polling. The releaser grants the turn to its successor and wakes it.
- *borrowing*: a woken successor needs a CPU before it can use its turn, tens of
  microseconds on an idle core and far more on a busy machine, while the process that
  just released is running. Until the successor has taken its turn, the releaser may take
  up to ``BORROW_MAX`` more turns within ``BORROW_S``, one at a time; the successor, once
  awake, claims the turn and waits out the borrowed one (spinning briefly: it is short).
  This keeps the write lock busy as SQLite's own handler does, with the unfairness bounded.
- every ``CHECK_S`` of waiting, a waiter looks at the head: a dead head or borrower is
  removed (the recovery bound), and a head granted the turn that has not taken it within
  ``GRACE_S`` (stopped before it could) is passed over; it re-queues at the front later.
- a head that took its turn and is then stopped (SIGSTOP inside its transaction) holds
  SQLite's lock as well: the others wait out their ``timeout_s`` and get ``StoreBusy``, as
  they would from SQLite, and carry on once it is continued and commits.

OFD locks belong to the open file description, not the process: several instances in one
process never drop each other's locks, as POSIX ``fcntl`` locks would. Never carry an
instance across ``fork()`` (the child would share its locks and record).

Linux only (OFD locks, futex). On other systems, or on a CPU architecture whose futex
syscall number is not known here, admission is off: ``turn()`` admits at once and SQLite's
busy handler alone orders writers.
"""

from __future__ import annotations

import ctypes
import errno
import fcntl
import mmap
import os
import platform
import struct
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Literal

from .errors import InvalidArgument, StoreBusy, StoreError

SLOTS = 1024  # participants at once on one database (each open WriteAdmission is one)
CHECK_S = 0.05  # a waiter looks at the head this often: a dead head is gone within this
GRACE_S = 0.2  # a granted turn not taken within this is passed over
BORROW_MAX = 8  # turns a releaser may borrow while its successor wakes up
BORROW_S = 0.005  # … and only this soon after the grant
SPIN_S = 0.002  # a successor waiting out a borrowed turn spins this long, then sleeps
_BORROW_NS = int(BORROW_S * 1e9)

_MAGIC, _VERSION = b"ARQ1", 1
_HEADER_SIZE, _REC_SIZE = 64, 64
_SIZE = _HEADER_SIZE + SLOTS * _REC_SIZE
_HDR = struct.Struct("<IIIxxxxQ")  # at 8: dirty head tail ticket
_LEND = struct.Struct("<IIII")  # at 32: granter borrower borrows claimed
_REC = struct.Struct("<IIIIQQII")  # wake state prev next ticket granted_ns pid spinning
_WS = struct.Struct("<II")  # wake state
_U32, _U64 = struct.Struct("<I"), struct.Struct("<Q")
_DIRTY, _HEAD, _TAIL, _TICKET, _LENDING = 8, 12, 16, 24, 32
_WAKE, _STATE, _PREV, _NEXT, _RTICKET, _GRANTED, _PID, _SPIN = 0, 4, 8, 12, 16, 24, 32, 36
_LIVE = 1 << 20  # OFD lock byte of participant i (locks need no bytes in the file)

IDLE, WAITING, GRANTED, HOLDING, PASSED = 0, 1, 2, 3, 4
_LINKED = (WAITING, GRANTED, HOLDING)  # a record is in the queue iff its state is one of these

_FLOCK = struct.Struct("hhqqi0q")  # struct flock on 64-bit Linux: type whence start len pid
_FUTEX_NR = {"x86_64": 202, "aarch64": 98, "arm64": 98, "riscv64": 98}.get(platform.machine())
SUPPORTED = sys.platform == "linux" and hasattr(fcntl, "F_OFD_SETLK") and _FUTEX_NR is not None

if SUPPORTED:
    _syscall = ctypes.CDLL(None, use_errno=True).syscall
    _syscall.restype = ctypes.c_long
    # Every argument a full-width long: syscall() is variadic and reads longs.
    _NR, _WAIT_OP, _WAKE_OP = ctypes.c_long(_FUTEX_NR or 0), ctypes.c_long(0), ctypes.c_long(1)
    _ONE, _ZERO = ctypes.c_long(1), ctypes.c_long(0)
    _fcntl, _SETLK, _SETLKW = fcntl.fcntl, fcntl.F_OFD_SETLK, fcntl.F_OFD_SETLKW
    _MUTEX_ON = _FLOCK.pack(fcntl.F_WRLCK, os.SEEK_SET, 0, 1, 0)
    _MUTEX_OFF = _FLOCK.pack(fcntl.F_UNLCK, os.SEEK_SET, 0, 1, 0)


class _Timespec(ctypes.Structure):
    _fields_ = [("tv_sec", ctypes.c_long), ("tv_nsec", ctypes.c_long)]


PlaceState = Literal["borrowing", "holding", "granted", "waiting"]


@dataclass(frozen=True)
class Place:
    """One participant in the queue: its process and where it stands."""

    pid: int
    state: PlaceState


_STATE_NAMES: dict[int, PlaceState] = {WAITING: "waiting", GRANTED: "granted", HOLDING: "holding"}


class WriteAdmission:
    """Turns at the write lock of the database at ``db_path``, in arrival order.

    ``with admission.turn(): BEGIN IMMEDIATE … COMMIT`` — enter right before BEGIN, leave
    right after COMMIT or ROLLBACK. Raises ``StoreBusy`` when the turn is not had within
    ``timeout_s`` (nothing was changed). Thread-safe: threads of one instance take turns
    among themselves. Not re-entrant. ``borrow_max=0`` is strict FIFO; ``spin_s=0`` never
    spins."""

    def __init__(self, db_path: Path, timeout_s: float, *, borrow_max: int = BORROW_MAX,
                 spin_s: float = SPIN_S) -> None:
        if not (isinstance(timeout_s, int | float) and timeout_s > 0):
            raise InvalidArgument("timeout_s", f"must be a positive number of seconds, got {timeout_s!r}")
        if not (isinstance(borrow_max, int) and borrow_max >= 0):
            raise InvalidArgument("borrow_max", f"must be a whole number >= 0, got {borrow_max!r}")
        if not (isinstance(spin_s, int | float) and 0 <= spin_s < timeout_s):
            raise InvalidArgument("spin_s", f"must be >= 0 and below timeout_s, got {spin_s!r}")
        self.path = Path(f"{db_path}-admission")
        self.timeout_s = float(timeout_s)
        self._lock = threading.Lock()
        self._queue: _Queue | None = _Queue(self.path, borrow_max, float(spin_s)) if SUPPORTED else None
        self._turn = _Turn(self)

    @property
    def enabled(self) -> bool:
        return self._queue is not None

    @property
    def ticket(self) -> int:
        """The number of the latest turn this instance had: turns are numbered 1, 2, … across
        all processes, so ``ticket % n == 0`` picks one writer in every ``n`` turns (to run
        a WAL checkpoint outside the turn, say). 0 before the first turn, or when off."""
        return 0 if self._queue is None else self._queue.ticket

    def turn(self) -> _Turn:
        return self._turn

    def queue(self) -> list[Place]:
        """Who has the turn and who waits, in order (for ``doctor`` and tests)."""
        return [] if self._queue is None else self._queue.places()

    def close(self) -> None:
        with self._lock:
            if self._queue is not None:
                self._queue.close()
                self._queue = None

    def busy(self) -> StoreBusy:
        return StoreBusy(f"no turn at the write lock within {self.timeout_s:g} s (queue {self.path}); "
                         "nothing was changed, try again")


class _Turn:
    """The context manager of :meth:`WriteAdmission.turn` (a class: no generator per call)."""

    __slots__ = ("admission",)

    def __init__(self, admission: WriteAdmission) -> None:
        self.admission = admission

    def __enter__(self) -> None:
        adm = self.admission
        deadline = time.monotonic() + adm.timeout_s
        lock = adm._lock
        if not (lock.acquire(False) or lock.acquire(timeout=adm.timeout_s)):
            raise adm.busy()
        try:
            queue = adm._queue
            if queue is not None and not queue.enter(deadline):
                raise adm.busy()
        except BaseException:
            lock.release()
            raise

    def __exit__(self, kind: type | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        adm = self.admission
        try:
            if adm._queue is not None:
                adm._queue.leave()
        finally:
            adm._lock.release()


class _Queue:
    """One participant's handle on the shared queue file (see the module's docstring).
    Methods named ``_…_locked`` run with the mutex held, between :meth:`_begin` and the
    clearing of ``dirty``."""

    def __init__(self, path: Path, borrow_max: int, spin_s: float) -> None:
        self.borrow_max, self.spin_s = borrow_max, spin_s
        self.ticket = 0
        self.borrowing = False
        self.pid = os.getpid()
        self.mm = None  # type: ignore[assignment]  (set below; None once closed)
        try:
            self.fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        except OSError as exc:
            raise StoreError(f"cannot open the admission file {path}: {exc.strerror}") from exc
        try:
            if os.fstat(self.fd).st_size < _SIZE:
                os.ftruncate(self.fd, _SIZE)  # extends only: never zeroes what another wrote
            self.mm: mmap.mmap = mmap.mmap(self.fd, _SIZE)
            self._pin: ctypes.c_char | None = ctypes.c_char.from_buffer(self.mm)
            self.base = ctypes.addressof(self._pin)  # the futex words' addresses
            self.me = self._claim_slot(path)
            self.rec = self._at(self.me)
            self._lock_mutex(None)
            try:
                magic = self.mm[0:4]
                if magic == b"\0\0\0\0":
                    self.mm[0:8] = _MAGIC + _U32.pack(_VERSION)
                elif magic != _MAGIC:
                    raise StoreError(f"{path} is not an agents-room admission file ({magic!r}); remove it")
                self._begin()
                woken = self._drop_locked(self.me, IDLE)  # a dead participant had this slot, maybe queued
                _U32.pack_into(self.mm, self.rec + _PID, self.pid)
                _U32.pack_into(self.mm, _DIRTY, 0)
            finally:
                self._unlock_mutex()
            self._wake(woken)
        except BaseException:
            self.close()
            raise

    # -- the turn (hot paths: plain locals, since every Python call costs about a syscall) --

    def enter(self, deadline: float) -> bool:
        """Queue up and wait for the turn; False when ``deadline`` passes first."""
        mm, rec, me, fd = self.mm, self.rec, self.me, self.fd
        try:
            _fcntl(fd, _SETLK, _MUTEX_ON)
        except OSError:
            if not self._lock_mutex(deadline):
                return False
        try:
            head, tail, ticket = self._begin()
            wake, state = _WS.unpack_from(mm, rec)
            if state not in _LINKED:  # (else still queued from an attempt that gave up)
                ticket += 1
                granter, borrower, borrows, claimed = _LEND.unpack_from(mm, _LENDING)
                if head == 0 and borrower == 0:  # nobody has the turn or waits: it is ours
                    _REC.pack_into(mm, rec, wake, HOLDING, 0, 0, ticket, 0, self.pid, 0)
                    _HDR.pack_into(mm, _DIRTY, 1, me, me, ticket)
                    _U32.pack_into(mm, _DIRTY, 0)
                    self.ticket = ticket
                    return True
                if granter == me and borrower == 0 and not claimed and borrows < self.borrow_max and head:
                    # Our successor may not have taken the turn we gave it yet: borrow it once more.
                    at = _HEADER_SIZE + (head - 1) * _REC_SIZE
                    if (_U32.unpack_from(mm, at + _STATE)[0] == GRANTED
                            and time.monotonic_ns() - _U64.unpack_from(mm, at + _GRANTED)[0] < _BORROW_NS):
                        _LEND.pack_into(mm, _LENDING, granter, me, borrows + 1, 0)
                        _U64.pack_into(mm, _TICKET, ticket)
                        _U32.pack_into(mm, _DIRTY, 0)
                        self.ticket, self.borrowing = ticket, True
                        return True
                if head == 0:  # only a borrower has the turn: first in line, granted, to claim it
                    _REC.pack_into(mm, rec, wake, WAITING, 0, 0, ticket, 0, self.pid, 0)
                    _HDR.pack_into(mm, _DIRTY, 1, me, me, ticket)
                    self._grant_locked(me, 0)
                elif state == PASSED:  # first in line before it was passed over: right behind the head
                    self._insert_after_locked(head, ticket)
                else:
                    _REC.pack_into(mm, rec, wake, WAITING, tail, 0, ticket, 0, self.pid, 0)
                    _U32.pack_into(mm, _HEADER_SIZE + (tail - 1) * _REC_SIZE + _NEXT, me)
                    _HDR.pack_into(mm, _DIRTY, 1, head, me, ticket)
            _U32.pack_into(mm, _DIRTY, 0)
        finally:
            _fcntl(fd, _SETLK, _MUTEX_OFF)
        return self._wait(deadline)

    def leave(self) -> None:
        mm, me, fd = self.mm, self.me, self.fd
        _fcntl(fd, _SETLKW, _MUTEX_ON)
        try:
            head, tail, ticket = self._begin()
            if self.borrowing:
                self.borrowing = False
                woken = self._return_locked()
            elif head == me and tail == me:  # nobody waits
                _U32.pack_into(mm, self.rec + _STATE, IDLE)
                _HDR.pack_into(mm, _DIRTY, 1, 0, 0, ticket)
                woken = 0
            else:
                woken = self._drop_locked(me, IDLE, granter=me)
            _U32.pack_into(mm, _DIRTY, 0)
        finally:
            _fcntl(fd, _SETLK, _MUTEX_OFF)
        self._wake(woken)

    def _wait(self, deadline: float) -> bool:
        mm, rec = self.mm, self.rec
        check_at = time.monotonic() + CHECK_S
        claimed = spun = False
        while True:
            seen, state = _WS.unpack_from(mm, rec)
            if state == HOLDING:
                self.ticket = _U64.unpack_from(mm, rec + _RTICKET)[0]
                return True
            now = time.monotonic()
            if now >= deadline:
                return self._give_up()
            if (state == GRANTED and not claimed) or state not in _LINKED or now >= check_at:
                # Granted (take it, or claim it from a borrower), passed over (re-queue), or
                # time to look at the head.
                if not self._lock_mutex(deadline):
                    return self._give_up()
                try:
                    self._begin()
                    woken = self._take_locked() if state == GRANTED and not claimed else self._repair_locked()
                    # Only the head is ever granted, and ``claimed`` is about the head.
                    claimed = (_U32.unpack_from(mm, rec + _STATE)[0] == GRANTED
                               and _U32.unpack_from(mm, _LENDING + 12)[0] == 1)
                    _U32.pack_into(mm, _DIRTY, 0)
                finally:
                    _fcntl(self.fd, _SETLK, _MUTEX_OFF)
                self._wake(woken)
                if now >= check_at:
                    check_at = now + CHECK_S
                continue
            if claimed and not spun and self.spin_s > 0:
                spun = True  # a borrowed turn is short: watch for its end rather than sleep
                if self._spin(min(deadline, now + self.spin_s)):
                    continue
            self._futex_wait(rec + _WAKE, seen, min(deadline, check_at) - now)

    def _spin(self, until: float) -> bool:
        """Watch our state until we hold the turn or ``until``; True when we hold it."""
        mm, at = self.mm, self.rec + _STATE
        _U32.pack_into(mm, self.rec + _SPIN, 1)
        try:
            while time.monotonic() < until:
                if _U32.unpack_from(mm, at)[0] == HOLDING:
                    return True
                os.sched_yield()  # the borrower may need this core
            return False
        finally:
            # The borrower wakes us only when this reads 0. The futex_wait that follows
            # compares ``wake`` under a kernel lock, so a hand-over made meanwhile is seen.
            _U32.pack_into(mm, self.rec + _SPIN, 0)

    def _give_up(self) -> bool:
        """The deadline passed: leave the queue, unless the turn is ours meanwhile."""
        if not self._lock_mutex(time.monotonic() + GRACE_S):
            return False  # still queued: passed over if granted, or resumed by the next enter()
        try:
            self._begin()
            state = self._u32(self.rec + _STATE)
            borrower = self._u32(_LENDING + 4)
            if state == HOLDING or (state == GRANTED and not (borrower and self._alive(borrower))):
                _U32.pack_into(self.mm, self.rec + _STATE, HOLDING)
                _LEND.pack_into(self.mm, _LENDING, 0, 0, 0, 0)
                _U32.pack_into(self.mm, _DIRTY, 0)
                self.ticket = self._u64(self.rec + _RTICKET)
                return True
            woken = self._drop_locked(self.me, IDLE)
            _U32.pack_into(self.mm, _DIRTY, 0)
        finally:
            self._unlock_mutex()
        self._wake(woken)
        return False

    def places(self) -> list[Place]:
        self._lock_mutex(None)
        try:
            self._begin()
            borrower = self._u32(_LENDING + 4)
            places = [Place(self._u32(self._at(borrower) + _PID), "borrowing")] if borrower else []
            slot = self._u32(_HEAD)
            while slot and len(places) <= SLOTS:
                at = self._at(slot)
                if (state := _STATE_NAMES.get(self._u32(at + _STATE))) is not None:
                    places.append(Place(self._u32(at + _PID), state))
                slot = self._u32(at + _NEXT)
            _U32.pack_into(self.mm, _DIRTY, 0)
            return places
        finally:
            self._unlock_mutex()

    # -- changes of the shared state (mutex held, ``dirty`` set) ------------------------------

    def _begin(self) -> tuple[int, int, int]:
        """Rebuild if a process died mid-change; mark a change in progress; the header."""
        mm = self.mm
        dirty, head, tail, ticket = _HDR.unpack_from(mm, _DIRTY)
        if dirty or (head == 0) != (tail == 0):
            self._rebuild_locked()
            dirty, head, tail, ticket = _HDR.unpack_from(mm, _DIRTY)
        _U32.pack_into(mm, _DIRTY, 1)
        return head, tail, ticket

    def _take_locked(self) -> int:
        """We were granted the turn: take it, or claim it if a live borrower has it (the
        borrower hands it over when done). Returns a slot to wake (none: 0)."""
        if self._u32(self.rec + _STATE) != GRANTED:
            return 0
        granter, borrower, borrows, _ = _LEND.unpack_from(self.mm, _LENDING)
        if borrower and self._alive(borrower):
            _LEND.pack_into(self.mm, _LENDING, granter, borrower, borrows, 1)
        else:
            _U32.pack_into(self.mm, self.rec + _STATE, HOLDING)
            _LEND.pack_into(self.mm, _LENDING, 0, 0, 0, 0)
        return 0

    def _return_locked(self) -> int:
        """A borrowed turn ends: the head that claimed it meanwhile now holds it."""
        granter, borrower, borrows, claimed = _LEND.unpack_from(self.mm, _LENDING)
        if borrower != self.me:
            return 0  # cleared by a repair or a rebuild while we had it
        head = self._u32(_HEAD)
        if claimed and head and self._u32(self._at(head) + _STATE) == GRANTED:
            return self._promote_locked(head)
        _LEND.pack_into(self.mm, _LENDING, granter, 0, borrows, 0)
        return 0

    def _insert_after_locked(self, prev: int, ticket: int) -> None:
        mm, at = self.mm, self._at(prev)
        nxt = self._u32(at + _NEXT)
        _REC.pack_into(mm, self.rec, self._u32(self.rec + _WAKE), WAITING, prev, nxt, ticket, 0, self.pid, 0)
        _U32.pack_into(mm, at + _NEXT, self.me)
        if nxt:
            _U32.pack_into(mm, self._at(nxt) + _PREV, self.me)
        else:
            _U32.pack_into(mm, _TAIL, self.me)
        _U64.pack_into(mm, _TICKET, ticket)

    def _drop_locked(self, slot: int, state: int, granter: int = 0) -> int:
        """Unlink ``slot`` if queued and set its state. If it was the head, its successor is
        granted the turn (``granter`` may borrow it until taken): returned, to be woken
        after the unlock (none: 0)."""
        mm, at = self.mm, self._at(slot)
        if self._u32(at + _STATE) not in _LINKED:
            _U32.pack_into(mm, at + _STATE, state)
            return 0
        prev, nxt = self._u32(at + _PREV), self._u32(at + _NEXT)
        if prev:
            _U32.pack_into(mm, self._at(prev) + _NEXT, nxt)
        else:
            _U32.pack_into(mm, _HEAD, nxt)
        if nxt:
            _U32.pack_into(mm, self._at(nxt) + _PREV, prev)
        else:
            _U32.pack_into(mm, _TAIL, prev)
        _WS.pack_into(mm, at, self._u32(at + _WAKE), state)
        _U64.pack_into(mm, at + _PREV, 0)
        if prev == 0 and nxt:
            self._grant_locked(nxt, granter)
            return nxt
        return 0

    def _promote_locked(self, slot: int) -> int:
        """The head that claimed a borrowed turn now holds it; returns it to wake unless it
        spins. The wake word moves, so a futex_wait racing with this returns at once."""
        at = self._at(slot)
        _WS.pack_into(self.mm, at, (self._u32(at + _WAKE) + 1) & 0xFFFFFFFF, HOLDING)
        _LEND.pack_into(self.mm, _LENDING, 0, 0, 0, 0)
        return 0 if self._u32(at + _SPIN) else slot

    def _grant_locked(self, slot: int, granter: int) -> None:
        mm, at = self.mm, self._at(slot)
        _U64.pack_into(mm, at + _GRANTED, time.monotonic_ns())
        _WS.pack_into(mm, at, (self._u32(at + _WAKE) + 1) & 0xFFFFFFFF, GRANTED)
        # A borrower of the previous grant (if any) keeps its turn; the new head claims it.
        _LEND.pack_into(mm, _LENDING, granter, self._u32(_LENDING + 4), 0, 0)

    def _repair_locked(self) -> int:
        """Clear a dead borrower, remove dead heads, pass over a head that has not taken its
        granted turn, re-queue this participant if it was passed over. Returns a slot to
        wake (none: 0)."""
        woken = 0
        borrower, claimed = self._u32(_LENDING + 4), self._u32(_LENDING + 12)
        if borrower and borrower != self.me and not self._alive(borrower):
            _LEND.pack_into(self.mm, _LENDING, 0, 0, 0, 0)
            head = self._u32(_HEAD)
            if claimed and head and self._u32(self._at(head) + _STATE) == GRANTED:
                woken, claimed = self._promote_locked(head), 0
        while (head := self._u32(_HEAD)) and head != self.me:
            at = self._at(head)
            state = self._u32(at + _STATE)
            if state not in _LINKED or self._u32(at + _PREV):  # torn by a death: relink
                self._rebuild_locked()
                continue
            if not self._alive(head):
                woken = self._drop_locked(head, IDLE)
            elif state == GRANTED and not claimed and time.monotonic_ns() - self._u64(at + _GRANTED) > GRACE_S * 1e9:
                woken = self._drop_locked(head, PASSED)
            elif state == WAITING:  # after a rebuild whose grant was not seen
                self._grant_locked(head, 0)
                woken = head
                break
            else:
                break
        if self._u32(self.rec + _STATE) not in _LINKED:
            head, tail, ticket = _HDR.unpack_from(self.mm, _DIRTY)[1:]
            if head:
                self._insert_after_locked(head, ticket + 1)
            else:
                _REC.pack_into(self.mm, self.rec, self._u32(self.rec + _WAKE), WAITING, 0, 0, ticket + 1, 0,
                               self.pid, 0)
                _HDR.pack_into(self.mm, _DIRTY, 1, self.me, self.me, ticket + 1)
                self._grant_locked(self.me, 0)
        return 0 if woken == self.me else woken

    def _rebuild_locked(self) -> None:
        """A process died mid-change: relink the records of live participants, turn
        holders first, then waiters, each by ticket. Runs rarely; reads every record."""
        mm = self.mm
        queued = []
        for slot in range(1, SLOTS + 1):
            at = self._at(slot)
            state = self._u32(at + _STATE)
            if state in _LINKED and (slot == self.me or self._alive(slot)):
                queued.append((state == WAITING, self._u64(at + _RTICKET), slot))
            elif state != IDLE:
                _U32.pack_into(mm, at + _STATE, IDLE)
        queued.sort()
        order = [slot for _, _, slot in queued]
        for i, slot in enumerate(order):
            at = self._at(slot)
            _U32.pack_into(mm, at + _PREV, order[i - 1] if i else 0)
            _U32.pack_into(mm, at + _NEXT, order[i + 1] if i + 1 < len(order) else 0)
        tickets = [self._u64(_TICKET)] + [ticket for _, ticket, _ in queued]
        _HDR.pack_into(mm, _DIRTY, 1, order[0] if order else 0, order[-1] if order else 0, max(tickets))
        _LEND.pack_into(mm, _LENDING, 0, 0, 0, 0)
        if order and self._u32(self._at(order[0]) + _STATE) == WAITING:
            self._grant_locked(order[0], 0)  # woken by the waiters' periodic check at the latest

    # -- primitives --------------------------------------------------------------------------

    def _at(self, slot: int) -> int:
        return _HEADER_SIZE + (slot - 1) * _REC_SIZE

    def _u32(self, offset: int) -> int:
        return _U32.unpack_from(self.mm, offset)[0]

    def _u64(self, offset: int) -> int:
        return _U64.unpack_from(self.mm, offset)[0]

    def _claim_slot(self, path: Path) -> int:
        """A free participant slot, probing from one that depends on the pid (so that
        processes rarely probe the same ones). Held until close or death."""
        start = self.pid % SLOTS
        for i in range(SLOTS):
            slot = (start + i) % SLOTS + 1
            try:
                _fcntl(self.fd, _SETLK, _FLOCK.pack(fcntl.F_WRLCK, os.SEEK_SET, _LIVE + slot, 1, 0))
                return slot
            except OSError as exc:
                if exc.errno not in (errno.EAGAIN, errno.EACCES):
                    raise
        raise StoreError(f"all {SLOTS} places in {path} are taken by open writers")

    def _alive(self, slot: int) -> bool:
        if slot == self.me:
            return True  # our own lock never conflicts with us
        probe = _FLOCK.pack(fcntl.F_WRLCK, os.SEEK_SET, _LIVE + slot, 1, 0)
        return _FLOCK.unpack(_fcntl(self.fd, fcntl.F_OFD_GETLK, probe))[0] != fcntl.F_UNLCK

    def _lock_mutex(self, deadline: float | None) -> bool:
        """Take the mutex. With a deadline, give up (False) when it passes: a holder stopped
        inside its microseconds must not stall a bounded wait."""
        if deadline is None:
            _fcntl(self.fd, _SETLKW, _MUTEX_ON)
            return True
        pause = 0.0
        while True:
            try:
                _fcntl(self.fd, _SETLK, _MUTEX_ON)
                return True
            except OSError as exc:
                if exc.errno not in (errno.EAGAIN, errno.EACCES):
                    raise
            if time.monotonic() >= deadline:
                return False
            time.sleep(pause)
            pause = min(pause * 2 or 20e-6, 1e-3)

    def _unlock_mutex(self) -> None:
        _fcntl(self.fd, _SETLK, _MUTEX_OFF)

    def _futex_wait(self, offset: int, seen: int, seconds: float) -> None:
        """Sleep until woken, ``seconds`` pass, or not at all if the word is no longer ``seen``."""
        ts = _Timespec(int(seconds), int((seconds % 1) * 1e9))
        _syscall(_NR, ctypes.c_void_p(self.base + offset), _WAIT_OP, ctypes.c_long(seen), ctypes.byref(ts), None, _ZERO)

    def _wake(self, slot: int) -> None:
        if slot:
            _syscall(_NR, ctypes.c_void_p(self.base + self._at(slot) + _WAKE), _WAKE_OP, _ONE, None, None, _ZERO)

    def close(self) -> None:
        if self.mm is not None:
            self._pin = None
            self.mm.close()
            self.mm = None  # type: ignore[assignment]
        if getattr(self, "fd", -1) >= 0:
            os.close(self.fd)  # drops this description's locks, and no one else's
            self.fd = -1
