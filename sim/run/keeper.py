"""A keeper ([[repos]] keepers): an agent that never lets go of a lease it holds. It draws from
the mix like any agent, but every operation that would end or re-take one of its leases is a
renewal instead, of the lease that runs out first: a claim of a path it holds (a re-claim, a
mode change), a release, a stale renewal or release (a sleep past its expiry), and leaving (a
churn, a stale session: a new session holds nothing). A claim of a file it does not hold stays
a claim, so it gathers its repository's files and keeps them for the rest of the run; a
refactor's claim of a folder is a check of it instead (a keeper of the whole repository would
leave the others nothing but denials).

What that is for: a lease renewed keeps the name it was granted under (store/leases.py's
renew finds it by the file's former name), while a holder's claim by the name the file has
now re-keys it. So once a folder above is renamed mid-run ([[repos]] move_src_at_s), a
keeper's leases live on under the old name for as long as the run lasts, and every claim,
check, directory claim and ``file:`` send by the new name must still meet them; ordinary
agents re-claim theirs within a fraction of a second of the move.
"""

from __future__ import annotations

import random

from ..scenario.scenario import Workload
from .workload import Files, Known, Op, _ttl, next_op as drawn

# Operations that leave a room's session, and with it every lease it holds.
LEAVING = frozenset({"churn", "stale_session"})


def next_op(w: Workload, files: Files, known: Known, rng: random.Random) -> Op:
    """The mix's next operation (workload.next_op), or a renewal where it would let a lease go."""
    op = drawn(w, files, known, rng)
    if op.f == "lease_claim" and op.kind == "directory":  # a refactor: it looks at the folder, never takes it
        return Op("lease_check", {"path": op.args["path"]}, "directory")
    if not known.held:
        return op
    lets_go = (op.f in LEAVING or op.f == "lease_release" or op.kind == "stale"
               or (op.f == "lease_claim" and op.args["path"] in known.held))
    if not lets_go:
        return op
    path = min(known.held, key=lambda p: known.held[p].expires_at)
    return Op("lease_renew", {"path": path, **_ttl(w, rng)}, "keep")
