"""Fair admission to SQLite's write lock: one FIFO queue of writers shared by every process.

SQLite's busy handler keeps no queue: a waiter sleeps 1, 2, 5 … 100 ms and retries, so a
process that just committed usually beats one that has waited for seconds (at 64 writers,
1 commit for one process and 1,700 for another in the same 3 s). Writers here take a
*turn* first, then ``BEGIN IMMEDIATE``; when the turn is taken or anyone waits for it, they
queue for it in arrival order. SQLite's lock stays the real one: correctness never depends
on this module, which only orders writers.

How the turn and the queue are kept, and survive processes killed or stopped anywhere, is
:mod:`.turnqueue`, on :mod:`.sidefile`: a side file ``<db>-admission`` (0600), locks that
belong to one open of it (several instances in one process never drop each other's), futex
wake-ups.

*Slices*: every hand-over of SQLite's lock between processes costs the new holder a cold
page cache (SQLite drops a connection's cache whenever another one has committed) and a
wake-up (hundreds of microseconds on a 2-core VM); a strict queue pays both on every
transaction and measured at a third of the busy handler's throughput at 16 writers. So a
turn taken from the queue opens a *slice* of ``SLICE_S``: when it ends with someone queued,
its holder may take up to ``BORROW_MAX`` more turns ahead of the head ("borrow"), each
within ``BORROW_S`` of its last release, until the slice is over; the head sleeps through
those gaps instead of taking the turn, and has it next. (A holder whose last turn came later
than ``BORROW_S`` after its release before lends nothing: the head has the turn at once.) Fairness is then per slice, not
per transaction: at 16 writers a full round is 16 slices, ~35 ms, and a writer's turns
within its slice run on a warm cache. (Spinning instead of sleeping, or waking the head
early to spin, measured slower: on a busy machine the spinner takes the CPU the holder
needs.)

A holder stopped inside its transaction holds SQLite's lock as well: the others wait out
their ``timeout_s`` and get ``StoreBusy``, as they would from SQLite, and carry on once it is
continued and commits. A queued head that is stopped is passed over.

SQLite's auto-checkpoint runs inside COMMIT once the log passes 1,000 pages: a store using
admission turns it off on its connection and runs a PASSIVE checkpoint at the end of one turn
out of every hundred or so (``ticket``), still inside the turn, so that no writer appends
to the log meanwhile and the next one can start it over (store/sqlite/database.py, ``_checkpoint``).

Never carry an instance across ``fork()`` (the child would share its locks and record).
Linux only (OFD locks, futex). On other systems, or on a CPU architecture whose futex
syscall number is not known here, admission is off: ``turn()`` admits at once and SQLite's
busy handler alone orders writers.
"""

from __future__ import annotations

import threading
import time
from collections import namedtuple

from ..errors import InvalidArgument, StoreBusy
from .sidefile import LayoutMismatch
from .turnqueue import GRACE_S, SUPPORTED, TurnQueue

# Annotations only: the hook's news path opens the store, and importing typing would cost
# it more than its queries (as would dataclasses and pathlib, which this module does without).
TYPE_CHECKING = False
if TYPE_CHECKING:
    from types import TracebackType

SLICE_S = 0.008  # a holder's slice: it may take more turns within this long of its first …
SLICE_MIN_S = 0.002  # … or shorter, down to this: ROUND_S shared among those waiting when it opens
ROUND_S = 0.032
BORROW_MAX = 64  # … at most this many more
BORROW_S = 0.0005  # … each within this long of its last release (0.3 and 0.5 ms measured: 0.5 was better)


class Place(namedtuple("Place", "pid state")):
    """One participant: its process (``pid``) and where it stands (``state``: "holding",
    "borrowing" or "waiting"). A named tuple rather than a dataclass: the hook's news path
    imports this module, and ``dataclasses`` (with ``inspect``) costs it milliseconds."""

    __slots__ = ()


