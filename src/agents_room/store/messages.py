"""Messages and deliveries: send by selector, receive (marks read), ack, unread count,
what I sent, a room's read-only history. The forward-only delivery states, and
:func:`advance` along them, are :mod:`.delivery`'s."""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass

from . import bounds, coverage, paths
from .delivery import UNREAD, advance
from .delivery import UNREAD_SQL as _UNREAD_SQL
from .errors import InvalidArgument, NotRecipient, RoomError, UnknownSession
from .sessions import Caller, explain_unknown_recipient
from .engine import Tx


@dataclass(frozen=True)
class Message:
    id: int
    sender: str
    sender_label: str | None
    to: str
    subject: str
    body: str
    reply_to: int | None
    created_at: float
    expires_at: float | None
    # The sender's harness: "human" for a person (agents-room send), else the agent's. Last,
    # so the answers keep every field they had, in their order.
    sender_harness: str | None


@dataclass(frozen=True)
class Sent:
    message_id: int
    recipients: list[str]
    warning: str | None


@dataclass(frozen=True)
class Inbox:
    rooms: list[str]
    deliveries_total: int
    deliveries_read: int
    last_delivery_at: float | None


@dataclass(frozen=True)
class SentMessage:
    id: int
    to: str
    subject: str
    sent: float
    states: dict[str, str]
    pending: int
    left: list[str]


_MESSAGE = (
    "m.id, m.sender, s.label, m.selector, m.subject, m.body, m.reply_to, m.created_at, m.expires_at, s.harness"
)


# -- send ----------------------------------------------------------------------------------------


def _peers(tx: Tx, sender: str) -> list[str]:
    """Every live session sharing at least one room with ``sender``, except the sender."""
    return [r[0] for r in tx.all(
        "SELECT DISTINCT m2.session_id FROM memberships m1 JOIN memberships m2 ON m2.room = m1.room "
        "WHERE m1.session_id = ? AND m2.session_id <> ? ORDER BY m2.session_id",
        (sender, sender),
    )]


# A `file:` selector's matches, worked out before the write transaction: (glob, lease path,
# holder's cwd) -> whether the glob reaches that holder.
Matches = dict[tuple[str, str, str], bool]
# At most this many matches inside the write transaction (leases taken since the snapshot);
# more, and the send starts again from a new snapshot (:class:`Stale`).
LATE_MAX = 16
SNAPSHOTS = 3  # read snapshots a send is matched against before it is store_busy


class Stale(Exception):
    """More leases than :data:`LATE_MAX` were taken between the snapshot and the write
    transaction; nothing was written."""


def _file_patterns(pattern: str) -> list[str]:
    """A ``file:`` glob as written (a lease stored before paths were canonical) and canonical
    (store/paths.py)."""
    return list(dict.fromkeys((pattern, paths.glob(pattern))))


def _live_leases(tx: Tx) -> list[tuple[str, str, str]]:
    return tx.all(
        "SELECT l.session_id, l.path, s.cwd FROM leases l JOIN sessions s ON s.id = l.session_id "
        "WHERE l.expires_at > ?",
        (tx.now,),
    )


def match_outside(read: Callable[[], AbstractContextManager[Tx]], to: object) -> Matches | None:
    """A ``file:`` selector matched against the live leases of a read snapshot, outside the
    write lock: matching is the costly part of a send (each lease's path in three forms,
    each an fnmatch of up to 256 characters against up to 4096), and a writer holding the
    lock meanwhile stops every other agent's writes. :func:`resolve_selector` then matches,
    inside the transaction, only the leases taken since (at most :data:`LATE_MAX`). None for
    another selector, or one the transaction will refuse (it refuses it in its own order)."""
    if not (isinstance(to, str) and to.startswith("file:")) or "\x00" in to:
        return None
    try:
        patterns = _file_patterns(bounds.glob(to[5:]))
    except InvalidArgument:
        return None
    try:
        with read() as tx:
            rows = {(path, cwd) for _sid, path, cwd in _live_leases(tx)}
    except RoomError:  # busy, say: the transaction matches every lease itself, as it did before
        return None
    now, identify = paths.current(), paths.identifier()
    return {(p, path, cwd): file_reaches(p, path, cwd, now, identify) for p in patterns for path, cwd in rows}


def file_reaches(pattern: str, path: str, cwd: str, now: Callable[[str], str],
                 identify: Callable[[str], list[str]] | None = None) -> bool:
    """Whether a ``file:`` glob reaches the holder of a lease of ``path`` whose session's cwd is
    ``cwd`` (store/coverage.py's glob_reaches); and a literal one (no wildcard), also when the
    file it names, made absolute against that cwd when relative, is the leased file or beneath
    the leased folder as both resolve now (``now``: store/paths.py's current): a lease taken
    before a folder above it was renamed, or a target naming it by its new name or its old; or,
    with ``identify`` (store/paths.py's identifier), as the kernel sees both names now: the
    leased file's or folder's device and inode among the target's (a bind mount, a hard link)."""
    if coverage.glob_reaches(pattern, path, cwd):
        return True
    if not paths.literal(pattern) or not (pattern.startswith("/") or cwd):
        return False
    leased, named = now(path), paths.absolute(pattern, cwd)
    target = now(named)
    if (leased != path or target != named) and coverage.covers(leased, target):
        return True
    if identify is None:
        return False
    own = identify(leased)[:1]
    return bool(own) and own[0] in identify(target)


