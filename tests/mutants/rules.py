"""Broken stores for the oracle's rules: each is the shipped store with one realistic one-line
bug (``mutation.rewrite``: one exact snippet of one function replaced), opened as
``SIM_STORE_FACTORY=mutants.rules:<name>``. The table names the rule each one breaks; the
matrix (``mutants/__init__.py``) names the invariant that must catch it."""

from __future__ import annotations

import importlib
from pathlib import Path
from types import ModuleType
from typing import Any

from agents_room.store import Store, bounds, coverage, leases, messages, reads, rooms, sessions, wake
from agents_room.store.messages import Message

from .mutation import rewrite

# The module: the package's own name ``liveness`` is the function it exports.
liveness = importlib.import_module("agents_room.store.liveness")

# name -> (rule, module, function, old snippet, new snippet, the bug in words)
MUTATIONS: dict[str, tuple[str, ModuleType, str, str, str, str]] = {
    # -- sessions and rooms
    "rejoin_skips_rooms": ("SR1", sessions, "join", "[(sid, r, tx.now) for r in wanted_rooms],",
                           "[(sid, r, tx.now) for r in wanted_rooms if existing is None],",
                           "a rejoin does not add the rooms it asks for (only a new session joins them)"),
    "rejoin_new_session": ("SR2", sessions, "join", "existing = Session.from_row(row) if row else None",
                           "existing = None",
                           "the harness key of a live session makes a new session instead of rejoining it"),
    "leave_keeps_memberships": ("SE1", rooms, "leave",
                                'tx.execute("DELETE FROM memberships WHERE session_id = ?", (session.id,))', "pass",
                                "room_leave keeps the memberships: broadcasts still reach the departed session"),
    "message_first_room_only": ("SE5", messages, "send",
                                '"SELECT room FROM memberships WHERE session_id = ? ORDER BY room", (sender.id,)',
                                '"SELECT room FROM memberships WHERE session_id = ? ORDER BY room LIMIT 1", (sender.id,)',
                                "a message is stored in the sender's first room only"),
    "leave_room_clears_all": ("SR3", rooms, "leave_room",
                              '"DELETE FROM memberships WHERE session_id = ? AND room = ?", (session.id, room)',
                              '"DELETE FROM memberships WHERE session_id = ? AND ? IS NOT NULL", (session.id, room)',
                              "room_leave_room deletes every membership of the session, not just that room's"),
    "departed_session_acts": ("SR4", sessions, "resolve",
                              "row = tx.one(_TOUCH, (tx.now, value)) if touch else tx.one(_LOOKUP, (value,))",
                              'row = (tx.one(_TOUCH.replace(" AND left_at IS NULL", ""), (tx.now, value)) if touch\n'
                              '           else tx.one(_LOOKUP.replace(" AND left_at IS NULL", ""), (value,)))',
                              "a session id is looked up without left_at: a departed session still acts"),
    # -- selectors
    "broadcast_to_sender": ("SE1", messages, "resolve_selector", "return _peers(tx, sender.id)",
                            "return sorted({*_peers(tx, sender.id), sender.id})",
                            "a broadcast reaches its own sender"),
    "rooms_ignored": ("SE1", messages, "_peers", "JOIN memberships m2 ON m2.room = m1.room ",
                      "JOIN memberships m2 ON m2.room = m2.room ",
                      "the peer query joins on the wrong column: every session is a peer, shared room or not"),
    "tag_compared_as_range": ("SE2", messages, "resolve_selector", '"SELECT session_id FROM session_tags WHERE tag = ?"',
                              '"SELECT session_id FROM session_tags WHERE tag >= ?"',
                              "tag:<t> compares tags with >=, reaching peers whose tag sorts after t"),
    "file_no_relative": ("SE3", coverage, "glob_reaches",
                         "forms = [lease, os.path.relpath(lease, holder_cwd), os.path.basename(lease)]",
                         "forms = [lease, os.path.basename(lease)]",
                         "file:<glob> forgets the holder-relative form of the leased path"),
    "file_relative_to_sender": ("SE3", messages, "resolve_selector", "coverage.glob_reaches(p, path, cwd)",
                                "coverage.glob_reaches(p, path, sender.cwd)",
                                "file:<glob> takes the leased path relative to the sender's cwd, not the holder's"),
    "departed_recipient": ("SE4", messages, "resolve_selector",
                           '"SELECT 1 FROM sessions WHERE id = ? AND left_at IS NULL"',
                           '"SELECT 1 FROM sessions WHERE id = ?"',
                           "a session id that left is still a recipient (looked up without left_at)"),
    # -- expiry
    "expire_all": ("EX2", messages, "_expire_overdue", "AND m.expires_at <= ?",
                   "AND coalesce(m.expires_at, 0) <= ?",
                   "a message without ttl_s counts as expired: every message expires unread"),
    "ttl_in_ms": ("EX1", messages, "send", "expires_at = None if ttl_s is None else tx.now + ttl_s",
                  "expires_at = None if ttl_s is None else tx.now + ttl_s / 1000",
                  "a message's ttl_s is taken as milliseconds"),
    "read_overdue": ("EX3", messages, "recv", "_expire_overdue(tx, session.id)", "pass",
                     "msg_recv forgets to expire overdue deliveries first and returns them"),
    # -- recv
    "recv_newest_first": ("RV1", messages, "recv", "ORDER BY m.id LIMIT ?", "ORDER BY m.id DESC LIMIT ?",
                          "msg_recv answers newest first (and reads the newest page)"),
    "recv_limit_plus_one": ("RV1", messages, "recv", "(session.id, limit),", "(session.id, limit + 1),",
                            "msg_recv reads one message more than its limit"),
    "recv_stored_only": ("RV1", messages, "recv", "d.state IN {_UNREAD_SQL} ORDER BY m.id",
                         "d.state = 'stored' ORDER BY m.id",
                         "msg_recv reads only stored deliveries (undeliverable, offered wait for ever)"),
    # -- ack
    "ack_any_recipient": ("AK2", messages, "ack",
                          '"SELECT state FROM deliveries WHERE recipient = ? AND message_id = ?", (session.id, message_id)',
                          '"SELECT state FROM deliveries WHERE message_id = ?", (message_id,)',
                          "msg_ack looks the delivery up by message id alone: another's read message acks"),
    "ack_all_readers": ("AK1", messages, "ack", 'advance(tx, session.id, [message_id], "acked")',
                        "for (r,) in tx.all(\"SELECT recipient FROM deliveries WHERE message_id = ? AND state = 'read'\", "
                        '(message_id,)):\n        advance(tx, r, [message_id], "acked")',
                        "msg_ack acks the message for every recipient that has read it, not the caller's alone"),
    "ack_read_only_lookup": ("AK3", messages, "ack",
                             '"SELECT state FROM deliveries WHERE recipient = ? AND message_id = ?"',
                             "\"SELECT state FROM deliveries WHERE recipient = ? AND message_id = ? AND state IN ('read', 'acked')\"",
                             "msg_ack looks up read deliveries only: an unread or expired one is refused not_recipient"),
    # -- sends
    "sent_hides_undeliverable": ("answer", messages, "send", "return Sent(mid, recipients, warning)",
                                 'return Sent(mid, [r for r in recipients if states[r] == "stored"], warning)',
                                 "msg_send answers only the recipients stored, leaving out the undeliverable ones"),
    "undeliverable_or_for_and": ("AU5", messages, "send", 'if autonomy == "wake" and not lever else "stored"',
                                 'if autonomy == "wake" or not lever else "stored"',
                                 "a delivery starts undeliverable when its recipient is at wake or has no wake lever"),
    # -- leases
    "denial_names_first_holder": ("LR5", leases, "claim", "h = min(in_the_way, key=lambda x: (x.mode, x.token))",
                                  "h = min(covering, key=lambda x: (x.mode, x.token))",
                                  "a denied claim names the path's first holder, not one in its way"),
    "claim_keeps_exclusive": ("LT4", leases, "claim", "token = _next_token(tx)",
                              'mode = "exclusive" if mine is not None and mine.mode == "exclusive" else mode\n'
                              "    token = _next_token(tx)",
                              "an exclusive holder's re-claim in shared mode stays exclusive (the step-down ignored)"),
    "shared_lease_1ms": ("LT1", leases, "claim", "expires_at = tx.now + ttl_s",
                         'expires_at = tx.now + (ttl_s if mode == "exclusive" else ttl_s / 1000)',
                         "a shared lease is granted for ttl_s milliseconds"),
    "renew_keeps_ttl": ("LT2", leases, "renew", "ttl = own_ttl if ttl_s is None else ttl_s", "ttl = own_ttl",
                        "lease_renew ignores the ttl_s it was given"),
    "sweep_grace": ("LR4", leases, "sweep", "WHERE expires_at <= ?", "WHERE expires_at <= ? - 1",
                    "the sweep keeps leases a second past their expiry: lease_renew renews a lease that ran out"),
    "release_whole_path": ("LR3", leases, "release",
                           'delete = "DELETE FROM leases WHERE path = ? AND session_id = ? RETURNING mode, token"',
                           'delete = "DELETE FROM leases WHERE path = ? AND ? IS NOT NULL RETURNING mode, token"',
                           "lease_release deletes every holder's lease on the path"),
    "renew_same_token": ("token", leases, "renew", "token = _next_token(tx)",
                         "token = tx.scalar(\"SELECT value FROM counters WHERE name = 'lease_token'\")",
                         "lease_renew returns the current token instead of a new one"),
    "upgrade_beside_sharers": ("upgrade", leases, "claim",
                               'in_the_way = others if mode == "exclusive" else',
                               'in_the_way = (others if mine is None else []) if mode == "exclusive" else',
                               "a shared holder's upgrade to exclusive ignores the other sharers"),
    "shared_denied_by_shared": ("LR1", leases, "claim", 'else [h for h in others if h.mode == "exclusive"]',
                                "else others", "a shared claim is denied beside another shared holder"),
    "renew_exclusive_only": ("LR2", leases, "renew",
                             '"SELECT mode, ttl_s, acquired_at FROM leases WHERE path = ? AND session_id = ?", '
                             '(path, session.id))\n    if row is None and',
                             '"SELECT mode, ttl_s, acquired_at FROM leases WHERE path = ? AND session_id = ? '
                             'AND mode = \'exclusive\'", (path, session.id))\n    if row is None and',
                             "lease_renew looks for an exclusive lease only: a shared holder's renewal is refused"),
    "release_exclusive_only": ("LR3", leases, "release",
                               '"DELETE FROM leases WHERE path = ? AND session_id = ? RETURNING mode, token"',
                               '"DELETE FROM leases WHERE path = ? AND session_id = ? AND mode = \'exclusive\' '
                               'RETURNING mode, token"',
                               "lease_release deletes an exclusive lease only: a shared holder cannot release"),
    # -- leave
    "leave_keeps_leases": ("LV1", rooms, "leave", "release_all(tx, session.id, reason)", "pass",
                           "room_leave and prune leave the session's leases in place"),
    "leave_keeps_unread": ("LV2", rooms, "leave", "expire_unread_for(tx, session.id)", "pass",
                           "room_leave and prune leave the session's unread deliveries unread"),
    # -- autonomy
    "new_session_ignores_ask": ("AU1", sessions, "_decide_autonomy", 'level = asked or "notify"', 'level = "notify"',
                                "a new session starts at notify whatever level it asked"),
    "rejoin_lowers": ("AU2", sessions, "_decide_autonomy", "        level = stored\n        warning = (",
                      "        level = asked\n        warning = (",
                      "a rejoin that asks a lower level gets it (with the refusal's warning)"),
    "rejoin_not_clamped": ("AU2", sessions, "_decide_autonomy", "if LEVEL[level] > LEVEL[cap]:",
                           "if stored is None and LEVEL[level] > LEVEL[cap]:",
                           "the room cap clamps new sessions only, not a rejoin's raise"),
    "cap_off_by_one": ("AU3", rooms, "set_cap", "if rank > LEVEL[autonomy]]", "if rank > LEVEL[autonomy] + 1]",
                       "a cap lowers only members two levels above it"),
    # -- reads
    "unread_counts_overdue": ("RD2", messages, "unread", "AND (m.expires_at IS NULL OR m.expires_at > ?)",
                              "AND ? IS NOT NULL",
                              "msg_unread counts deliveries whose ttl_s passed (not yet expired by a recv)"),
    "unread_counts_unacked": ("RD2", messages, "unread", "d.state IN {_UNREAD_SQL} AND",
                              "d.state NOT IN ('acked', 'expired') AND",
                              "msg_unread counts read but unacked deliveries as unread"),
    "who_all_sessions": ("RD1", rooms, "who", "JOIN memberships m2 ON m2.room = m1.room WHERE m1.session_id = ?",
                         "JOIN memberships m2 ON m2.room = m2.room WHERE m1.session_id = ?",
                         "room_who of a session lists every live session, shared room or not"),
    "lease_check_first_holder": ("RD3", leases, "check",
                                 "return _holders(tx, path, () if spelled in (None, path) else (spelled,), idents)",
                                 "return _holders(tx, path, () if spelled in (None, path) else (spelled,), idents)[:1]",
                                 "lease_check shows the first holder only, hiding the other sharers"),
    "lease_list_one_per_path": ("RD4", leases, "live", "WHERE l.expires_at > ? ORDER BY l.path",
                                "WHERE l.expires_at > ? GROUP BY l.path ORDER BY l.path",
                                "lease_list shows one holder per path, hiding the other sharers"),
    "history_oldest_page": ("RD5", messages, "history", "ORDER BY m.id DESC LIMIT ?) AS h ORDER BY 1",
                            "ORDER BY m.id LIMIT ?) AS h ORDER BY 1",
                            "room_history answers the room's first messages, not its last"),
    "sent_pending_counts_read": ("RD6", messages, "sent", "pending = sum(1 for s in states.values() if s in UNREAD)",
                                 'pending = sum(1 for s in states.values() if s != "acked")',
                                 "msg_sent counts read deliveries as pending"),
    "inbox_read_forgets_acked": ("RD7", messages, "inbox", "CASE WHEN state IN ('read', 'acked') THEN 1",
                                 "CASE WHEN state = 'read' THEN 1",
                                 "an empty msg_recv's inbox block counts read deliveries, forgetting the acked ones"),
    "who_unknown_with_pid": ("RD8", liveness, "Judge.__call__", "if pid is None:\n        return \"unknown\"",
                             "if pid is not None:\n        return \"unknown\"",
                             "room_who's liveness test is flipped: a session with a pid recorded is unknown"),
    # -- found by a hunt for escapes (docs/history.md, "The audit": the checks they prompted)
    "history_default_not_repo": ("RD5", rooms, "home_room", "room LIKE 'repo:%'", "room NOT LIKE 'repo:%'",
                                 "room_history's default room is a shared room, not the caller's repo room"),
    "cap_lowers_everyone": ("AU3", rooms, "set_cap", "AND id IN (SELECT session_id FROM memberships WHERE room = ?)",
                            "AND ? IS NOT NULL", "a cap lowers every live session above it, member of the room or not"),
    "sent_overdue_shown_unread": ("RD6", messages, "sent", "overdue = expires_at is not None and expires_at <= tx.now",
                                  "overdue = expires_at is not None and expires_at <= created_at",
                                  "msg_sent compares the expiry with the wrong time: an overdue unread delivery shows "
                                  "unread"),
    "sent_left_inverted": ("RD6", messages, "sent", "if left_at is not None:", "if left_at is None:",
                           "msg_sent's left lists the recipients still here"),
    "double_ack_refused": ("AK4", messages, "ack", 'if state == "acked":\n        return',
                           'if state == "acked":\n        raise InvalidArgument("message_id", "already acked")',
                           "acking an acked message is refused, not a no-op"),
    "leave_room_always_refused": ("SR3", rooms, "leave_room", "if cur.rowcount == 0:", "if cur.rowcount != 0:",
                                  "the not-in-room test is inverted: leaving a room one is in is refused"),
    "leave_room_not_in_ok": ("SR3", rooms, "leave_room", "if cur.rowcount == 0:", "if cur.rowcount < 0:",
                             "leaving a room one is not in answers ok, with a leave_room event"),
    "refusal_no_warning": ("AU6", sessions, "_decide_autonomy", "warning = (", "_ignored = (",
                           "a rejoin that refuses a lower level says nothing"),
    "send_no_warning": ("SE6", messages, "send", "warning = None if recipients else", "warning = None if True else",
                        "a send that matched nobody carries no warning"),
    "self_send_dropped": ("SE4", messages, "resolve_selector", "return [value]",
                          "return [value] if value != sender.id else []",
                          "a message to one's own session id reaches nobody"),
    "claim_no_sweep": ("LT5", leases, "claim", "sweep(tx)", "pass",
                       "lease_claim grants without sweeping expired leases first"),
    "sweep_without_event": ("LT5", leases, "sweep",
                            'tx.log("lease_expire", sid, path, mode=mode, token=token, expires_at=expires_at)',
                            "pass", "the sweep deletes expired leases without their lease_expire events"),
    "lease_default_ttl_60": ("LT1", bounds, "lease_ttl", "LEASE_TTL_DEFAULT if value is None", "60 if value is None",
                             "a claim without ttl_s lasts 60 s, not 600"),
    "renew_default_600": ("LT2", leases, "renew", "ttl = own_ttl if ttl_s is None else ttl_s",
                          "ttl = 600.0 if ttl_s is None else ttl_s",
                          "lease_renew without ttl_s renews for 600 s, not for the lease's own ttl_s"),
    "confirm_never": ("WK5", wake, "confirm_by_activity", 'return advance(tx, session_id, ids, "accepted")',
                      "return []", "a tool call after an offer never confirms it"),
    "touch_forgotten": ("WK5", sessions, "resolve",
                        "row = tx.one(_TOUCH, (tx.now, value)) if touch else tx.one(_LOOKUP, (value,))",
                        "row = tx.one(_LOOKUP, (value,))", "tool calls never move last_seen"),
    # -- found by a second hunt
    "rejoin_tags_kept": ("SE2", sessions, "join", "if tags is not None:", "if tags is not None and existing is None:",
                         "a rejoin keeps the old tags (the tags it gives are not stored)"),
    "who_room_ignored": ("RD1", rooms, "who",
                         'where, params = "s.id IN (SELECT session_id FROM memberships WHERE room = ?)", (room,)',
                         'where, params = "? IS NOT NULL", (room,)', "room_who(room) lists every live session"),
    "cap_event_anonymous": ("history-events", rooms, "set_cap", 'tx.event("cap", by, room=room',
                            'tx.event("cap", None, room=room', "the cap event records no session"),
    "send_event_ttl_missing": ("EX1", messages, "send", "ttl_s=ttl_s, expires_at=expires_at)",
                               "ttl_s=None, expires_at=expires_at)", "the send event leaves out the message's ttl_s"),
    "renew_event_mode_exclusive": ("LT4", leases, "renew", 'tx.event("lease_renew", session.id, path, mode=mode,',
                                   'tx.event("lease_renew", session.id, path, mode="exclusive",',
                                   "the lease_renew event always says exclusive"),
    "recv_label_of_recipient": ("RV5", messages, "recv", 'f"LEFT JOIN sessions s ON s.id = m.sender "',
                                'f"LEFT JOIN sessions s ON s.id = d.recipient "',
                                "msg_recv's sender_label is the recipient's own label"),
    "sent_pending_skips_undeliverable": ("RD6", messages, "sent", "if s in UNREAD)", "if s in UNREAD[:3])",
                                         "msg_sent's pending leaves out undeliverable deliveries"),
    # -- wake levers (scenarios/wake.toml)
    "offer_any_level": ("WK1", wake, "offers", "WHERE left_at IS NULL AND autonomy = 'wake' AND wake_lever",
                        "WHERE left_at IS NULL AND wake_lever",
                        "a lever's offers ignore the level: a session at notify or hold with a lever is signalled"),
    "retry_names_all": ("WK2", wake, "mark_offered", "lever=lever, items=again, retry=True",
                        "lever=lever, items=message_ids, retry=True",
                        "the retry event names every delivery signalled, the first offers among them"),
    "retry_flipped": ("WK3", wake, "offers", "(d.state = 'offered' AND d.offered_at <= ?)",
                      "(d.state = 'offered' AND d.offered_at >= ?)",
                      "the retry test is flipped: offers signalled inside the window are due, the overdue never"),
    "retry_without_event": ("WK3", wake, "mark_offered",
                            'tx.event("wake", session_id, lever=lever, items=again, retry=True)', "pass",
                            "a retry refreshes offered_at but writes no wake event"),
    "confirm_by_created": ("WK4", wake, "confirm_by_activity", "s.last_seen > d.offered_at",
                           "s.last_seen > d.created_at",
                           "a turn is proved by a tool call after the delivery was made, not after its signal"),
    # -- directory leases (store/coverage.py)
    "prefix_no_boundary": ("LR1", leases, "_first_beneath_in_the_way", "lo, hi = coverage.subtree_range(directory)",
                           'lo, hi = directory[:-1], directory[:-1] + "\\U0010ffff"',
                           "a directory claim finds the leases beneath it by string prefix, without the component "
                           "boundary: src/mod_0/ is held up by src/mod_00.py"),
    "directory_one_way": ("lease-exclusive", leases, "claim",
                          "in_the_way += _first_beneath_in_the_way(tx, session, directory, mode)",
                          "in_the_way += []",
                          "coverage one way only: a file claim sees a directory lease over it, a directory claim "
                          "never looks at the leases beneath it"),
    "sweep_skips_directories": ("LT5", leases, "sweep", '"DELETE FROM leases WHERE expires_at <= ? RETURNING',
                                "\"DELETE FROM leases WHERE expires_at <= ? AND path NOT LIKE '%/' RETURNING",
                                "the expiry sweep forgets directory leases: an expired one stays, with no lease_expire"),
    "file_ignores_directories": ("SE3", coverage, "glob_reaches", "if not is_directory(lease):", "if True:",
                                 "file:<glob> matches a directory lease as if it were a file: the holder of src/ is "
                                 "not reached by file:src/mod_00.py"),
    "drift_ignores_directories": ("drift", reads, "drift_check",
                                  "coverage.covering_paths(path) + coverage.covering_paths(stored)",
                                  "[path, stored]",
                                  "drift_check looks for lease events of the file alone, never of a directory over it"),
    # -- drift
    "drift_ignores_later_grants": ("drift", reads, "drift_check", "holder = held_then or tx.scalar(",
                                   "holder = held_then and tx.scalar(",
                                   "drift_check calls CRITICAL only if another held it at the read and got a grant since"),
}


