"""``agents-room send`` and ``agents-room inbox``: a person in the room, from the command line.

The person is a session of harness ``human`` (store/people.py: how it is found again at every
command), labelled ``$USER`` unless ``--label``. ``send`` answers as ``msg_send`` does;
``inbox`` is ``msg_recv`` followed by ``msg_ack`` of each message it printed.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from typing import TYPE_CHECKING, Any

from .parser import not_empty
from .visible import visible

if TYPE_CHECKING:
    from .store import Store


def whole(text: str) -> int:
    """An argparse type: a whole number (the store checks its range and names the field)."""
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a whole number, got {text[:40]!r}") from None


def add_send(subparsers: Any) -> argparse.ArgumentParser:
    p = subparsers.add_parser(
        "send", help="send a message to agents as a person",
        description="Send a message as a person (a session of harness 'human', labelled $USER unless --label; the "
        "same session at every command, for this user on this host). TO is what msg_send takes: '*' (everyone "
        "sharing a room with you: the repo room of the current folder, and --room), a session id, 'file:<glob>' "
        "or 'tag:<tag>'. BODY '-' reads the body from standard input. Prints the message id and the recipients, "
        "and a warning when the selector matched nobody.",
    )
    p.add_argument("to", metavar="TO")
    p.add_argument("subject", metavar="SUBJECT")
    p.add_argument("body", metavar="BODY", nargs="?", help="the message ('-': read it from standard input)")
    p.add_argument("--room", type=not_empty, help="also join this room (and speak in it)")
    p.add_argument("--label", type=not_empty, help="the name agents see (default: $USER)")
    p.add_argument("--ttl-s", type=whole, metavar="N", help="seconds until it expires unread (1..2592000)")
    p.add_argument("--reply-to", type=whole, metavar="ID", help="the message id this answers")
    p.add_argument("--json", action="store_true", help="print msg_send's answer as JSON")
    p.set_defaults(run=send)
    return p


def add_inbox(subparsers: Any) -> argparse.ArgumentParser:
    p = subparsers.add_parser(
        "inbox", help="read (and acknowledge) what agents sent you",
        description="Print the unread messages agents sent to your person session (the one agents-room send "
        "uses), oldest first, mark them read and acknowledge them. With none, say so and how many you ever got.",
    )
    p.add_argument("--limit", type=whole, metavar="N", help="at most this many messages (1..1000, default 100)")
    p.add_argument("--json", action="store_true", help="print the messages as JSON")
    p.set_defaults(run=inbox)
    return p


def default_label() -> str:
    import getpass

    try:
        return os.environ.get("USER") or getpass.getuser()
    except (KeyError, OSError):
        return f"uid-{os.getuid()}"


def open_store(args: argparse.Namespace, *, create: bool) -> Store:
    """The command's store (``--db``, else ``$AGENTS_ROOM_DB``, else the default). ``send``
    creates it as an agent's join would (folder 0700, file 0600): a person may open the room
    by speaking first, and the message waits in the room's history for the agents that join
    later. ``inbox`` only looks (no_room.py)."""
    from . import no_room
    from .store import Store
    from .store.location import resolve

    where = resolve(args.db, source="--db")
    if create:
        no_room.check(where)  # the reason a store cannot be made there, not only the failed mkdir
    return Store.open(where, create=create)


def send(args: argparse.Namespace) -> int:
    from .store import people

    body = sys.stdin.read() if args.body == "-" else args.body
    with open_store(args, create=True) as store:  # a person may speak first: the store is made as a join makes it
        me, sent = people.send(store, cwd=os.getcwd(), label=args.label or default_label(), to=args.to,
                               subject=args.subject, body=body, room=args.room, reply_to=args.reply_to,
                               ttl_s=args.ttl_s)
        rooms = people.rooms_of(store, me)
    if args.json:
        _print_json({"session_id": me, "message_id": sent.message_id, "recipients": sent.recipients,
                    "rooms": rooms, "warning": sent.warning})
        return 0
    if not sent.recipients:  # not an error (the seed): it waits in the history of the rooms it was said in
        print(f"sent message {sent.message_id} as session {me}: it reached 0 sessions; it stays in the history of "
              f"{', '.join(rooms)}, which agents that join later read (room_history)")
        if sent.warning and args.to != "*":  # '*' to an empty room is how a room starts; a tag may be mistyped
            print(f"warning: {visible(sent.warning)}")
        return 0
    print(f"sent message {sent.message_id} as session {me} to {len(sent.recipients)} "
          f"session{'' if len(sent.recipients) == 1 else 's'}: {', '.join(sent.recipients)}")
    return 0


def inbox(args: argparse.Namespace) -> int:
    from .store import bounds, people

    from . import no_room
    from .store.errors import NoStore
    from .store.location import resolve

    limit = bounds.limit(args.limit, 100)  # refused before anything is opened
    try:
        found = open_store(args, create=False)
    except NoStore:
        where = resolve(args.db, source="--db")
        if args.json:
            print(no_room.line(where), file=sys.stderr)
            _print_json({"session_id": None, "messages": [], "inbox": None})
        else:
            print(f"no messages: {no_room.line(where)}")
        return 0
    with found as store:
        me = people.session_of(store)
        if me is None:
            print(f"no messages: you have no session in {store.path} yet (agents-room send makes it)")
            return 0
        got = store.msg_recv(me, limit)
        for m in got.messages:
            store.msg_ack(me, m.id)
    if args.json:
        import dataclasses

        _print_json({"session_id": me, "messages": [dataclasses.asdict(m) for m in got.messages],
                    "inbox": dataclasses.asdict(got.inbox) if got.inbox else None})
        return 0
    for m in got.messages:
        # What agents wrote, shown with its control characters visible (agents_room/visible.py).
        sender = f"{m.sender} ({visible(m.sender_label)})" if m.sender_label else m.sender
        reply = f", in reply to {m.reply_to}" if m.reply_to else ""
        print(f"#{m.id} from {sender}{reply}, {_iso(m.created_at)}: {visible(m.subject)}")
        for line in visible(m.body, newlines=True).splitlines():
            print(f"    {line}")
    if got.inbox is not None:
        box = got.inbox
        last = f", the last at {_iso(box.last_delivery_at)}" if box.last_delivery_at else ""
        print(f"no new messages for session {me} (rooms {visible(', '.join(box.rooms)) or 'none'}; "
              f"{box.deliveries_total} received, {box.deliveries_read} read{last})")
    return 0


def _print_json(value: Any) -> None:
    print(json.dumps(value, indent=2, default=str))


def _iso(t: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(t))