def resolve_selector(tx: Tx, sender: Caller, to: object, store_path: str, known: Matches | None = None) -> list[str]:
    """The recipients of a selector, resolved now. Broadcasts never include the sender.
    ``known``: a ``file:`` selector's matches worked out before (:func:`match_outside`); with
    it, more than :data:`LATE_MAX` leases to match here raise :class:`Stale`."""
    if not isinstance(to, str) or not to:
        raise InvalidArgument("to", "must be '*', a session id, 'file:<glob>' or 'tag:<tag>'")
    if "\x00" in to:
        raise InvalidArgument("to", "must not contain NUL bytes")
    if to == "*":
        return _peers(tx, sender.id)
    if to.startswith("tag:"):
        tag = bounds._text("to", to[4:], limit=bounds.TAG_MAX, allow_empty=False)
        peers = set(_peers(tx, sender.id))
        return sorted(r[0] for r in tx.all("SELECT session_id FROM session_tags WHERE tag = ?", (tag,)) if r[0] in peers)
    if to.startswith("file:"):
        pattern = bounds.glob(to[5:])
        patterns = _file_patterns(pattern)
        if pattern.startswith("/") and pattern.endswith("/") and paths.is_file(patterns[-1]):
            raise InvalidArgument("to", f"file:{pattern} ends with / but {patterns[-1].rstrip('/')} is a file, "
                                        "not a directory: name it without the /")
        peers = set(_peers(tx, sender.id))
        late = 0
        now, identify = paths.current(), paths.identifier()

        def reaches(p: str, path: str, cwd: str) -> bool:
            nonlocal late
            found = None if known is None else known.get((p, path, cwd))
            if found is not None:
                return found
            late += 1
            if known is not None and late > LATE_MAX:
                raise Stale
            return file_reaches(p, path, cwd, now, identify)

        return sorted({sid for sid, path, cwd in _live_leases(tx)
                       if sid in peers and any(reaches(p, path, cwd) for p in patterns)})
    if to.startswith(("tag", "file")) and ":" in to:
        raise InvalidArgument("to", "selectors are '*', a session id, 'file:<glob>' or 'tag:<tag>'")
    value = bounds.session_id_text(to, "to")
    if tx.scalar("SELECT 1 FROM sessions WHERE id = ? AND left_at IS NULL", (value,)) is None:
        raise UnknownSession(explain_unknown_recipient(tx, value, store_path))
    return [value]


def send(
    tx: Tx, sender: Caller, to: str, subject: str, body: str, reply_to: int | None,
    ttl_s: float | None, store_path: str, known: Matches | None = None,
) -> Sent:
    """Store one message: a row per room the sender is in, a delivery per recipient.
    A recipient at ``wake`` whose harness has no wake lever starts ``undeliverable``."""
    recipients = resolve_selector(tx, sender, to, store_path, known)
    if reply_to is not None and tx.scalar("SELECT 1 FROM messages WHERE id = ?", (reply_to,)) is None:
        raise InvalidArgument("reply_to", f"message {reply_to} does not exist")
    expires_at = None if ttl_s is None else tx.now + ttl_s
    mid = tx.scalar(
        "INSERT INTO messages (sender, selector, subject, body, reply_to, created_at, expires_at) "
        "VALUES (?, ?, ?, ?, ?, ?, ?) RETURNING id",
        (sender.id, to, subject, body, reply_to, tx.now, expires_at),
    )
    rooms = [r[0] for r in tx.all("SELECT room FROM memberships WHERE session_id = ? ORDER BY room", (sender.id,))]
    tx.many("INSERT INTO message_rooms (room, message_id) VALUES (?, ?)", [(r, mid) for r in rooms])
    states: dict[str, str] = {}
    if recipients:
        marks = ",".join("?" * len(recipients))
        for sid, autonomy, lever in tx.all(
            f"SELECT id, autonomy, wake_lever FROM sessions WHERE id IN ({marks})", tuple(recipients)
        ):
            states[sid] = "undeliverable" if autonomy == "wake" and not lever else "stored"
        tx.many(
            "INSERT INTO deliveries (recipient, message_id, state, created_at, updated_at) VALUES (?, ?, ?, ?, ?)",
            [(sid, mid, states[sid], tx.now, tx.now) for sid in recipients],
        )
    tx.notify_mail(recipients)  # PostgreSQL: waiters are told at commit (store/mailwait.py)
    tx.event("send", sender.id, message_id=mid, selector=to, subject=subject, rooms=rooms, recipients=states,
             ttl_s=ttl_s, expires_at=expires_at)
    warning = None if recipients else f"selector {to!r} matched nobody: the message is stored with 0 recipients"
    return Sent(mid, recipients, warning)


# -- receive, ack, count ---------------------------------------------------------------------------


