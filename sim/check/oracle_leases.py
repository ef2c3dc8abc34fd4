"""The oracle's lease rules (LT1-LT5, LR4, LR6): grants, renewals, releases and sweeps replayed
with the expiry the client asked for, against what the store's event says; and LR6, a claim of
``<file>/`` judged from the clients' history (sim/check/oracle_reads.py calls it)."""

from __future__ import annotations

from typing import Any

from .model import stamp
from .operation import Op
from .oracle_state import CLAIM_TTL_S, EPS, Hold, Oracle


def _put(o: Oracle, path: str, hold: Hold) -> None:
    o.lease.leases[path][hold.session] = hold
    o.lease.held_paths[hold.session].add(path)


def _drop(o: Oracle, path: str, sid: str) -> Hold | None:
    o.lease.held_paths[sid].discard(path)
    return o.lease.leases[path].pop(sid, None)


def store_span(p: dict[str, Any], at: float, expires: float) -> float:
    """The event's span (expiry minus time) on the store's own clock: with clock jumps the
    events come retimed onto the host clock, their store times beside them."""
    if "store_at" in p:
        return float(p.get("store_expires_at", p.get("expires_at", expires))) - float(p["store_at"])
    return expires - at


def on_grant(o: Oracle, ev: Any, op: Op | None) -> None:
    sid, p, seq, at, path = ev.session_id, ev.payload, ev.seq, ev.at, ev.path
    args = op.args if op is not None and op.f == "lease_claim" else None
    mode = str(p.get("mode"))
    expires = float(p.get("expires_at", at))
    ttl = expires - at
    if args is not None:
        o.checked["lease-ttl"] += 1
        ttl = float(args.get("ttl_s") or CLAIM_TTL_S)
        asked = args.get("mode") or "exclusive"
        if abs(store_span(p, at, expires) - ttl) > EPS:
            o.fail("LT1", f"{path}: {op.describe()} asked ttl_s {ttl}; granted at {stamp(at)} until {stamp(expires)}, "
                   f"not {stamp(at + ttl)}", seq, at, path=path, session=sid, answered=expires, expected=at + ttl)
        if mode != asked:
            o.fail("LT4", f"{path}: {op.describe()} asked {asked}, was granted {mode}", seq, at, path=path, session=sid)
        expires, mode = (expires if "store_at" in p else at + ttl), asked  # (verified just above)
    for h in o.lease.leases[path].values():  # (a conflict by the store's own expiry is lease-exclusive's)
        if (h.session != sid and h.store_expires <= at < h.expires_at - EPS
                and (mode == "exclusive" or h.mode == "exclusive")):
            o.fail("LT3", f"{path}: session {sid} was granted {mode} while session {h.session} held it {h.mode} "
                   f"until {stamp(h.expires_at)} by the ttl_s it asked", seq, at, path=path, session=sid,
                   other=h.session)
    _swept(o, ev)
    _put(o, path, Hold(sid, mode, int(p.get("token") or 0), expires, ttl, float(p.get("expires_at", expires))))
    o.lease.lease_tl[path].append((seq, tuple(o.lease.leases[path].values())))


def _swept(o: Oracle, ev: Any) -> None:
    """LT5: a claim sweeps first, so when it grants, no lease whose time was up at the claim's
    transaction is left (each went with its ``lease_expire``, earlier in seq)."""
    if o.retimed:
        return  # the store's clock was jumped: its sweep compares on that clock
    o.checked["lease-ttl"] += 1
    for path, holds in o.lease.leases.items():
        for h in holds.values():
            if h.store_expires <= ev.at - EPS:
                o.fail("LT5", f"session {ev.session_id} was granted {ev.path} at {stamp(ev.at)}, yet the lease of "
                       f"session {h.session} on {path} (token {h.token}), up at {stamp(h.store_expires)}, was never "
                       "swept: a claim sweeps every lease whose time is up first", ev.seq, ev.at, path=path,
                       session=h.session)
                return


