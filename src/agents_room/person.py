"""``agents-room send`` and ``agents-room inbox``: a person in the room.

A person speaks as a session of harness ``human``, labelled ``$USER`` unless ``--label``. The
session is found again at every command by its harness key, a UUID derived from this host's id
and the person's user (uid and login name): one person, one session per store and host, across
commands, shells and folders, with no file of its own to keep. ``room_join`` with that key
rejoins it (store/sessions.py), so ``send`` adds the rooms it is given and moves the session's
folder (and its repo room) to where the command runs. It has no process (``pid`` NULL), so
``room_who`` shows its liveness ``unknown`` and ``prune`` never takes it; its autonomy is
``hold``: a person reads mail when they run ``inbox``.

Agents see a person as ``harness: human`` in ``room_who`` and as ``sender_harness: human`` in
each message they receive. The store's rules are the tools' own: ``send`` answers as
``msg_send`` does, ``inbox`` is ``msg_recv`` followed by ``msg_ack`` of each message.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from typing import TYPE_CHECKING, Any

from .parser import not_empty

if TYPE_CHECKING:
    from .store import Store

HARNESS = "human"


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


def person_key(host: str) -> str:
    """The person's harness key: stable for this user on this host, never a harness's own."""
    import uuid

    uid = os.getuid()
    try:
        import pwd

        login = pwd.getpwuid(uid).pw_name
    except (ImportError, KeyError):  # a uid with no passwd entry (some containers)
        login = ""
    return str(uuid.uuid5(uuid.NAMESPACE_URL, f"agents-room:human/{host}/{uid}/{login}"))


def default_label() -> str:
    import getpass

    try:
        return os.environ.get("USER") or getpass.getuser()
    except (KeyError, OSError):
        return f"uid-{os.getuid()}"


def join(store: Store, room: str | None, label: str | None) -> str:
    """The person's session id, joined (or rejoined) in the current folder's repo room and
    ``room``."""
    joined = store.room_join(cwd=os.getcwd(), pid=None, room=room, label=label or default_label(),
                             autonomy="hold", harness=HARNESS, harness_key=person_key(store.host))
    return joined.session_id


def send(args: argparse.Namespace) -> int:
    from .cli import open_store

    body = sys.stdin.read() if args.body == "-" else args.body
    with open_store(args, create=False) as store:  # no store: nobody to speak to, and none is made
        me = join(store, args.room, args.label)
        sent = store.msg_send(me, args.to, args.subject, body, reply_to=args.reply_to, ttl_s=args.ttl_s)
    if args.json:
        _print_json({"session_id": me, "message_id": sent.message_id, "recipients": sent.recipients,
                    "warning": sent.warning})
        return 0
    who = ", ".join(sent.recipients) or "nobody"
    print(f"sent message {sent.message_id} as session {me} to {len(sent.recipients)} "
          f"session{'' if len(sent.recipients) == 1 else 's'}: {who}")
    if sent.warning:
        print(f"warning: {sent.warning}")
    return 0


def inbox(args: argparse.Namespace) -> int:
    from .cli import open_store

    with open_store(args, create=False) as store:
        session = store.hook_session([person_key(store.host)], [])
        if session is None:
            print(f"no messages: you have no session in {store.path} yet (agents-room send makes it)")
            return 0
        got = store.msg_recv(session.id, args.limit)
        for m in got.messages:
            store.msg_ack(session.id, m.id)
    if args.json:
        import dataclasses

        _print_json({"session_id": session.id, "messages": [dataclasses.asdict(m) for m in got.messages],
                    "inbox": dataclasses.asdict(got.inbox) if got.inbox else None})
        return 0
    for m in got.messages:
        sender = f"{m.sender} ({m.sender_label})" if m.sender_label else m.sender
        reply = f", in reply to {m.reply_to}" if m.reply_to else ""
        print(f"#{m.id} from {sender}{reply}, {_iso(m.created_at)}: {m.subject}")
        for line in m.body.splitlines():
            print(f"    {line}")
    if got.inbox is not None:
        box = got.inbox
        last = f", the last at {_iso(box.last_delivery_at)}" if box.last_delivery_at else ""
        print(f"no new messages for session {session.id} (rooms {', '.join(box.rooms) or 'none'}; "
              f"{box.deliveries_total} received, {box.deliveries_read} read{last})")
    return 0


def _print_json(value: Any) -> None:
    print(json.dumps(value, indent=2, default=str))


def _iso(t: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(t))
