"""``agents-room doctor``: which store this command is on (and where that setting came from),
its health, and the other stores agents on this machine may be on (elsewhere.py). Where there
is no store yet, it says so and whether one can be made there (no_room.py).
"""

from __future__ import annotations

import argparse
import json
from typing import TYPE_CHECKING, Any

from .visible import visible

if TYPE_CHECKING:
    from .store.location import Location


def _print_json(value: Any) -> None:
    print(json.dumps(value, indent=2, default=str))


def run(args: argparse.Namespace) -> int:
    from pathlib import Path

    from . import elsewhere, no_room  # here, not at the top: see cli.location()
    from .store import Store, StoreError
    from .store.location import resolve
    from .store.errors import NoStore

    where = resolve(args.db, source="--db")
    others = elsewhere.other_stores(where.target, Path.cwd(), Path.home())
    try:
        store = Store.open(where, create=False)  # refuses a missing store, or a file that is not a healthy one
    except NoStore as exc:
        no_room.check(where)  # no store can ever be made there: that, before any other store
        if any(f.exists for f in others):  # the store the person expected may be one of these
            raise StoreError(f"{exc.text}; other stores: " + "; ".join(map(elsewhere.describe, others))) from None
        return _doctor_no_store(where, others, json_out=args.json)
    except StoreError as exc:
        if others:  # the store the person expected may be one of these
            raise StoreError(f"{exc.text}; other stores: " + "; ".join(map(elsewhere.describe, others))) from None
        raise
    with store:
        health = store.health()
        # Counted by the liveness `who` shows, so both say one word for one fact: a session
        # that has not left but whose agent is gone is "gone" here too.
        by_host: dict[str, dict[str, int]] = {}
        levers: dict[str, int] = {}  # how the live sessions are woken at `wake` ("none": they are not)
        for m in store.room_who():
            counts = by_host.setdefault(m.host or "", {})
            counts[m.liveness] = counts.get(m.liveness, 0) + 1
            levers[m.wake_lever or "none"] = levers.get(m.wake_lever or "none", 0) + 1
        health["liveness_by_host"] = by_host
        health["wake_levers"] = levers
    health["origin"] = where.origin
    health["other_stores"] = _others_json(others)
    if args.json:
        _print_json(health)
    else:
        print(f"{'path:':16}{health['path']} ({where.origin})")
        for key, value in health["shown"]:  # what this engine has to say (store/engine.py)
            print(f"{key + ':':16}{value}")
        print(f"{'rows:':16}" + ", ".join(f"{table} {n}" for table, n in health["rows"].items()))
        print(f"{'this host:':16}{health['host']}")
        print(f"{'sessions:':16}" + visible(", ".join(
            f"{sum(counts.values())} on {'this host' if h == health['host'] else h or 'a host not recorded'} ("
            + ", ".join(f"{n} {kind}" for kind, n in sorted(counts.items())) + ")"
            for h, counts in health["liveness_by_host"].items()) or "none"))
        print(f"{'wake levers:':16}" + visible(", ".join(
            f"{n} {lever}" for lever, n in sorted(health["wake_levers"].items())) or "none"))
        _print_others(others)
    return 0 if health["healthy"] else 1


def _doctor_no_store(where: Location, others: list[Any], *, json_out: bool) -> int:
    """``doctor`` where there is no store yet and no other store agents may be on: nothing is
    wrong when a store can be made there; where none can, one line naming the path and the
    reason (no_room.py)."""
    from . import no_room

    no_room.check(where)
    if json_out:
        _print_json({"path": str(where), "origin": where.origin, "exists": False, "healthy": True,
                     "other_stores": _others_json(others)})
        return 0
    print(f"{'path:':16}{where} ({where.origin})")
    print(f"{'store:':16}none yet, nothing was created: {no_room.MAKES_ONE}")
    _print_others(others)
    return 0


def _others_json(others: list[Any]) -> list[dict[str, Any]]:
    return [{"location": f.location, "where": f.where, "exists": f.exists, "problem": f.problem} for f in others]


def _print_others(others: list[Any]) -> None:
    from . import elsewhere

    lines = [elsewhere.describe(f) for f in others] or ["none found (the default location, and AGENTS_ROOM_DB "
                                                         "in the harness files install writes)"]
    print(f"{'other stores:':16}" + f"\n{'':16}".join(map(visible, lines)))  # agents_room/visible.py


def add_parser(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "doctor", help="check the store file",
        description="Open the store and report its path (and where that came from), journal mode, schema version, "
        "quick_check, row counts and WAL size, and list other stores agents on this machine may be on: the default "
        "location and every AGENTS_ROOM_DB in the harness files install writes (this folder's and your home's). "
        "Where there is no store yet, says so and whether one can be made there. Exits non-zero, naming the file, "
        "if the store is refused, cannot be made, or is missing while agents may be on another store.",
    )
    p.add_argument("--json", action="store_true", help="print JSON")
    p.set_defaults(run=run)
