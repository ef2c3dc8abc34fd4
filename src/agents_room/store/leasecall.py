"""What a lease is, what a claim answers, and a lease write an engine may answer itself
(:meth:`.engine.Database.serve_lease`, store/served.py). Nothing of the store is imported
here: the engine contract names these types without importing the rules."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal


@dataclass(frozen=True)
class Lease:
    path: str
    session_id: str
    label: str | None
    mode: str
    token: int
    acquired_at: float
    expires_at: float


@dataclass(frozen=True)
class HeldLease(Lease):
    """A live lease as ``lease_check`` and ``lease_list`` show it: the lease, and whether the
    edit guard took it at an edit (store/editclaim.py; until the holder claims the path itself).
    A claim's or renewal's answer is the plain :class:`Lease`: the caller knows how it claimed."""

    at_edit: bool = False


@dataclass(frozen=True)
class Claim:
    ok: bool
    holder: Lease | None  # on a deny: who is in the way; on a grant: the caller's lease
    reason: str
    lease: Lease | None


Outcome = Literal["granted", "denied", "released", "renewed", "unknown", "cwd", "not_held", "renamed"]


@dataclass(frozen=True)
class LeaseCall:
    """One lease write, its arguments already checked. ``cwd``: the session's cwd ``path`` was
    made absolute against (None: ``path`` was absolute as given, any cwd will do)."""

    op: Literal["claim", "release", "renew"]
    session_id: str
    cwd: str | None
    path: str
    ttl_s: float | None = None  # claim: the lease's; renew: None keeps the lease's own
    mode: str = "exclusive"  # claim only
    idents: tuple[str, ...] = ()  # claim only: store/paths.py's identities of ``path`` (the first is stored)


@dataclass(frozen=True)
class LeaseAnswer:
    """What the engine did. ``granted``: ``lease`` is the caller's, ``previous_mode`` its mode
    before (None: a new lease). ``denied``: ``holder`` is the first of ``in_the_way`` holders
    in the way, ``previous_mode`` the caller's own mode of the path if it holds it.
    ``released``. ``renewed``: ``lease`` is the caller's, renewed. Nothing changed on the
    others: ``unknown`` (no live session of that id),
    ``cwd`` (the session's cwd is ``cwd``, not the call's), ``not_held`` (a release or renewal
    of a lease the caller does not hold), ``renamed`` (a claim of a file the caller holds under
    another name, by its recorded identity: the rules look at the file system and re-key it)."""

    outcome: Outcome
    cwd: str | None = None
    holder: Lease | None = None
    in_the_way: int = 0
    previous_mode: str | None = None
    lease: Lease | None = None
