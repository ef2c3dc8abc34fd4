"""Deliberately broken stores: each is the shipped store with one realistic bug, opened by
the simulator's direct driver through ``SIM_STORE_FACTORY=mutants.<module>:<factory>`` (with
``tests/`` on ``PYTHONPATH``). They exist to prove that the lease-atomicity regression and
the checker catch the bugs they are there for; nothing outside ``tests/`` imports them.

``MUTANTS`` names each one, the factory that opens it, and the invariants that must flag it:
``replay`` from the store's events, ``blackbox`` from the clients' history alone (empty where
the bug is not about leases); ``scope`` is every invariant it may break at all, so a checker
that blames the wrong thing fails too.
"""

from __future__ import annotations

from dataclasses import dataclass

# A broken lease store may also answer drift checks wrongly (they are judged against who held
# the path), so drift-truth is within a lease bug's scope; a delivery bug has no business there.
LEASE = ("lease-exclusive", "lease-token-monotonic", "lease-release-held", "lease-windows", "drift-truth")
DELIVERY = ("delivery-forward", "delivery-exactly-once")


@dataclass(frozen=True)
class Mutant:
    name: str
    factory: str  # module:callable, relative to tests/
    bug: str
    replay: tuple[str, ...]  # invariants of the event replay that must be violated
    blackbox: tuple[str, ...] = ()  # the black box's, where it applies
    scope: tuple[str, ...] = LEASE  # the only invariants it may break


MUTANTS = (
    Mutant("check-then-act", "mutants.leases:check_then_act",
           "the holder check and the insert run in two transactions",
           ("lease-exclusive",), ("lease-windows",)),
    Mutant("deferred-begin", "mutants.leases:deferred_begin",
           "BEGIN (deferred), a claim that reads before it writes, and a busy upgrade retried "
           "in a new transaction as if nothing had been read",
           ("lease-exclusive",), ("lease-windows",)),
    Mutant("early-expiry", "mutants.leases:early_expiry",
           "the expiry sweep compares acquired_at + ttl_s, forgetting renewals: a live lease is swept",
           ("lease-release-held", "lease-exclusive"), ("lease-windows",)),
    Mutant("shared-beside-exclusive", "mutants.leases:shared_ignores_exclusive",
           "a shared claim does not look for an exclusive holder",
           ("lease-exclusive",), ("lease-windows",)),
    Mutant("duplicate-delivery", "mutants.deliveries:duplicate_delivery",
           "a broadcast inserts one delivery per shared room (no DISTINCT, no primary key)",
           ("delivery-exactly-once", "delivery-forward"), scope=DELIVERY),
    Mutant("recv-two-transactions", "mutants.deliveries:recv_two_transactions",
           "msg_recv reads a page in one transaction and marks 'the first page of unread' in another",
           ("delivery-exactly-once",), scope=DELIVERY),
    Mutant("backward-delivery", "mutants.deliveries:backward_delivery",
           "msg_recv marks everything up to the newest id read (acked moves back to read), trigger dropped",
           ("delivery-forward",), scope=DELIVERY),
)
BY_NAME = {m.name: m for m in MUTANTS}
