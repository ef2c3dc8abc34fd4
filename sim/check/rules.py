"""The rules the oracle (``sim/check/oracle.py``, ``sim/check/oracle_reads.py``) recomputes, by audit id.

Each rule belongs to one invariant of the checker's table (its group); a violation names the
rule id in its ``details["rule"]`` and at the head of its message, so a report says which rule
of the contract broke. docs/history.md holds the audit table: rule -> invariant -> mutant.
"""

from __future__ import annotations

from typing import Any

from .model import Problem

# group (the checker's invariant) -> rule id -> the rule in words
RULES: dict[str, dict[str, str]] = {
    "sessions": {
        "SR1": "a join keeps the session's rooms, adds the asked ones and its repo room",
        "SR2": "a join with the harness key of a live session rejoins it (same id); otherwise a new id",
        "SR3": "room_leave_room removes a room the session is in, and only that one (the rooms that remain); "
               "it is refused only for a room the session is not in",
        "SR4": "a departed session never acts again (no send, grant, renewal, read, join under its id); "
               "unknown_session only for an id that was not live",
    },
    "autonomy": {
        "AU1": "a new session starts at the asked level or notify, clamped by its rooms' lowest cap",
        "AU2": "a rejoin keeps the level unless it asks higher (raised, clamped); lower is refused",
        "AU3": "a cap lowers every live member above it, to the cap, in the same transaction, and no one else",
        "AU4": "an autonomy change starts from the level the session held",
        "AU5": "a delivery starts undeliverable to a recipient at wake with no wake lever, stored to any other",
        "AU6": "a join warns exactly when it refused a lower level or clamped the level to a cap",
    },
    "selectors": {
        "SE1": "'*' reaches every live session sharing a room with the sender, never the sender",
        "SE2": "'tag:<t>' reaches the sender's room peers that joined with tag t",
        "SE3": "'file:<glob>' reaches peers holding a live lease whose absolute, holder-relative or base path matches",
        "SE4": "'<session-id>' reaches that live session only",
        "SE5": "a message is stored in every room its sender was in when it sent",
        "SE6": "a send warns exactly when its selector matched nobody",
    },
    "expiry": {
        "EX1": "a message expires at its send time plus the client's ttl_s, never without one (its send event "
               "records that ttl_s)",
        "EX2": "a delivery expires only once its message's ttl_s passed, or when its recipient leaves",
        "EX3": "a recv never reads a message whose ttl_s has passed",
    },
    "recv-order": {
        "RV1": "a recv reads exactly the oldest min(limit, n) unread, unexpired deliveries of its caller",
        "RV2": "its answer lists those messages, oldest first",
        "RV3": "an empty answer only when nothing unread and unexpired waited at some moment of its window",
        "RV4": "only a msg_recv moves a delivery to read (room_history, msg_sent never do)",
        "RV5": "a recv returns each message with its sender, the sender's label, its subject and selector as sent",
    },
    "ack": {
        "AK1": "only the recipient's own msg_ack of that message moves its delivery to acked",
        "AK2": "an ok msg_ack is of a delivery the caller has read (or acked)",
        "AK3": "not_recipient only when the caller never had a delivery of that message",
        "AK4": "an ack is refused invalid_argument only while the caller's delivery is unread or expired",
    },
    "lease-ttl": {
        "LT1": "a grant expires at its time plus the client's ttl_s (600 when not given)",
        "LT2": "a renewal expires at its time plus the client's ttl_s, else the lease's own",
        "LT3": "a lease is swept only once its model expiry has passed",
        "LT4": "a grant is in the mode the client asked (exclusive when not given); a renewal keeps the lease's",
        "LT5": "a claim sweeps every lease whose time is up, each with its lease_expire, before it grants",
    },
    "lease-rules": {
        "LR1": "a denied claim met a conflicting live holder at some moment of its window",
        "LR2": "lease_renew fails with lease_not_held only when the caller held no live lease then",
        "LR3": "lease_release fails with lease_not_held only when the caller held no live lease then",
        "LR4": "a renewal or release event is of a live lease its session holds (model expiry)",
        "LR5": "a denied claim names a holder that was in its way (a conflicting live holder)",
        "LR6": "a claim of <file>/, <file> an existing regular file, is refused invalid_argument (no folder to the kernel)",
    },
    "leave-effects": {
        "LV1": "leave and prune release every lease of the session",
        "LV2": "leave and prune expire every unread delivery of the session",
        "LV3": "leave reports and clears exactly the rooms the session was in",
    },
    "wake": {
        "WK1": "a delivery is offered only by its recipient's own lever, to a live recipient at wake with a wake "
               "lever, while its message's ttl_s has not passed",
        "WK2": "a retry signals only an offered delivery last signalled at least the retry window before",
        "WK3": "a lever's look signals every delivery due throughout it (stored, or offered and last signalled "
               "a retry window before), or accepts it",
        "WK4": "an offered delivery is accepted only when the lever confirmed its signal or the recipient made a "
               "tool call after it",
        "WK5": "a look accepts the offers its session acted on since their signal (an ok tool call that wrote)",
    },
    "edit-guard": {
        "EG1": "an edit the guard allowed was made under an exclusive lease of the file its session took at an edit "
               "(the grant says at_edit; one the edit caused is exclusive, at_edit, for the guard's TTL)",
        "EG2": "an edit the guard denied names a holder whose live lease (any mode) was in its way",
        "EG3": "no two sessions' writes of one file overlap: an allowed edit holds the file for the least its lease "
               "lives, or until its session leaves; another session's allowed edit of it inside that span overlaps",
    },
    "read-answers": {
        "RD1": "room_who lists the live sessions sharing a room with the caller, itself included (with room: that "
               "room's members)",
        "RD2": "msg_unread counts the unread deliveries whose ttl_s has not passed",
        "RD3": "lease_check lists the live holders of the path (free when none)",
        "RD4": "lease_list lists every live lease, 'mine' for the caller's",
        "RD5": "room_history answers the last 'limit' messages of the room asked (else the caller's repo room), "
               "oldest first",
        "RD6": "msg_sent answers the caller's messages newest first, each recipient's state as it was (an overdue "
               "unread one as expired), and the recipients that left",
        "RD7": "an empty msg_recv's inbox block: the caller's rooms, its deliveries ever, read, and the last one's time",
        "RD8": "room_who calls alive every member on the caller's host, with a pid, whose agent process ran "
               "throughout the read",
    },
}
GROUP_OF = {rule: group for group, rules in RULES.items() for rule in rules}
GROUPS = tuple(RULES)


def problem(rule: str, message: str, **details: Any) -> Problem:
    """A violation of ``rule``: its group is the invariant, its id heads the message."""
    return Problem(GROUP_OF[rule], f"[{rule}] {message}", {"rule": rule, **details})  # type: ignore[arg-type]
