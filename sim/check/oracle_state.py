"""The oracle's state: what it knows of sessions and rooms, messages and deliveries, leases
and wake signals, replayed from the events in commit order (``sim/check/oracle.py``) and
read back by the judgement of reads (``sim/check/oracle_reads.py``). One record per concern,
each written by one module: :class:`Rooms` by oracle_rooms.py, :class:`Mail` by
oracle_mail.py, :class:`Leases` by oracle_leases.py, :class:`Wake` by oracle_wake.py."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

from .model import Problem, stamp
from .operation import Op
from .rules import problem

LEVEL = {"hold": 0, "notify": 1, "wake": 2}
UNREAD = frozenset({"stored", "offered", "accepted", "undeliverable"})
READ = frozenset({"read", "acked"})
CLAIM_TTL_S = 600.0
EPS = 1e-6  # the store adds ttl_s to the same float the event records as ``at``


@dataclass
class Sess:
    rooms: set[str]
    tags: frozenset[str]
    cwd: str | None
    autonomy: str
    harness_key: str | None
    live: bool = True
    lever: str | None = None
    lever_known: bool = False  # the join events carried wake_lever (stores before it did not)


@dataclass(frozen=True, slots=True)
class Hold:
    session: str
    mode: str
    token: int
    expires_at: float  # the model's: grant time + the client's ttl_s
    ttl: float
    store_expires: float  # what the store's event said (the existing lease model judges by it)


@dataclass
class Rooms:
    """Sessions and rooms: written by sim/check/oracle_rooms.py alone (the others read it)."""

    sessions: dict[str, Sess] = field(default_factory=dict)
    caps: dict[str, str] = field(default_factory=dict)
    pending_cap: tuple[str, str, float, int] | None = None
    member_tl: list[tuple[int, dict[str, frozenset[str]]]] = field(default_factory=list)  # (seq, live rooms)
    leave_at: dict[str, tuple[int, float]] = field(default_factory=dict)
    label: dict[str, Any] = field(default_factory=dict)  # session -> the label its joins gave
    # liveness (RD8): each session's harness key, and each key's first invoke and last completion
    key_of: dict[str, str] = field(default_factory=dict)
    key_span: dict[str, tuple[float, float]] = field(default_factory=dict)


@dataclass
class Mail:
    """Messages and deliveries: written by sim/check/oracle_mail.py alone."""

    expires: dict[int, float | None] = field(default_factory=dict)  # message id -> model expiry
    sender: dict[int, str] = field(default_factory=dict)
    state: dict[tuple[int, str], str] = field(default_factory=dict)
    unread: dict[str, set[int]] = field(default_factory=lambda: defaultdict(set))
    # timelines for the reads: (seq, snapshot) in seq order
    unread_tl: dict[str, list[tuple[int, frozenset[int]]]] = field(default_factory=lambda: defaultdict(list))
    pair_tl: dict[tuple[int, str], list[tuple[int, str]]] = field(default_factory=lambda: defaultdict(list))
    room_msgs: dict[str, list[tuple[int, int]]] = field(default_factory=lambda: defaultdict(list))  # (mid, seq)
    sent_by: dict[str, list[tuple[int, int]]] = field(default_factory=lambda: defaultdict(list))  # (mid, seq)
    # an empty recv's inbox block: deliveries ever, read or acked, the last one's time (store clock)
    inbox: dict[str, tuple[int, int, float | None]] = field(default_factory=lambda: defaultdict(lambda: (0, 0, None)))
    inbox_tl: dict[str, list[tuple[int, tuple[int, int, float | None]]]] = field(
        default_factory=lambda: defaultdict(list))
    subject: dict[int, Any] = field(default_factory=dict)  # message id -> (subject, selector) its send op gave
    acks: dict[tuple[Any, Any], list[Op]] = field(default_factory=lambda: defaultdict(list))


@dataclass
class Leases:
    """Live leases: written by sim/check/oracle_leases.py alone."""

    leases: dict[str, dict[str, Hold]] = field(default_factory=lambda: defaultdict(dict))
    held_paths: dict[str, set[str]] = field(default_factory=lambda: defaultdict(set))
    lease_tl: dict[str, list[tuple[int, tuple[Hold, ...]]]] = field(default_factory=lambda: defaultdict(list))


@dataclass
class Wake:
    """The wake rules' state: written by sim/check/oracle_wake.py alone. Each session's
    (autonomy, lever, live) timeline, each delivery to a recipient with a lever: its (state,
    last signal) timeline, when it was sent and when it stopped being due; the last signal of
    every delivery; the deliveries each look (process, index) signalled or accepted; the
    starts of each session's tool calls, and its writes that touch the store."""

    level_tl: dict[str, list[tuple[int, Any]]] = field(default_factory=lambda: defaultdict(list))
    wake_tl: dict[tuple[int, str], list[tuple[int, Any]]] = field(default_factory=lambda: defaultdict(list))
    wake_pairs: dict[str, list[int]] = field(default_factory=lambda: defaultdict(list))
    due_from: dict[tuple[int, str], float] = field(default_factory=dict)
    due_until: dict[tuple[int, str], float] = field(default_factory=dict)
    signal_at: dict[tuple[int, str], float] = field(default_factory=dict)
    looked: dict[tuple[int, int], set[tuple[int, str]]] = field(default_factory=lambda: defaultdict(set))
    tool_starts: dict[str, list[float]] = field(default_factory=dict)
    touches: dict[str, list[tuple[float, float, str]]] = field(default_factory=dict)  # ok writes: start, end, f


@dataclass
class Oracle:
    """What the replay knows, by concern, each written by its own module (the rule is
    tests/simulator/check/test_oracle_state.py), and the judgement so far: the problems, how
    many times each rule group was checked, the clock slack, whether the store's clock was
    jumped, and the reads' commits."""

    problems: list[Problem] = field(default_factory=list)
    checked: dict[str, int] = field(default_factory=lambda: defaultdict(int))
    rooms: Rooms = field(default_factory=Rooms)
    mail: Mail = field(default_factory=Mail)
    lease: Leases = field(default_factory=Leases)
    wake: Wake = field(default_factory=Wake)
    slack: float = 0.01
    retimed: bool = False  # the store's clock was jumped (events carry store_at): no judging against wall time
    commits: Any = None  # the reads' Commits, set by oracle_reads.check_ops
    # per path claimed or checked: the lease timelines of every path contending with it, merged; the
    # reads' cache, built by oracle_reads once per path after the replay
    contending_tl: dict[str, list[tuple[int, tuple[Hold, ...]]]] = field(default_factory=dict)

    def fail(self, rule: str, message: str, seq: int, at: float, **details: Any) -> None:
        self.problems.append(problem(rule, f"seq {seq} at {stamp(at)}: {message}", seq=seq, at=at, **details))
