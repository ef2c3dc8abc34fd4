"""What the store knows of traffic besides its writes: every call a process served, counted
by tool, session and outcome, and the gaps between one session's calls (its think time).

Writes already leave an event; reads leave nothing, and writing a row per read would turn
every read into a write (the one write lock, docs/decisions.md). So the adapter that serves
calls (the MCP server, the hook's news path, the simulator's direct driver) feeds a
:class:`CallCounts` in memory, and the engine adds what it holds to the store inside one of
the process's own write transactions, just before COMMIT (``Database.calls``): the counts land
with a write the process made anyway, or not at all if that write rolls back (then they are
kept for the next). Not in every write: in the first one once ``FLUSH_EVERY_S`` has passed
since the last (two upserts in every write cost a busy agent's store about a tenth of its CPU
per call; once a second, within the noise of measuring it). At a clean close, what is left goes in one small
write of its own (``flush``). A process killed outright loses what it counted since its last
flush: ``sim fit`` says so.

Rows (migrate_3.sql): ``call_counts(window_start, session_id, tool, outcome, n)`` and
``call_gaps(window_start, session_id, bucket, n)``, per minute of the store's clock. A
bucket is a quarter octave of milliseconds (:func:`bucket`, :func:`bucket_ms`).

Imports nothing the hook's news path does not load already (``math``, ``os``, ``threading``,
``time``): that path counts its reads too. ``AGENTS_ROOM_COUNT_CALLS=0`` turns counting off
(an A/B switch for the benchmark; nothing is counted or written).
"""

from __future__ import annotations

import math
import os
import threading
import time

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any

# The store's clock is bucketed into windows of this many seconds.
WINDOW_S = 60
# Gap buckets: 0 below FLOOR_MS, then PER_OCTAVE per doubling up to the last, which takes
# everything longer (about 3 days).
FLOOR_MS = 0.1
PER_OCTAVE = 4
LAST_BUCKET = 127
# Outcomes besides an error code: a call answered, a lease claim answered ok=false.
OK = "ok"
DENIED = "denied"
_HEX = frozenset("0123456789abcdef")
# Counts ride at most one write transaction in this many seconds (see the module docstring).
FLUSH_EVERY_S = 1.0
# Calls noted before they are counted in memory anyway (a process that reads and seldom writes).
_MAX_RAW = 10_000
# A process serving many sessions (HTTP) remembers this many sessions' last call for gaps.
_MAX_SESSIONS = 4096

_UPSERT_COUNT = (
    "INSERT INTO call_counts (window_start, session_id, tool, outcome, n) VALUES (?, ?, ?, ?, ?) "
    "ON CONFLICT (window_start, session_id, tool, outcome) DO UPDATE SET n = call_counts.n + excluded.n"
)
_UPSERT_GAP = (
    "INSERT INTO call_gaps (window_start, session_id, bucket, n) VALUES (?, ?, ?, ?) "
    "ON CONFLICT (window_start, session_id, bucket) DO UPDATE SET n = call_gaps.n + excluded.n"
)


def bucket(gap_ms: float) -> int:
    """The bucket of a gap between two calls of a session, in milliseconds."""
    if gap_ms < FLOOR_MS:
        return 0
    return min(LAST_BUCKET, 1 + int(PER_OCTAVE * math.log2(gap_ms / FLOOR_MS)))


def bucket_ms(b: int) -> tuple[float, float]:
    """The gaps bucket ``b`` holds: [low, high) milliseconds (bucket 0: [0, FLOOR_MS))."""
    if b <= 0:
        return 0.0, FLOOR_MS
    return FLOOR_MS * 2 ** ((b - 1) / PER_OCTAVE), FLOOR_MS * 2 ** (b / PER_OCTAVE)


def session_key(value: Any) -> str:
    """A session id as counted: a well-formed id (16 lowercase hex) as it is, anything else
    (none, a typo, a harness key) as '': the counts never keep text a caller made up."""
    if type(value) is str and len(value) == 16 and _HEX.issuperset(value):
        return value
    return ""


def enabled() -> bool:
    return os.environ.get("AGENTS_ROOM_COUNT_CALLS", "1") != "0"