def on_renew(o: Oracle, ev: Any, op: Op | None) -> None:
    sid, p, seq, at, path = ev.session_id, ev.payload, ev.seq, ev.at, ev.path
    mine = o.lease.leases[path].get(sid)
    o.checked["lease-rules"] += 1
    if mine is not None and mine.expires_at <= at + EPS < mine.store_expires:  # (else lease-release-held's)
        o.fail("LR4", f"{path}: session {sid} renewed at {stamp(at)}, but its lease ran out at "
               f"{stamp(mine.expires_at)} by the ttl_s its client asked", seq, at, path=path, session=sid)
    expires = float(p.get("expires_at", at))
    ttl = expires - at
    if mine is not None and p.get("mode") is not None and p["mode"] != mine.mode:
        o.fail("LT4", f"{path}: session {sid}'s renewal event says {p['mode']}, but the lease it renewed is "
               f"{mine.mode} (a renewal keeps the mode)", seq, at, path=path, session=sid, answered=p["mode"],
               expected=mine.mode)
    if op is not None and op.f == "lease_renew" and mine is not None:
        o.checked["lease-ttl"] += 1
        ttl = float(op.args["ttl_s"]) if op.args.get("ttl_s") is not None else mine.ttl
        if abs(store_span(p, at, expires) - ttl) > EPS:
            o.fail("LT2", f"{path}: {op.describe()} renewed until {stamp(expires)}, not {stamp(at + ttl)} "
                   f"(ttl_s {ttl})", seq, at, path=path, session=sid, answered=expires, expected=at + ttl)
        expires = expires if "store_at" in p else at + ttl
    _put(o, path, Hold(sid, mine.mode if mine else str(p.get("mode")), int(p.get("token") or 0), expires, ttl,
                       float(p.get("expires_at", expires))))
    o.lease.lease_tl[path].append((seq, tuple(o.lease.leases[path].values())))


def on_release(o: Oracle, ev: Any, op: Op | None) -> None:
    sid, seq, at, path = ev.session_id, ev.seq, ev.at, ev.path
    mine = _drop(o, path, sid)
    if ev.payload.get("reason") == "release":
        o.checked["lease-rules"] += 1
        if mine is not None and mine.expires_at <= at + EPS < mine.store_expires:  # (else lease-release-held's)
            o.fail("LR4", f"{path}: session {sid} released at {stamp(at)}, but its lease ran out at "
                   f"{stamp(mine.expires_at)} by the ttl_s its client asked", seq, at, path=path, session=sid)
    o.lease.lease_tl[path].append((seq, tuple(o.lease.leases[path].values())))


def on_expire(o: Oracle, ev: Any, op: Op | None) -> None:
    sid, seq, at, path = ev.session_id, ev.seq, ev.at, ev.path
    mine = _drop(o, path, sid)
    o.checked["lease-ttl"] += 1
    if mine is not None and mine.expires_at > at + EPS and mine.store_expires <= at:  # (else lease-release-held's)
        o.fail("LT3", f"{path}: the lease of session {sid} was swept at {stamp(at)}, before {stamp(mine.expires_at)} "
               "(the ttl_s its client asked)", seq, at, path=path, session=sid, expected=mine.expires_at)
    o.lease.lease_tl[path].append((seq, tuple(o.lease.leases[path].values())))


def left(o: Oracle, sid: str, seq: int) -> None:
    """The session left: whatever it still held is gone from the model (its leave event is
    judged by oracle_rooms: LV1 when it held anything)."""
    for path in sorted(o.lease.held_paths.get(sid, ())):
        o.lease.leases[path].pop(sid, None)
        o.lease.lease_tl[path].append((seq, tuple(o.lease.leases[path].values())))
    o.lease.held_paths.pop(sid, None)


def files_of(ops: list[Op]) -> frozenset[str]:
    """The paths the run's edits wrote (each an ``os.replace`` of a regular file) and its reads
    hashed (``note_read`` answers a hash of a regular file only): each a file, never a folder,
    from the run's start, where the repository was made with it, to its end."""
    return frozenset(op.path for op in ops if op.outcome == "ok" and op.path and
                     (op.f == "edit" or (op.f == "note_read" and (op.result or {}).get("hash"))))


def file_slash(o: Oracle, op: Op, files: frozenset[str]) -> Any:
    """LR6: a claim of ``<file>/``, ``<file>`` a regular file, is no directory lease: the store
    must refuse it ``invalid_argument`` (a grant or a denial answered it as a folder)."""
    if op.path is None or not op.path.endswith("/") or op.path[:-1] not in files:
        return None
    o.checked["lease-rules"] += 1
    if op.outcome != "ok":  # refused (invalid_argument), or failed another way: no answer as a folder
        return None
    answer = "was granted" if (op.result or {}).get("ok") else f"was denied (holder {(op.result or {}).get('holder')})"
    return ("LR6", f"{answer} on {op.path}, but {op.path[:-1]} is a file (the run's edits wrote it or its reads "
            "hashed it): a trailing / on a file is refused invalid_argument", {"path": op.path})
