"""A person in the room: a session of harness ``human`` that speaks and reads from the command
line (``agents-room send`` and ``inbox``), by the tools' own rules.

The person's session is found again at every command by its harness key, a UUID derived from
the host id and the user (uid and login name): one session per person per store and host,
across commands, shells and folders, with no file of its own to keep. A send rejoins it by
that key (sessions.join): the rooms it names are added, its folder (and so its repo room)
becomes the command's. It records no process (``pid`` NULL), so its liveness is ``unknown``
and ``prune`` never takes it; its autonomy is ``hold``: a person reads mail by asking.

Agents see a person as ``harness: human`` in ``room_who`` and as ``sender_harness: human`` in
each message (messages.Message).
"""

from __future__ import annotations

import os
import uuid
from typing import Any

from . import bounds, messages, paths, rooms, sessions
from .messages import Sent

HARNESS = "human"
_NAMESPACE = uuid.UUID("6b1f3c1e-4f0a-5d2e-9c1b-a9e0a7c0d301")  # agents-room's people; never change it


def person_key(host: str, uid: int | None = None, login: str | None = None) -> str:
    """The harness key of this user's person session on ``host``: the same at every command,
    never a harness's own (those are random UUIDs; this one is a name-based UUID)."""
    uid = os.getuid() if uid is None else uid
    if login is None:
        try:
            import pwd

            login = pwd.getpwuid(uid).pw_name
        except (ImportError, KeyError):  # a uid without a passwd entry (some containers)
            login = ""
    return str(uuid.uuid5(_NAMESPACE, f"{host}/{uid}/{login}"))


def send(
    store: Any, *, cwd: str, label: Any, to: Any, subject: Any, body: Any = None, room: Any = None,
    reply_to: Any = None, ttl_s: Any = None,
) -> tuple[str, Sent]:
    """Join (or rejoin) this user's person session in ``cwd``'s repo room and ``room``, and
    send as it, in one write transaction: a send that fails (a ``to`` that names nobody
    known, a ``reply_to`` that does not exist) joins nothing either. Returns the person's
    session id and ``msg_send``'s answer.

    Raises ``InvalidArgument`` naming the field, ``UnknownSession`` for an unknown ``to``."""
    room = None if room is None else bounds.room(room)
    label = bounds.label(label)
    subject, body = bounds.subject(subject), bounds.body(body)
    reply_to = None if reply_to is None else bounds.message_id(reply_to, "reply_to")
    ttl = bounds.message_ttl(ttl_s)
    cwd = paths.canonical(paths.absolute(cwd))  # as an agent's join makes it (Store.room_join)
    repo = rooms.repo_room(cwd)
    with store.db.write() as tx:
        joined = sessions.join(
            tx, repo_room=repo, cwd=cwd, pid=None, harness=HARNESS,
            harness_key=person_key(store.host), room=room, extra_rooms=[], label=label, tags=None, autonomy="hold",
            wake_lever=None, host=store.host,
        )
        me = sessions.resolve(tx, joined.session_id, store.path, touch=False)
        return joined.session_id, messages.send(tx, me, to, subject, body, reply_to, ttl, store.path)


def session_of(store: Any) -> str | None:
    """This user's live person session in the store, or None (read-only: never joins)."""
    with store.db.read() as tx:
        return tx.scalar(
            "SELECT id FROM sessions WHERE harness_key = ? AND left_at IS NULL ORDER BY created_at DESC LIMIT 1",
            (person_key(store.host),),
        )


def rooms_of(store: Any, session_id: str) -> list[str]:
    """The rooms ``session_id`` is in, by name (read-only)."""
    with store.db.read() as tx:
        return [r[0] for r in tx.all("SELECT room FROM memberships WHERE session_id = ? ORDER BY room", (session_id,))]
