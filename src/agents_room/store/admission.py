"""Fair admission to SQLite's write lock: one FIFO queue of writers shared by every process.

SQLite's busy handler keeps no queue: a waiter sleeps 1, 2, 5 … 100 ms and retries, so a
process that just committed usually beats one that has waited for seconds. Writers here
take a *turn* first, in arrival order, and only then ``BEGIN IMMEDIATE``. The database's
lock stays the real one: correctness never depends on this module, it only orders writers.

The queue lives in a side file ``<db>-admission`` (0600, mmap'd), never in the database,
``-wal`` or ``-shm`` files (closing a descriptor of those drops SQLite's POSIX locks):

- a header (``dirty``, ``head``, ``tail``, a ticket counter) and one 64-byte record per
  participant: ``wake`` (a futex word), ``state``, ``prev``/``next`` links, ticket, grant
  time, ``spin``. A participant is one :class:`WriteAdmission`; it owns record ``i`` while
  it holds an open-file-description (OFD) lock on byte ``_LIVE + i``, which the kernel drops
  when the process dies, however it dies. "Is the head alive" is one ``F_OFD_GETLK``.
- the shared state changes under an OFD lock on byte 0 (the mutex), held for microseconds.
  A process killed inside leaves ``dirty`` set; the next holder rebuilds the queue from
  the records of live participants, by ticket.
- a waiter sleeps in ``futex(FUTEX_WAIT)`` on its own ``wake`` word, so it is woken by the
  kernel, not by polling. The second in line spins briefly instead (``spin_s``): the
  hand-over then costs no wake-up, which on 2 cores is most of what strict FIFO would
  otherwise lose against the busy handler's "whoever runs takes it".
- every ``CHECK_S`` of waiting, a waiter looks at the head: a dead head is removed (the
  recovery bound), and a head granted the turn that has not taken it within ``GRACE_S``
  (stopped before it could, or gave up unable to say so) is passed over; it re-queues at
  the front when it runs again.
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
SPIN_S = 0.002  # the second in line spins this long for the turn before it sleeps

_MAGIC, _VERSION = b"ARQ1", 1
_HEADER_SIZE, _REC_SIZE = 64, 64
_SIZE = _HEADER_SIZE + SLOTS * _REC_SIZE
_HDR = struct.Struct("<IIIxxxxQ")  # at 8: dirty head tail ticket
_REC = struct.Struct("<IIIIQQII")  # wake state prev next ticket granted_ns pid spin
_U32, _U64 = struct.Struct("<I"), struct.Struct("<Q")
_DIRTY, _HEAD, _TAIL, _TICKET = 8, 12, 16, 24
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
    _MUTEX_ON = _FLOCK.pack(fcntl.F_WRLCK, os.SEEK_SET, 0, 1, 0)
    _MUTEX_OFF = _FLOCK.pack(fcntl.F_UNLCK, os.SEEK_SET, 0, 1, 0)


class _Timespec(ctypes.Structure):
    _fields_ = [("tv_sec", ctypes.c_long), ("tv_nsec", ctypes.c_long)]


@dataclass(frozen=True)
class Place:
    """One participant in the queue: its process and whether it has the turn."""

    pid: int
    state: Literal["waiting", "granted", "holding"]


_STATE_NAMES: dict[int, Literal["waiting", "granted", "holding"]] = {
    WAITING: "waiting", GRANTED: "granted", HOLDING: "holding"}


class WriteAdmission:
    """Turns at the write lock of the database at ``db_path``, in arrival order.

    ``with admission.turn(): BEGIN IMMEDIATE … COMMIT`` — enter right before BEGIN, leave
    right after COMMIT or ROLLBACK. Raises ``StoreBusy`` when the turn is not had within
    ``timeout_s`` (nothing was changed). Thread-safe: threads of one instance take turns
    among themselves. Not re-entrant. ``spin_s=0`` never spins (every hand-over is then a
    kernel wake-up)."""

    def __init__(self, db_path: Path, timeout_s: float, *, spin_s: float = SPIN_S) -> None:
        if not (isinstance(timeout_s, int | float) and timeout_s > 0):
            raise InvalidArgument("timeout_s", f"must be a positive number of seconds, got {timeout_s!r}")
        if not (isinstance(spin_s, int | float) and 0 <= spin_s < timeout_s):
            raise InvalidArgument("spin_s", f"must be >= 0 and below timeout_s, got {spin_s!r}")
        self.path = Path(f"{db_path}-admission")
        self.timeout_s = float(timeout_s)
        self._lock = threading.Lock()
        self._queue: _Queue | None = _Queue(self.path, float(spin_s)) if SUPPORTED else None
        self._turn = _Turn(self)

    @property
    def enabled(self) -> bool:
        return self._queue is not None

    def turn(self) -> _Turn:
        return self._turn

    def queue(self) -> list[Place]:
        """Who holds the turn and who waits, in order (for ``doctor`` and tests)."""
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
        if not adm._lock.acquire(timeout=adm.timeout_s):
            raise adm.busy()
        try:
            queue = adm._queue
            if queue is not None and not queue.enter(deadline):
                raise adm.busy()
        except BaseException:
            adm._lock.release()
            raise

    def __exit__(self, kind: type | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        adm = self.admission
        try:
            if adm._queue is not None:
                adm._queue.leave()
        finally:
            adm._lock.release()


class _Queue:
    """One participant's handle on the shared queue file (see the module's docstring)."""

    def __init__(self, path: Path, spin_s: float) -> None:
        self.spin_s = spin_s
        self.mm: mmap.mmap | None = None
        try:
            self.fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        except OSError as exc:
            raise StoreError(f"cannot open the admission file {path}: {exc.strerror}") from exc
        try:
            if os.fstat(self.fd).st_size < _SIZE:
                os.ftruncate(self.fd, _SIZE)  # extends only: never zeroes what another wrote
            self.mm = mmap.mmap(self.fd, _SIZE)
            self._pin: ctypes.c_char | None = ctypes.c_char.from_buffer(self.mm)
            self.base = ctypes.addressof(self._pin)
            self.me = self._claim_slot(path)
            self.rec = _HEADER_SIZE + (self.me - 1) * _REC_SIZE
            self.pid = os.getpid()
            self._lock_mutex(None)
            try:
                magic = self.mm[0:4]
                if magic == b"\0\0\0\0":
                    self.mm[0:8] = _MAGIC + _U32.pack(_VERSION)
                elif magic != _MAGIC:
                    raise StoreError(f"{path} is not an agents-room admission file ({magic!r}); remove it")
                self._begin()
                granted, _ = self._drop(self.me, IDLE)  # a dead participant had this slot, maybe queued
                _U32.pack_into(self.mm, _DIRTY, 0)
            finally:
                self._unlock_mutex()
            self._wake(granted)
        except BaseException:
            self.close()
            raise

    # -- the turn ----------------------------------------------------------------------------

    def enter(self, deadline: float) -> bool:
        """Queue up and wait for the turn; False when ``deadline`` passes first."""
        mm, rec, me = self.mm, self.rec, self.me
        if not self._lock_mutex(deadline):
            return False
        try:
            head, tail, ticket = self._begin()
            state = _U32.unpack_from(mm, rec + _STATE)[0]  # type: ignore[arg-type]
            if state not in _LINKED:  # (else still queued from an attempt that gave up)
                ticket += 1
                wake = _U32.unpack_from(mm, rec + _WAKE)[0]  # type: ignore[arg-type]
                if head == 0:  # nobody holds or waits: the turn at once
                    _REC.pack_into(mm, rec, wake, HOLDING, 0, 0, ticket, 0, self.pid, 0)  # type: ignore[arg-type]
                    _HDR.pack_into(mm, _DIRTY, 1, me, me, ticket)  # type: ignore[arg-type]
                    _U32.pack_into(mm, _DIRTY, 0)  # type: ignore[arg-type]
                    return True
                if state == PASSED:  # first in line before it was passed over: right behind the head
                    self._insert_after(head, tail, ticket)
                else:
                    _REC.pack_into(mm, rec, wake, WAITING, tail, 0, ticket, 0, self.pid, 0)  # type: ignore[arg-type]
                    _U32.pack_into(mm, _HEADER_SIZE + (tail - 1) * _REC_SIZE + _NEXT, me)  # type: ignore[arg-type]
                    _HDR.pack_into(mm, _DIRTY, 1, head, me, ticket)  # type: ignore[arg-type]
            _U32.pack_into(mm, _DIRTY, 0)  # type: ignore[arg-type]
        finally:
            fcntl.fcntl(self.fd, fcntl.F_OFD_SETLK, _MUTEX_OFF)
        return self._wait(deadline)

    def leave(self) -> None:
        mm, me = self.mm, self.me
        fcntl.fcntl(self.fd, fcntl.F_OFD_SETLKW, _MUTEX_ON)
        try:
            head, tail, ticket = self._begin()
            if head == me and tail == me:  # nobody waits
                _U32.pack_into(mm, self.rec + _STATE, IDLE)  # type: ignore[arg-type]
                _HDR.pack_into(mm, _DIRTY, 1, 0, 0, ticket)  # type: ignore[arg-type]
                _U32.pack_into(mm, _DIRTY, 0)  # type: ignore[arg-type]
                return
            granted, second = self._drop(me, IDLE)
            _U32.pack_into(mm, _DIRTY, 0)  # type: ignore[arg-type]
        finally:
            fcntl.fcntl(self.fd, fcntl.F_OFD_SETLK, _MUTEX_OFF)
        # After the unlock: its kernel spinlocks order the grant before the reads of ``spin``.
        if granted and not self._u32(self._at(granted) + _SPIN):
            self._wake(granted)
        if second:
            self._wake(second)  # now second in line: it starts spinning

    def _wait(self, deadline: float) -> bool:
        mm, rec = self.mm, self.rec
        now = time.monotonic()
        check_at = now + CHECK_S
        may_spin = self.spin_s > 0
        while True:
            seen = _U32.unpack_from(mm, rec + _WAKE)[0]
            state = _U32.unpack_from(mm, rec + _STATE)[0]
            if state == GRANTED or state == HOLDING:
                _U32.pack_into(mm, rec + _STATE, HOLDING)
                return True
            now = time.monotonic()
            if state not in _LINKED or now >= check_at:
                # Passed over (slow to take a granted turn), or time to look at the head.
                if not self._lock_mutex(deadline):
                    return self._give_up()
                try:
                    self._begin()
                    woken = self._repair()
                    _U32.pack_into(mm, _DIRTY, 0)
                finally:
                    self._unlock_mutex()
                self._wake(woken)
                check_at = now + CHECK_S
                continue
            if now >= deadline:
                return self._give_up()
            if may_spin and self._second():
                may_spin = False
                if self._spin(min(deadline, now + self.spin_s)):
                    continue
            if self._futex_wait(rec + _WAKE, seen, min(deadline, check_at) - now):
                may_spin = self.spin_s > 0  # woken: granted, or now second in line

    def _second(self) -> bool:
        """Second in line (read without the mutex: a hint for spinning, never for order)."""
        prev = self._u32(self.rec + _PREV)
        return prev != 0 and self._u32(self._at(prev) + _PREV) == 0

    def _spin(self, until: float) -> bool:
        """Watch our state until granted or ``until``; True when granted."""
        mm, at = self.mm, self.rec + _STATE
        _U32.pack_into(mm, self.rec + _SPIN, 1)
        try:
            while time.monotonic() < until:
                if _U32.unpack_from(mm, at)[0] in (GRANTED, HOLDING):
                    return True
                os.sched_yield()  # the holder may need this core
            return False
        finally:
            # The releaser wakes us only when this reads 0; the futex_wait after it compares
            # ``wake`` under a kernel lock, so a grant made meanwhile is never slept through.
            _U32.pack_into(mm, self.rec + _SPIN, 0)

    def _give_up(self) -> bool:
        """The deadline passed: leave the queue, unless the turn was granted meanwhile."""
        if not self._lock_mutex(time.monotonic() + GRACE_S):
            return False  # still queued: passed over if granted, or resumed by the next enter()
        try:
            self._begin()
            if self._u32(self.rec + _STATE) in (GRANTED, HOLDING):
                _U32.pack_into(self.mm, self.rec + _STATE, HOLDING)
                _U32.pack_into(self.mm, _DIRTY, 0)
                return True
            granted, second = self._drop(self.me, IDLE)
            _U32.pack_into(self.mm, _DIRTY, 0)
        finally:
            self._unlock_mutex()
        self._wake(granted)
        self._wake(second)
        return False

    def places(self) -> list[Place]:
        self._lock_mutex(None)
        try:
            self._begin()
            places, slot = [], self._u32(_HEAD)
            while slot and len(places) < SLOTS:
                at = self._at(slot)
                state = _STATE_NAMES.get(self._u32(at + _STATE))
                if state is not None:
                    places.append(Place(self._u32(at + _PID), state))
                slot = self._u32(at + _NEXT)
            _U32.pack_into(self.mm, _DIRTY, 0)  # type: ignore[arg-type]
            return places
        finally:
            self._unlock_mutex()

    # -- shared-state changes (mutex held; between _begin() and clearing dirty) ----------------

    def _begin(self) -> tuple[int, int, int]:
        """Rebuild if a process died mid-change; mark a change in progress; the header."""
        mm = self.mm
        dirty, head, tail, ticket = _HDR.unpack_from(mm, _DIRTY)
        if dirty:
            self._rebuild()
            dirty, head, tail, ticket = _HDR.unpack_from(mm, _DIRTY)
        _U32.pack_into(mm, _DIRTY, 1)
        return head, tail, ticket

    def _insert_after(self, prev: int, tail: int, ticket: int) -> None:
        mm, at = self.mm, self._at(prev)
        nxt = self._u32(at + _NEXT)
        _REC.pack_into(mm, self.rec, self._u32(self.rec + _WAKE), WAITING, prev, nxt, ticket, 0, self.pid, 0)
        _U32.pack_into(mm, at + _NEXT, self.me)
        if nxt:
            _U32.pack_into(mm, self._at(nxt) + _PREV, self.me)
        _HDR.pack_into(mm, _DIRTY, 1, self._u32(_HEAD), self.me if nxt == 0 else tail, ticket)

    def _drop(self, slot: int, state: int) -> tuple[int, int]:
        """Unlink ``slot`` if queued and set its state. When it was the head, its successor
        is granted the turn: returns (granted, the new second in line), to wake after the
        unlock (0 for none)."""
        mm, at = self.mm, self._at(slot)
        if self._u32(at + _STATE) not in _LINKED:
            _U32.pack_into(mm, at + _STATE, state)
            return 0, 0
        prev, nxt = self._u32(at + _PREV), self._u32(at + _NEXT)
        if prev:
            _U32.pack_into(mm, self._at(prev) + _NEXT, nxt)
        else:
            _U32.pack_into(mm, _HEAD, nxt)
        if nxt:
            _U32.pack_into(mm, self._at(nxt) + _PREV, prev)
        else:
            _U32.pack_into(mm, _TAIL, prev)
        _REC.pack_into(mm, at, self._u32(at + _WAKE), state, 0, 0, 0, 0, 0, 0)
        if prev == 0 and nxt:
            self._grant(nxt)
            return nxt, self._u32(self._at(nxt) + _NEXT)
        return 0, 0

    def _grant(self, slot: int) -> None:
        mm, at = self.mm, self._at(slot)
        _U64.pack_into(mm, at + _GRANTED, time.monotonic_ns())
        _U32.pack_into(mm, at + _STATE, GRANTED)
        _U32.pack_into(mm, at + _WAKE, (self._u32(at + _WAKE) + 1) & 0xFFFFFFFF)

    def _repair(self) -> int:
        """Remove dead heads, pass over a head that has not taken its granted turn, and
        re-queue this participant if it was passed over. Returns a slot to wake, or 0."""
        woken = 0
        while True:
            head = self._u32(_HEAD)
            if head == 0 or head == self.me:
                break
            at = self._at(head)
            state = self._u32(at + _STATE)
            if state not in _LINKED or self._u32(at + _PREV):  # torn by a death: relink
                self._rebuild()
                continue
            if not self._alive(head):
                woken = self._drop(head, IDLE)[0]
            elif state == GRANTED and time.monotonic_ns() - self._u64(at + _GRANTED) > GRACE_S * 1e9:
                woken = self._drop(head, PASSED)[0]
            elif state == WAITING:  # only after a rebuild whose grant was not seen
                self._grant(head)
                woken = head
                break
            else:
                break
        if self._u32(self.rec + _STATE) not in _LINKED:
            head, tail = self._u32(_HEAD), self._u32(_TAIL)
            ticket = self._u64(_TICKET) + 1
            if head == 0:
                _REC.pack_into(self.mm, self.rec, self._u32(self.rec + _WAKE), GRANTED, 0, 0, ticket,
                               time.monotonic_ns(), self.pid, 0)
                _HDR.pack_into(self.mm, _DIRTY, 1, self.me, self.me, ticket)
            else:
                self._insert_after(head, tail, ticket)
        return 0 if woken == self.me else woken

    def _rebuild(self) -> None:
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
        if order and self._u32(self._at(order[0]) + _STATE) == WAITING:
            self._grant(order[0])  # woken by the waiters' periodic check at the latest

    # -- primitives --------------------------------------------------------------------------

    def _at(self, slot: int) -> int:
        return _HEADER_SIZE + (slot - 1) * _REC_SIZE

    def _u32(self, offset: int) -> int:
        return _U32.unpack_from(self.mm, offset)[0]  # type: ignore[arg-type]

    def _u64(self, offset: int) -> int:
        return _U64.unpack_from(self.mm, offset)[0]  # type: ignore[arg-type]

    def _claim_slot(self, path: Path) -> int:
        """A free participant slot, probing from one that depends on the pid (so that
        processes rarely probe the same ones). Held until close or death."""
        start = os.getpid() % SLOTS
        for i in range(SLOTS):
            slot = (start + i) % SLOTS + 1
            try:
                fcntl.fcntl(self.fd, fcntl.F_OFD_SETLK, _FLOCK.pack(fcntl.F_WRLCK, os.SEEK_SET, _LIVE + slot, 1, 0))
                return slot
            except OSError as exc:
                if exc.errno not in (errno.EAGAIN, errno.EACCES):
                    raise
        raise StoreError(f"all {SLOTS} places in {path} are taken by open writers")

    def _alive(self, slot: int) -> bool:
        probe = _FLOCK.pack(fcntl.F_WRLCK, os.SEEK_SET, _LIVE + slot, 1, 0)
        return _FLOCK.unpack(fcntl.fcntl(self.fd, fcntl.F_OFD_GETLK, probe))[0] != fcntl.F_UNLCK

    def _lock_mutex(self, deadline: float | None) -> bool:
        """Take the mutex. With a deadline, give up (False) when it passes: a holder stopped
        inside its microseconds must not stall a bounded wait."""
        if deadline is None:
            fcntl.fcntl(self.fd, fcntl.F_OFD_SETLKW, _MUTEX_ON)
            return True
        pause = 0.0
        while True:
            try:
                fcntl.fcntl(self.fd, fcntl.F_OFD_SETLK, _MUTEX_ON)
                return True
            except OSError as exc:
                if exc.errno not in (errno.EAGAIN, errno.EACCES):
                    raise
            if time.monotonic() >= deadline:
                return False
            time.sleep(pause)
            pause = min(pause * 2 or 20e-6, 1e-3)

    def _unlock_mutex(self) -> None:
        fcntl.fcntl(self.fd, fcntl.F_OFD_SETLK, _MUTEX_OFF)

    def _futex_wait(self, offset: int, seen: int, seconds: float) -> bool:
        """Sleep until woken, ``seconds`` pass, or at once if the word is no longer
        ``seen``. True when woken."""
        ts = _Timespec(int(seconds), int((seconds % 1) * 1e9))
        return _syscall(_NR, ctypes.c_void_p(self.base + offset), _WAIT_OP, ctypes.c_long(seen),
                        ctypes.byref(ts), None, _ZERO) == 0

    def _wake(self, slot: int) -> None:
        if slot:
            _syscall(_NR, ctypes.c_void_p(self.base + self._at(slot) + _WAKE), _WAKE_OP, _ONE, None, None, _ZERO)

    def close(self) -> None:
        if self.mm is not None:
            self._pin = None
            self.mm.close()
            self.mm = None
        if getattr(self, "fd", -1) >= 0:
            os.close(self.fd)  # drops this description's locks, and no one else's
            self.fd = -1
