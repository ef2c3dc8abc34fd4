"""The oracle's state: what it knows of sessions, leases, messages and deliveries, replayed
from the events in commit order (``sim/check/oracle.py``) and read back by the judgement of
reads (``sim/check/oracle_reads.py``)."""

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
class Oracle:
    problems: list[Problem] = field(default_factory=list)
    checked: dict[str, int] = field(default_factory=lambda: defaultdict(int))
    sessions: dict[str, Sess] = field(default_factory=dict)
    caps: dict[str, str] = field(default_factory=dict)
    leases: dict[str, dict[str, Hold]] = field(default_factory=lambda: defaultdict(dict))
    held_paths: dict[str, set[str]] = field(default_factory=lambda: defaultdict(set))
    expires: dict[int, float | None] = field(default_factory=dict)  # message id -> model expiry
    sender: dict[int, str] = field(default_factory=dict)
    state: dict[tuple[int, str], str] = field(default_factory=dict)
    unread: dict[str, set[int]] = field(default_factory=lambda: defaultdict(set))
    # timelines for the reads: (at, snapshot) in seq order
    lease_tl: dict[str, list[tuple[int, tuple[Hold, ...]]]] = field(default_factory=lambda: defaultdict(list))
    # per path claimed or checked: the timelines of every path contending with it, merged (oracle_reads)
    contending_tl: dict[str, list[tuple[int, tuple[Hold, ...]]]] = field(default_factory=dict)
    unread_tl: dict[str, list[tuple[int, frozenset[int]]]] = field(default_factory=lambda: defaultdict(list))
    member_tl: list[tuple[int, dict[str, frozenset[str]]]] = field(default_factory=list)
    pair_tl: dict[tuple[int, str], list[tuple[int, str]]] = field(default_factory=lambda: defaultdict(list))
    room_msgs: dict[str, list[tuple[int, int]]] = field(default_factory=lambda: defaultdict(list))  # (mid, seq)
    sent_by: dict[str, list[tuple[int, int]]] = field(default_factory=lambda: defaultdict(list))  # (mid, seq)
    leave_at: dict[str, tuple[int, float]] = field(default_factory=dict)
    # an empty recv's inbox block: deliveries ever, read or acked, the last one's time (store clock)
    inbox: dict[str, tuple[int, int, float | None]] = field(default_factory=lambda: defaultdict(lambda: (0, 0, None)))
    inbox_tl: dict[str, list[tuple[int, tuple[int, int, float | None]]]] = field(
        default_factory=lambda: defaultdict(list))
    commits: Any = None  # the reads' Commits, set by oracle_reads.check_ops
    acks: dict[tuple[Any, Any], list[Op]] = field(default_factory=lambda: defaultdict(list))
    slack: float = 0.01
    pending_cap: tuple[str, str, float, int] | None = None
    # the wake rules (sim/check/oracle_wake.py): each session's (autonomy, lever, live) timeline,
    # each delivery to a recipient with a lever: its (state, last signal) timeline, when it was
    # sent and when it stopped being due; the last signal of every delivery; the deliveries each
    # look (process, index) signalled or accepted; the starts of each session's tool calls
    level_tl: dict[str, list[tuple[int, Any]]] = field(default_factory=lambda: defaultdict(list))
    wake_tl: dict[tuple[int, str], list[tuple[int, Any]]] = field(default_factory=lambda: defaultdict(list))
    wake_pairs: dict[str, list[int]] = field(default_factory=lambda: defaultdict(list))
    due_from: dict[tuple[int, str], float] = field(default_factory=dict)
    due_until: dict[tuple[int, str], float] = field(default_factory=dict)
    signal_at: dict[tuple[int, str], float] = field(default_factory=dict)
    looked: dict[tuple[int, int], set[tuple[int, str]]] = field(default_factory=lambda: defaultdict(set))
    tool_starts: dict[str, list[float]] = field(default_factory=dict)
    touches: dict[str, list[tuple[float, float, str]]] = field(default_factory=dict)  # ok writes: start, end, f
    # liveness (RD8): each session's harness key, and each key's first invoke and last completion
    key_of: dict[str, str] = field(default_factory=dict)
    key_span: dict[str, tuple[float, float]] = field(default_factory=dict)
    subject: dict[int, Any] = field(default_factory=dict)  # message id -> (subject, selector) its send op gave
    label: dict[str, Any] = field(default_factory=dict)  # session -> the label its joins gave
    retimed: bool = False  # the store's clock was jumped (events carry store_at): no judging against wall time

    def fail(self, rule: str, message: str, seq: int, at: float, **details: Any) -> None:
        self.problems.append(problem(rule, f"seq {seq} at {stamp(at)}: {message}", seq=seq, at=at, **details))
