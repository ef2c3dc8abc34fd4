"""``sim fit STORE [--since T] [--until T] --out FILE.toml``: the store's traffic as a scenario
file. Bad input is one line naming what was wrong, exit 2; nothing is written then."""

from __future__ import annotations

import argparse
import re
import sys

from agents_room.parser import not_empty

from ..scenario.arguments import new_file
from ..scenario.scenario import NAME_RE


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("fit", help="fit a scenario to a store's own traffic",
                       description="Read a store's events and call counts and write a scenario that reproduces "
                       "its traffic (numbers only, never a name): run it with `sim run FILE --scale N`.")
    p.add_argument("store", metavar="STORE", type=not_empty, help="a store file's path or a postgresql:// URL")
    p.add_argument("--since", metavar="T", help="from this time (Unix seconds or ISO 8601; default: the first event)")
    p.add_argument("--until", metavar="T", help="to this time (default: the last event or call)")
    p.add_argument("--out", type=new_file, required=True, metavar="FILE.toml", help="the scenario file to write; must not exist")


def command(args: argparse.Namespace) -> int:
    from agents_room.store import RoomError

    # Only now: numpy and the store's readers are the command's, not every `sim`'s start-up.
    from .scenario_of import fit, render, seconds_of
    from .traffic import measure

    try:
        since = None if args.since is None else seconds_of(args.since, "--since")
        until = None if args.until is None else seconds_of(args.until, "--until")
        if since is not None and until is not None and until <= since:
            raise ValueError(f"--until: {args.until!r} is not after --since {args.since!r}")
    except ValueError as exc:
        print(f"sim fit: {exc}", file=sys.stderr)
        return 2
    name = re.sub(r"[^a-z0-9._-]+", "-", args.out.stem.lower()).strip("-._")[:40] or "fitted"
    if not NAME_RE.fullmatch(name):
        name = "fitted"
    try:
        traffic = measure(args.store, since, until)
        scenario = fit(traffic, name)
    except RoomError as exc:
        print(f"sim fit: store {args.store}: {exc.text}", file=sys.stderr)
        return 2
    except ValueError as exc:
        print(f"sim fit: {exc}", file=sys.stderr)
        return 2
    args.out.write_text(render(traffic, scenario))
    f = scenario.fitted
    print(f"sim fit: {args.out}: {scenario.agents} agents in {len(scenario.repos)} repos, "
          f"{f.calls_per_agent_s:.3g} calls per agent per second over {f.window_s:,.0f} s "  # type: ignore[union-attr]
          f"({traffic.calls:,} calls, {traffic.sessions} sessions)")
    return 0
