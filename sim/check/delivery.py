"""Delivery arithmetic (invariant ``delivery-exactly-once``), Jepsen's set-full / total-queue.

Every (message, recipient) pair the store resolved at send time must reach that recipient
through an ``ok`` ``msg_recv`` exactly once:

- ``duplicated``: returned more than once;
- ``unexpected``: a recv returned a message with no delivery for that session;
- ``lost``: never returned, while the store says it was read (by no unsettled recv), or while
  the recipient drained after the send (an ``ok`` empty recv invoked after it) and the
  delivery is still unread;
- ``unread_recipient_gone``: never returned, and the recipient left, or its last op ended
  ``info`` (it died) before it could read: not a violation;
- ``expired``: the message's own TTL passed unread: not a violation;
- ``read_by_info_recv``: read by a recv whose answer never came back: not a violation;
- ``undrained``: unread, the recipient lives on and never drained after the send: loss cannot
  be decided, and the verdict is ``unknown``.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass

from .model import UNREAD, Problem, stamp
from .operation import Op
from .replay import Replay


@dataclass(frozen=True)
class Arithmetic:
    messages: int = 0
    sent: int = 0  # (message, recipient) pairs resolved at send time
    delivered_once: int = 0
    lost: int = 0
    duplicated: int = 0
    unexpected: int = 0
    unread_recipient_gone: int = 0
    expired: int = 0
    read_by_info_recv: int = 0
    undrained: int = 0


def tally(rep: Replay, ops: list[Op], owner: dict[int, Op], slack: float) -> tuple[Arithmetic, list[Problem]]:
    problems: list[Problem] = []
    receipts: dict[int, int] = defaultdict(int)
    drained: dict[str, float] = {}  # session -> latest invoke of an ok recv that came back empty
    last_op: dict[str, Op] = {}
    done_at: dict[int, float] = {}  # message id -> when its sender knew it was stored
    unexpected = 0
    for op in ops:
        if op.session is not None:
            last_op[op.session] = op  # ops come in invoke order
        if op.outcome != "ok":
            continue
        if op.f == "msg_recv":
            ids = (op.result or {}).get("message_ids") or []
            if not ids:
                drained[op.session] = max(drained.get(op.session, 0.0), op.start)  # type: ignore[index]
            for mid in ids:
                key = rep.pair(mid, op.session)  # type: ignore[arg-type]
                if key not in rep.deliveries:
                    unexpected += 1
                    problems.append(Problem("delivery-exactly-once", (
                        f"unexpected: {op.describe()} returned message {mid}, which has no delivery for that session"),
                        {"message_id": mid, "recipient": op.session, "wall": op.end}))
                    continue
                receipts[key] += 1
                if receipts[key] == 2:
                    problems.append(_pair_problem(rep, key, "duplicated", f"returned again by {op.describe()}"))
        elif op.f == "msg_send":
            mid = (op.result or {}).get("message_id")
            send = rep.sends.get(mid)  # type: ignore[arg-type]
            if send is None:
                continue  # no send event: the cross-check reports it
            done_at[mid] = op.end  # type: ignore[index,assignment]
            told = set((op.result or {}).get("recipients") or [])
            if told != set(send.recipients):
                problems.append(Problem("delivery-exactly-once", (
                    f"{op.describe()} answered recipients {sorted(told)} for message {mid}, but its send event "
                    f"(seq {send.seq}) resolved {sorted(send.recipients)}"), {"seq": send.seq, "message_id": mid}))

    counts = {"duplicated": 0, "lost": 0, "delivered_once": 0, "unread_recipient_gone": 0, "expired": 0,
              "read_by_info_recv": 0, "undrained": 0}
    for key, state in rep.deliveries.items():
        mid, recipient = rep.unpair(key)
        n = receipts.get(key, 0)
        if n > 1:
            counts["duplicated"] += 1
        elif n == 1:
            counts["delivered_once"] += 1
            if state in UNREAD:
                problems.append(_pair_problem(rep, key, "lost", f"a recv returned it, yet the store still holds it {state}"))
        elif state in ("read", "acked"):
            reader = owner.get(rep.read_seq.get(key, -1))
            if reader is not None and reader.outcome == "info":
                counts["read_by_info_recv"] += 1
            else:
                counts["lost"] += 1
                by = f"by {reader.describe()}, which did not return it" if reader else "by no recv in the history"
                problems.append(_pair_problem(rep, key, "lost", f"the store marked it read (seq {rep.read_seq.get(key)}) {by}"))
        elif state == "expired":
            counts["unread_recipient_gone" if recipient in rep.left else "expired"] += 1
        else:
            send = rep.sends.get(mid)
            after = done_at.get(mid, (send.at if send else 0.0) + slack)
            last = last_op.get(recipient)
            if recipient in rep.left or (last is not None and last.outcome == "info" and drained.get(recipient, 0.0) < after):
                counts["unread_recipient_gone"] += 1
            elif drained.get(recipient, float("-inf")) >= after:
                counts["lost"] += 1
                problems.append(_pair_problem(rep, key, "lost", (
                    f"the recipient drained at {stamp(drained[recipient])}, after the send, and got nothing; "
                    f"the store holds it {state}")))
            else:
                counts["undrained"] += 1
    arithmetic = Arithmetic(messages=len(rep.sends), sent=len(rep.deliveries), unexpected=unexpected, **counts)
    return arithmetic, problems


def _pair_problem(rep: Replay, key: int, what: str, why: str) -> Problem:
    mid, recipient = rep.unpair(key)
    send = rep.sends.get(mid)
    sent = f"sent by session {send.sender} (seq {send.seq}, at {stamp(send.at)})" if send else "never sent"
    return Problem("delivery-exactly-once", f"{what}: message {mid} {sent} to session {recipient}: {why}",
                   {"seq": send.seq if send else None, "message_id": mid, "recipient": recipient, "kind": what})