def _open(name: str) -> Any:
    def factory(db: Path, busy_timeout_s: float) -> Store:
        _rule, module, function, old, new, _bug = MUTATIONS[name]
        rewrite(module, function, old, new)
        store = Store.open(db, busy_timeout_s=busy_timeout_s)
        if module is leases:  # PostgreSQL's lease functions stand in for these rules: run the rewritten ones
            store.db.serves_leases = False
        return store

    factory.__name__ = name
    factory.__doc__ = MUTATIONS[name][5]
    return factory


for _name in MUTATIONS:
    globals()[_name] = _open(_name)


class HistoryMarksRead(Store):
    """room_history marks the caller's deliveries of the messages it shows read (a 'helpful'
    history that treats showing as reading)."""

    def room_history(self, session_id: Any = None, room: Any = None, limit: Any = None) -> tuple[str, list[Message]]:
        n = bounds.limit(limit, 50)
        room = None if room is None else bounds.room(room)
        with self.db.write() as tx:
            me = None if session_id is None else self._session(tx, session_id, touch=True)
            target = room or rooms.home_room(tx, me)  # type: ignore[arg-type]
            found = messages.history(tx, target, n)
            if me is not None:
                messages.advance(tx, me.id, [m.id for m in found], "read")
            return target, found


def offer_expired(db: Path, busy_timeout_s: float) -> Store:
    """the wake rules' freshness test (``FRESH``, which the look and the signal both use) is
    always true: a message that ran out is signalled"""
    wake.FRESH = "(? IS NOT NULL)"
    return Store.open(db, busy_timeout_s=busy_timeout_s)


def history_marks_read(db: Path, busy_timeout_s: float) -> Store:
    """room_history marks the caller's deliveries of the messages it shows read"""
    return HistoryMarksRead.open(db, busy_timeout_s=busy_timeout_s)


def drift_blind_to_directories(db: Path, busy_timeout_s: float) -> Store:
    """drift knows nothing of directory leases: note_read records a holder of the file's own
    lease only, and drift_check looks for lease events of the file alone"""
    rewrite(reads, "note_read", "cover = coverage.covering_paths(path)", "cover = [path]")
    _, module, function, old, new, _ = MUTATIONS["drift_ignores_directories"]
    rewrite(module, function, old, new)
    return Store.open(db, busy_timeout_s=busy_timeout_s)