class WriteAdmission:
    """Turns at the write lock of the database at ``db_path``, in arrival order.

    ``with admission.turn(): BEGIN IMMEDIATE … COMMIT`` — enter right before BEGIN, leave
    right after COMMIT or ROLLBACK. Raises ``StoreBusy`` when the turn is not had within
    ``timeout_s`` (nothing was changed). Thread-safe: threads of one instance take turns
    among themselves. Not re-entrant. ``slice_s``, ``borrow_max`` and ``borrow_s`` tune the
    slices (see the module's docstring); ``borrow_max=0`` is strict FIFO."""

    def __init__(self, db_path: str, timeout_s: float, *, borrow_max: int = BORROW_MAX,
                 borrow_s: float = BORROW_S, slice_s: float = SLICE_S, slice_min_s: float = SLICE_MIN_S,
                 round_s: float = ROUND_S) -> None:
        if not (isinstance(timeout_s, int | float) and timeout_s > 0):
            raise InvalidArgument("timeout_s", f"must be a positive number of seconds, got {timeout_s!r}")
        if not (isinstance(borrow_max, int) and borrow_max >= 0):
            raise InvalidArgument("borrow_max", f"must be a whole number >= 0, got {borrow_max!r}")
        if not (isinstance(borrow_s, int | float) and 0 <= borrow_s < GRACE_S):
            raise InvalidArgument("borrow_s", f"must be >= 0 and below {GRACE_S} s, got {borrow_s!r}")
        for name, value in (("slice_s", slice_s), ("slice_min_s", slice_min_s), ("round_s", round_s)):
            if not (isinstance(value, int | float) and 0 <= value < (GRACE_S if name != "round_s" else 10)):
                raise InvalidArgument(name, f"must be >= 0 and below {GRACE_S if name != 'round_s' else 10} s, "
                                      f"got {value!r}")
        self.path = f"{db_path}-admission"
        self.timeout_s = float(timeout_s)
        self._lock = threading.Lock()
        self.warning: str | None = None  # why admission is off although this system supports it
        self._queue: TurnQueue | None = None
        if SUPPORTED:
            try:
                self._queue = TurnQueue(self.path, self.timeout_s, borrow_max, borrow_s, slice_s, slice_min_s,
                                        round_s)
            except LayoutMismatch as exc:
                import warnings  # only here: the hook's news path opens the store

                # Servers of another agents-room version queue in this file (an upgrade while
                # old servers run): queueing beside them under another layout would garble
                # their queue. Correctness never rests on admission, so this process leaves the
                # order of its writers to SQLite's busy handler instead of refusing to open.
                self.warning = (f"{exc.text}: fair admission is off in this process (SQLite's busy handler "
                                "orders its writers); it comes back once every server is of one version and "
                                "the file is removed while none runs")
                warnings.warn(self.warning, RuntimeWarning, stacklevel=2)
        self._turn = _Turn(self)

    @property
    def enabled(self) -> bool:
        return self._queue is not None

    @property
    def ticket(self) -> int:
        """The number of the latest turn this instance had: turns are numbered 1, 2, … across
        all processes, so ``ticket % n == 0`` picks one writer in every ``n`` turns (to run
        a WAL checkpoint, say). 0 before the first turn, or when off."""
        return 0 if self._queue is None else self._queue.ticket

    def turn(self) -> _Turn:
        return self._turn

    def queue(self) -> list[Place]:
        """Who has the turn, then who waits, in order (for ``doctor`` and tests)."""
        return [] if self._queue is None else [Place(pid, state) for pid, state in self._queue.places()]

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
        lock, queue = adm._lock, adm._queue
        if not (lock.acquire(False) or lock.acquire(timeout=adm.timeout_s)):
            raise adm.busy()
        if queue is None:
            return
        try:
            if not (queue.take() or queue.enter(time.monotonic() + adm.timeout_s)):
                raise adm.busy()
        except StoreBusy:
            lock.release()
            raise
        except BaseException:  # interrupted (KeyboardInterrupt, say): hold nothing, leave the line
            queue.abandon()
            lock.release()
            raise

    def __exit__(self, kind: type | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        adm = self.admission
        try:
            if adm._queue is not None:
                adm._queue.leave()
        finally:
            adm._lock.release()
