"""The store's answers that are not one concept's own: the audit rows, what a receive returns,
and the state of a path's leases as ``lease_check`` and ``lease_list`` give it."""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any

from .leasecall import HeldLease
from .messages import Inbox, Message


@dataclass(frozen=True)
class Event:
    seq: int
    at: float
    session_id: str | None
    kind: str
    path: str | None
    payload: dict[str, Any]


@dataclass(frozen=True)
class Received:
    messages: list[Message]
    inbox: Inbox | None


@dataclass(frozen=True)
class LeaseState:
    free: bool
    lease: HeldLease | None
    holders: list[HeldLease]


@dataclass(frozen=True)
class LeaseView(HeldLease):
    """A live lease as ``lease_list`` shows it to a session: the lease (taken at an edit or
    not), and whether it is the caller's."""

    mine: bool = False

    @classmethod
    def of(cls, lease: HeldLease, *, mine: bool) -> LeaseView:
        return cls(**{f.name: getattr(lease, f.name) for f in fields(lease)}, mine=mine)