class CallCounts:
    """Counts of one process, not yet in the store. Thread-safe: a server shared over HTTP
    counts from its worker threads while another thread's write flushes."""

    def __init__(self, now: Callable[[], float]) -> None:
        self._now = now  # the store's clock: windows line up with the events' times
        self._lock = threading.Lock()
        self._counts: dict[tuple[int, str, str, str], int] = {}
        self._gaps: dict[tuple[int, str, int], int] = {}
        self._last_end: dict[str, float] = {}  # session -> monotonic end of its last call
        self._raw: list[tuple] = []  # calls noted, not yet counted (see count)
        self._flushing: tuple[dict, dict] | None = None
        self._flushed = -FLUSH_EVERY_S  # time.monotonic() of the last flush: the first write is due
        self._ids: set[str] = set()  # well-formed session ids seen (session_key's answer cached)
        self._window = 0
        self._recheck = -1.0  # time.monotonic() after which the window is read from the clock again

    @property
    def pending(self) -> bool:
        """Due to ride this write: something counted, and the last flush a while ago."""
        return bool(self._raw or self._counts) and time.monotonic() - self._flushed >= FLUSH_EVERY_S

    def count(self, tool: str, session_id: Any, outcome: str, started: float, ended: float) -> None:
        """One call of ``tool`` by ``session_id`` (any value; see :func:`session_key`) ended
        ``outcome`` (``ok``, ``denied`` or an error code); ``started`` and ``ended`` are
        ``time.monotonic()`` readings around it. Never raises, never touches the store.
        Every call of a busy agent pays this, so it only notes the call (the store's clock read
        once a second, for the window); the counting is done when the counts are written."""
        if ended >= self._recheck:
            self._window = int(self._now() // WINDOW_S) * WINDOW_S
            self._recheck = ended + 1.0
        with self._lock:
            self._raw.append((self._window, tool, session_id, outcome, started, ended))
            if len(self._raw) >= _MAX_RAW:  # a process that seldom writes: count what it holds now
                self._tally()

    def rest(self, session_id: Any) -> None:
        """The session waits by its harness's doing, not its own (the simulator holds its agents
        between joining and the start): its next call starts no gap."""
        with self._lock:
            self._raw.append((0, None, session_id, None, 0.0, 0.0))

    def _tally(self) -> None:
        """The noted calls into counts per key and gaps per bucket (the lock held)."""
        counts, gaps, last_end = self._counts, self._gaps, self._last_end
        for window, tool, session_id, outcome, started, ended in self._raw:
            # (a caller's id may be any JSON value: a list or an object cannot be looked up)
            sid = session_id if isinstance(session_id, str) and session_id in self._ids else self._check(session_id)
            if tool is None:  # rest
                last_end.pop(sid, None)
                continue
            key = (window, sid, tool, outcome)
            counts[key] = counts.get(key, 0) + 1
            if not sid:
                continue
            last = last_end.pop(sid, None)  # popped and put back: the dict stays in recency order
            if last is not None:
                gap = (window, sid, bucket((started - last) * 1000))
                gaps[gap] = gaps.get(gap, 0) + 1
            elif len(last_end) >= _MAX_SESSIONS:
                del last_end[next(iter(last_end))]
            last_end[sid] = ended
        self._raw = []

    def _check(self, session_id: Any) -> str:
        sid = session_key(session_id)
        if sid and len(self._ids) < _MAX_SESSIONS:
            self._ids.add(sid)
        return sid

    def before_commit(self, tx: Any) -> None:
        """Inside a write transaction, just before its COMMIT: add what is counted. The engine
        calls :meth:`after_commit` with whether the COMMIT happened."""
        with self._lock:
            self._tally()
            counts, gaps = self._counts, self._gaps
            self._counts, self._gaps = {}, {}
            self._flushing = (counts, gaps)
            self._flushed = time.monotonic()
        if counts:
            tx.many(_UPSERT_COUNT, [(*k, n) for k, n in counts.items()])
        if gaps:
            tx.many(_UPSERT_GAP, [(*k, n) for k, n in gaps.items()])

    def after_commit(self, committed: bool) -> None:
        """Forget what the COMMIT wrote, or keep it for the next write if it rolled back."""
        with self._lock:
            taken, self._flushing = self._flushing, None
            if committed or taken is None:
                return
            for mine, back in zip((self._counts, self._gaps), taken, strict=True):
                for k, n in back.items():
                    mine[k] = mine.get(k, 0) + n

    def flush(self, db: Any) -> None:
        """At a clean close: what is still counted, in one small write of its own. Best
        effort: a store that is busy or gone keeps its counts unwritten, never fails a close."""
        if not self._counts and not self._raw:
            return
        self._flushed = -FLUSH_EVERY_S  # due now
        try:
            with db.write():
                pass  # the engine adds the counts before this transaction's COMMIT
        except Exception:  # noqa: BLE001, S110 (losing a count is better than failing a shutdown)
            pass


def flush(calls: CallCounts | None, db: Any) -> None:
    """``calls.flush(db)`` when counting is on (a store's close)."""
    if calls is not None:
        calls.flush(db)


def attach(db: Any, now: Callable[[], float] | None = None) -> CallCounts | None:
    """The counter whose counts ride ``db``'s write transactions (a new one, or the one it has
    already), or None when counting is off."""
    if db.calls is not None:  # a Store opened it: one counter per database
        return db.calls
    if not enabled():
        return None
    calls = CallCounts(now or (lambda: db.clock.now()))  # the clock a fault may swap later
    db.calls = calls
    return calls
