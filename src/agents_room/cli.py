"""``agents-room``: a thin shell over the store. Each command builds the ``Store`` and calls one
method; the store's errors become a one-line message and a non-zero exit here, at the edge.

Nothing here imports ``mcp`` at module level: only ``serve`` needs it, and commands run from
hooks must start fast.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from . import __version__, doctor, guard_install, person
from .harnesses import editguard, hook, install
from .parser import Parser, not_empty, seconds
from .visible import visible

if TYPE_CHECKING:
    from .store import Store
    from .store.location import Location

Subparsers = Any  # argparse's _SubParsersAction, which it does not name publicly


def location(args: argparse.Namespace) -> Location:
    """The store the command works on: ``--db``, else ``$AGENTS_ROOM_DB``, else the default
    (refused when it could mean different stores to different agents: store/location.py)."""
    # The store is imported where it is used: `agents-room hook` runs on every harness event
    # and answers "nothing new" without it.
    from .store.location import resolve

    return resolve(args.db, source="--db")


def open_store(args: argparse.Namespace, *, create: bool = True) -> Store:
    """Open the command's store; ``create=False`` for commands that only look, so a mistyped
    location says there is no store there instead of showing an empty new one."""
    from .store import Store

    return Store.open(location(args), create=create)


def open_existing(args: argparse.Namespace) -> Store | None:
    """The store of a command that only looks; None, after saying so on standard output, where
    there is none yet (no_room.py: not a failure, unless no store can ever be made there)."""
    from . import no_room
    from .store import Store
    from .store.errors import NoStore

    where = location(args)
    try:
        return Store.open(where, create=False)
    except NoStore:
        print(no_room.line(where))
        return None


def open_store_or_wait(args: argparse.Namespace, *, create: bool = True) -> Store:
    """The store of a server (``serve``, ``dashboard``): opened now, or, when its database
    cannot be reached yet, a stand-in that opens it at the first call that finds it up
    (store/late.py). A harness does not restart a server that died at start. Every other
    refusal (a bad location, a file that is not a store) still stops the command here."""
    from .store import Store
    from .store.errors import StoreUnreachable
    from .store.late import LateStore

    where = location(args)
    try:
        return Store.open(where, create=create)
    except StoreUnreachable as exc:
        print(f"agents-room: {exc.text}; serving anyway: every call tries the store again", file=sys.stderr)
        return LateStore(where, create=create)  # type: ignore[return-value]  # a Store once opened


def _print_json(value: Any) -> None:
    print(json.dumps(value, indent=2, default=str))


# -- serve ------------------------------------------------------------------------------------


def serve(args: argparse.Namespace) -> int:
    from .harnesses import identity

    token = os.environ.get("AGENTS_ROOM_TOKEN") or None
    address = None
    if args.http:
        from .server import http

        address = http.parse_address(args.http)
        http.check_exposure(address, token)
    # Open before importing the server (mcp takes seconds to import): a file that is not a
    # store is refused at once, before anything is served; a database that is down is not.
    store = open_store_or_wait(args)
    from .server import build_server

    from .harnesses import wake

    who = identity.for_http() if address else identity.for_stdio()
    # A stdio server is its agent's wake lever (channel, command, the Stop hook beside it, or the
    # terminal pane its harness runs in):
    # recorded at room_join so messages to it at autonomy `wake` start stored, not undeliverable.
    lever = None if address else wake.lever_name(os.environ, who.pid)
    # One agent per stdio server: its tool calls run on the event loop (no thread hop).
    server = build_server(store=store, identity=who, wake_lever=lever, on_the_loop=address is None)
    # A stdio server keeps its harness's quiet marker: the hooks of every tool call then cost
    # a shell's start while there is nothing to tell (agents_room/harnesses/quiet.py).
    keeper = listener = None
    if not address:
        from .harnesses import editguard_serve, quiet
        from .store import Store

        keeper = quiet.keeper(store, who, os.environ)
        # and answers its harness's edit guard, whose edits then cost no store import (editguard_serve.py)
        listener = editguard_serve.listener(store, os.getppid(), editguard.judged) if isinstance(store, Store) else None
    try:
        if address:
            import anyio

            anyio.run(http.serve, server, address, token)
        elif lever == wake.CHANNEL:
            import anyio

            from .harnesses import channel

            anyio.run(channel.serve_stdio, server)
        else:
            import anyio

            from .server import stdio

            watcher = (wake.command_watcher(store, who, os.environ) if lever == wake.COMMAND
                       else wake.terminal_watcher(store, who, os.environ) if lever == wake.TERMINAL else None)
            anyio.run(stdio.serve, server)  # every malformed request answered (server/stdio.py)
            if watcher:
                watcher.stop()
    except KeyboardInterrupt:
        return 130
    finally:
        if keeper:
            keeper.stop()
        if listener:
            listener.stop()
    return 0


def add_serve(subparsers: Subparsers) -> None:
    p = subparsers.add_parser(
        "serve", help="run the MCP server (stdio, or Streamable HTTP with --http)",
        description="Run the agents-room MCP server. On stdio (the default) a harness spawns one per agent. "
        "With --http HOST:PORT one process serves several agents over Streamable HTTP at /mcp; requests must "
        "carry 'Authorization: Bearer $AGENTS_ROOM_TOKEN' when that is set, and a non-loopback HOST is refused "
        "without it.",
    )
    p.add_argument("--http", metavar="HOST:PORT", type=not_empty, help="serve Streamable HTTP on this address, e.g. 127.0.0.1:8765")
    p.set_defaults(run=serve)


# -- dashboard --------------------------------------------------------------------------------

DASHBOARD_ADDRESS = "127.0.0.1:8766"


def dashboard(args: argparse.Namespace) -> int:
    from .server import http

    token = os.environ.get("AGENTS_ROOM_TOKEN") or None
    address = http.parse_address(args.http)
    http.check_exposure(address, token)
    store = open_store_or_wait(args, create=False)  # only looks: never creates, never writes
    import anyio

    from .dashboard import web

    try:
        anyio.run(web.serve, store, address, token)
    except KeyboardInterrupt:
        return 130
    finally:
        store.close()
    return 0


def add_dashboard(subparsers: Subparsers) -> None:
    p = subparsers.add_parser(
        "dashboard", help="a read-only live web page of the store",
        description="Serve a live web page of the store: rooms and members with liveness, live leases with "
        "their TTL, a lease timeline, messages with each recipient's delivery state, recent events. Read-only: "
        "no endpoint writes. Loopback only without $AGENTS_ROOM_TOKEN; with it, open /?token=<token> once.",
    )
    p.add_argument("--http", metavar="HOST:PORT", default=DASHBOARD_ADDRESS,
                   help=f"the address to serve on (default {DASHBOARD_ADDRESS})")
    p.set_defaults(run=dashboard)


# -- who --------------------------------------------------------------------------------------


def _ago(t: float) -> str:
    s = max(0.0, time.time() - t)
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if s >= size:
            return f"{s / size:.0f}{unit} ago"
    return f"{s:.0f}s ago"


def _table(rows: list[list[str]]) -> str:
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return "\n".join("  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in rows)


def who(args: argparse.Namespace) -> int:
    if args.json:  # standard output stays JSON: the words for no room yet go to standard error
        import contextlib

        with contextlib.redirect_stdout(sys.stderr):
            found = open_existing(args)
        if found is None:
            _print_json([])
            return 0
    else:
        found = open_existing(args)
        if found is None:
            return 0
    with found as store:
        members = store.room_who(room=args.room)
    if args.json:
        import dataclasses  # here, not at the top: see location()

        _print_json([dataclasses.asdict(m) for m in members])
        return 0
    origin = store.location.origin
    if not members:
        print(f"no sessions{' in ' + args.room if args.room else ''} in {store.path} ({origin}); "
              "agents on another store are not listed: agents-room doctor lists the stores it finds")
        return 0
    rows = [["SESSION", "LABEL", "HARNESS", "LIVENESS", "HOST", "AUTONOMY", "WAKE LEVER", "LAST SEEN", "ROOMS", "TAGS",
             "CWD"]]  # TAGS: edit-guard for a session the edit guard joined (docs/harnesses.md)
    rows += [[m.session_id, m.label or "-", m.harness, m.liveness, _host(m.host, store.host), m.autonomy,
              m.wake_lever or "-", _ago(m.last_seen), ",".join(m.rooms) or "-", ",".join(m.tags) or "-", m.cwd]
             for m in members]
    rows = [[visible(cell) for cell in row] for row in rows]  # agents wrote them: agents_room/visible.py
    print(_table(rows))
    if any(m.host != store.host for m in members):
        from .store.hosts import ALIVE_WITHIN_S

        print(f"liveness on another host (this host cannot see its processes): alive = a call in the last "
              f"{ALIVE_WITHIN_S:g}s, gone = its own host proved it, unknown = quiet and not proven gone")
    print(f"store: {store.path} ({origin})")
    return 0


def _host(host: str | None, here: str) -> str:
    if host is None:
        return "(unrecorded)"
    return "this" if host == here else host[:20]


def add_who(subparsers: Subparsers) -> None:
    p = subparsers.add_parser(
        "who", help="list sessions with their liveness",
        description="List live sessions (all, or one room's) with liveness: alive (the agent's process is running), "
        "gone (it is not), unknown (no process recorded); and each one's wake lever, how it is woken at "
        "autonomy wake (claude-channel, stop-hook, command, terminal; - for none). A session of another host "
        "(its HOST column) is judged from the store, never from this host's processes: alive after a recent call, gone once its own host "
        "proved it, else unknown.",
    )
    p.add_argument("--room", type=not_empty, help="only this room's members")
    p.add_argument("--json", action="store_true", help="print JSON instead of a table")
    p.set_defaults(run=who)


# -- prune ------------------------------------------------------------------------------------


def prune(args: argparse.Namespace) -> int:
    found = open_existing(args)
    if found is None:
        return 0
    with found as store:
        removed = store.prune(args.quiet_s, dry_run=args.dry_run)
    verb = "would remove" if args.dry_run else "removed"
    for s in removed:
        label = f" ({s.label})" if s.label else ""
        print(visible(f"{verb} {s.id}{label}: {s.harness}, cwd {s.cwd}, last seen {_ago(s.last_seen)}, gone"))
    if not removed:
        print(f"nothing to prune: no session quiet for {args.quiet_s:g}s is gone")
    return 0


def add_prune(subparsers: Subparsers) -> None:
    p = subparsers.add_parser(
        "prune", help="remove sessions that are quiet and gone",
        description="Remove sessions quiet for longer than --quiet-s seconds whose agent is gone (the liveness "
        "room_who reports). Each leaves its rooms, its leases are released, its unread messages expire; a "
        "tombstone is kept. Sessions whose liveness is unknown are kept, and so is a session of another host "
        "until its own host has proven it gone.",
    )
    p.add_argument("--quiet-s", type=seconds, required=True, metavar="N", help="seconds without a tool call")
    p.add_argument("--dry-run", action="store_true", help="only list what would be removed")
    p.set_defaults(run=prune)


# -- copy -------------------------------------------------------------------------------------


def copy(args: argparse.Namespace) -> int:
    from .store import Store
    from .store.copy import copy_store
    from .store.location import resolve

    with open_store(args, create=False) as source, Store.open(resolve(args.to, source="--to")) as target:
        copied = copy_store(source, target)
    print(f"copied {source.path} into {target.path}: " + ", ".join(f"{t} {n}" for t, n in copied.items()))
    return 0


def add_copy(subparsers: Subparsers) -> None:
    p = subparsers.add_parser(
        "copy", help="copy the store into a new, empty one (e.g. SQLite into PostgreSQL)",
        description="Copy every room, session, message, delivery, lease, read and event of the store (--db) into "
        "the empty store --to (a path, or postgresql://...), ids and all, in one transaction. Refuses a target "
        "that holds anything. Stop the agents first: what they write during the copy is not in it.",
    )
    p.add_argument("--to", required=True, metavar="STORE", type=not_empty, help="the target store: postgresql://user@host/db, or a path")
    p.set_defaults(run=copy)


# -- the command line -------------------------------------------------------------------------

# Every subcommand: add_parser(subparsers) adds its parser and sets run=<function(args) -> exit
# code>. A subcommand in its own module exposes the same add_parser and is listed here.
COMMANDS: list[Callable[[Subparsers], Any]] = [
    add_serve, add_dashboard, add_who, add_prune, doctor.add_parser, add_copy, hook.add_parser, install.add_parser,
    person.add_send, person.add_inbox, guard_install.add_parser, editguard.add_parser,
]


def parser() -> argparse.ArgumentParser:
    p = Parser(
        prog="agents-room",
        description="Coordination for coding agents on one machine: presence, messages, file leases and drift "
        "checks over one SQLite file.",
    )
    p.add_argument("--version", action="version", version=f"agents-room {__version__}")
    p.add_argument("--db", metavar="PATH", type=not_empty, help="the store file (default: $AGENTS_ROOM_DB, else ~/.agents-room/room.db)")
    subparsers = p.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for add_parser in COMMANDS:
        add_parser(subparsers)
    return p


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    try:
        return args.run(args)
    except BrokenPipeError:  # `agents-room who | head`: the reader left; say nothing more
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 1
    except Exception as exc:
        from .store import RoomError  # only now: see location()

        if not isinstance(exc, RoomError):
            raise
        print(f"agents-room: {exc}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