def _expire_overdue(tx: Tx, recipient: str) -> None:
    overdue = [r[0] for r in tx.all(
        f"SELECT d.message_id FROM deliveries d JOIN messages m ON m.id = d.message_id "
        f"WHERE d.recipient = ? AND d.state IN {_UNREAD_SQL} AND m.expires_at <= ?",
        (recipient, tx.now),
    )]
    advance(tx, recipient, overdue, "expired")


def expire_unread_for(tx: Tx, recipient: str) -> None:
    """On leave or prune: nothing unread will ever be read."""
    ids = [r[0] for r in tx.all(
        f"SELECT message_id FROM deliveries WHERE recipient = ? AND state IN {_UNREAD_SQL}", (recipient,)
    )]
    advance(tx, recipient, ids, "expired")


def recv(tx: Tx, session: Caller, limit: int) -> tuple[list[Message], Inbox | None]:
    """Unread, unexpired deliveries oldest first, marked ``read``. When there are none, the
    inbox block says why the answer might be empty."""
    _expire_overdue(tx, session.id)
    # ORDER BY m.id, not d.message_id (equal by the join): ordered by the primary key, the
    # planner would walk every delivery the session ever had to find the unread ones; this
    # way it reads only the unread, from deliveries_pending (tests/store/test_query_plans.py).
    rows = tx.all(
        f"SELECT {_MESSAGE} FROM deliveries d JOIN messages m ON m.id = d.message_id "
        f"LEFT JOIN sessions s ON s.id = m.sender "
        f"WHERE d.recipient = ? AND d.state IN {_UNREAD_SQL} ORDER BY m.id LIMIT ?",
        (session.id, limit),
    )
    messages = [Message(*r) for r in rows]
    if messages:
        advance(tx, session.id, [m.id for m in messages], "read")
        return messages, None
    return [], inbox(tx, session)


def inbox(tx: Tx, session: Caller) -> Inbox:
    rooms = [r[0] for r in tx.all("SELECT room FROM memberships WHERE session_id = ? ORDER BY room", (session.id,))]
    total, read, last = tx.one(
        "SELECT count(*), coalesce(sum(CASE WHEN state IN ('read', 'acked') THEN 1 ELSE 0 END), 0), max(created_at) FROM deliveries WHERE recipient = ?",
        (session.id,),
    )
    return Inbox(rooms, total, read, last)


def ack(tx: Tx, session: Caller, message_id: int) -> None:
    """Confirm a message the caller has read. Acking twice is harmless.

    Raises ``NotRecipient`` if it was never delivered to the caller, ``InvalidArgument`` if
    it is not read yet (or expired unread)."""
    state = tx.scalar("SELECT state FROM deliveries WHERE recipient = ? AND message_id = ?", (session.id, message_id))
    if state is None:
        raise NotRecipient(f"message {message_id} was not delivered to session {session.id}")
    if state == "acked":
        return
    if state == "expired":
        raise InvalidArgument("message_id", f"message {message_id} expired before it was read")
    if state != "read":
        raise InvalidArgument("message_id", f"message {message_id} is not read yet; msg_recv it first")
    advance(tx, session.id, [message_id], "acked")


def unread(tx: Tx, session: Caller) -> int:
    return tx.scalar(
        f"SELECT count(*) FROM deliveries d JOIN messages m ON m.id = d.message_id "
        f"WHERE d.recipient = ? AND d.state IN {_UNREAD_SQL} AND (m.expires_at IS NULL OR m.expires_at > ?)",
        (session.id, tx.now),
    )


def sent(tx: Tx, session: Caller, limit: int) -> list[SentMessage]:
    """The caller's messages, newest first, with each recipient's state (an unread delivery
    past its message's expiry shows as ``expired``)."""
    out = []
    for mid, selector, subject, created_at, expires_at in tx.all(
        "SELECT id, selector, subject, created_at, expires_at FROM messages WHERE sender = ? ORDER BY id DESC LIMIT ?",
        (session.id, limit),
    ):
        overdue = expires_at is not None and expires_at <= tx.now
        states, left = {}, []
        for recipient, state, left_at in tx.all(
            "SELECT d.recipient, d.state, s.left_at FROM deliveries d JOIN sessions s ON s.id = d.recipient "
            "WHERE d.message_id = ? ORDER BY d.recipient",
            (mid,),
        ):
            states[recipient] = "expired" if overdue and state in UNREAD else state
            if left_at is not None:
                left.append(recipient)
        pending = sum(1 for s in states.values() if s in UNREAD)
        out.append(SentMessage(mid, selector, subject, created_at, states, pending, left))
    return out


def history(tx: Tx, room: str, limit: int) -> list[Message]:
    """The last ``limit`` messages sent in ``room``, oldest first. Read-only."""
    rows = tx.all(
        f"SELECT * FROM (SELECT {_MESSAGE} FROM message_rooms r JOIN messages m ON m.id = r.message_id "
        f"LEFT JOIN sessions s ON s.id = m.sender WHERE r.room = ? ORDER BY m.id DESC LIMIT ?) AS h ORDER BY 1",
        (room, limit),
    )
    return [Message(*r) for r in rows]
