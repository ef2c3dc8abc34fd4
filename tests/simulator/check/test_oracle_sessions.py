"""The oracle's rules that read sessions, acks and the inbox block on small hand-written runs
(SR3, SR4, AK1, AK3, RD7): each known-bad run is flagged by exactly the rule it breaks, and
the same run done right is valid."""

from __future__ import annotations

from test_oracle import R, Run, drain, rules, three


def _leave_room(r: Run, s: str, room: str, rest: list[str]) -> None:
    t = r.tick()
    r.event(t + 0.001, s, "leave_room", room=room, rooms=rest)
    r.op(s, "room_leave_room", {"room": room}, t)


def test_leave_room_leaves_that_room_only() -> None:
    r = three()
    _leave_room(r, "A", "crew", [R])
    assert r.check().verdict == "valid"
    r = three()
    _leave_room(r, "A", "crew", [])  # every room gone
    v = r.check()
    assert rules(v) == {"SR3"}
    bad = next(x for x in v.violations if x.details.get("rule") == "SR3")
    assert (bad.details["answered"], bad.details["expected"]) == ([], [R])


def test_a_departed_session_never_acts_and_a_live_one_is_never_unknown() -> None:
    r = three()
    r.leave("B", [R, "crew"])
    r.op("B", "msg_send", {"to": "*"}, r.tick(), outcome="fail", error="unknown_session")  # right: B left
    r.op("A", "msg_send", {"to": "B"}, r.tick(), outcome="fail", error="unknown_session")  # right: target left
    assert r.check().verdict == "valid"
    r.op("A", "msg_unread", {}, r.tick(), outcome="fail", error="unknown_session")  # A is live
    r.rooms["B"] = []  # (its memberships went with it)
    r.send("B", "*", [])  # a send by the departed B
    v = r.check()
    assert rules(v) == {"SR4"}
    assert sum(x.details.get("rule") == "SR4" for x in v.violations) == 2


def test_only_the_recipients_own_ack_moves_it_and_not_recipient_means_none() -> None:
    r = three()
    m1 = r.send("A", "*", ["B"])
    r.recv("B", [m1])
    r.event(r.tick() + 0.001, "B", "delivery", to="acked", items=[[m1, "read"]])  # nobody acked
    m2 = r.send("A", "*", ["B"])
    r.op("B", "msg_ack", {"message_id": m2}, r.tick(), outcome="fail", error="not_recipient")  # B has it
    r.op("A", "msg_ack", {"message_id": m2}, r.tick(), outcome="fail", error="not_recipient")  # right: A has none
    r.recv("B", [m2])
    drain(r, "B")
    assert rules(r.check()) == {"AK1", "AK3"}


def _empty_recv(r: Run, s: str, rooms: list[str], total: int, read: int, last: float | None) -> None:
    r.op(s, "msg_recv", {"limit": 100}, r.tick(),
         result={"message_ids": [], "inbox": {"rooms": rooms, "total": total, "read": read, "last": last}})


def test_an_empty_answer_carries_the_inbox_the_model_has() -> None:
    r = three()
    m1 = r.send("A", "*", ["B"])
    sent_at = r.events[-1]["at"]
    r.recv("B", [m1])
    r.event(r.tick() + 0.001, "B", "delivery", to="acked", items=[[m1, "read"]])
    r.op("B", "msg_ack", {"message_id": m1}, r.t)
    _empty_recv(r, "B", [R, "crew"], 1, 1, sent_at)
    _empty_recv(r, "C", ["repo:other"], 0, 0, None)
    assert r.check().verdict == "valid"
    _empty_recv(r, "B", [R, "crew"], 1, 0, sent_at)  # the acked one not counted as read
    _empty_recv(r, "C", [R], 0, 0, None)  # a room it is not in
    v = r.check()
    assert rules(v) == {"RD7"}
    assert sum(x.details.get("rule") == "RD7" for x in v.violations) == 2


def test_a_delivery_to_a_session_at_wake_without_a_lever_starts_undeliverable() -> None:
    r = Run()
    r.join("A", [R, "crew"])
    r.join("B", [R, "crew"], autonomy="wake")
    for e in r.events:  # joins that say their wake lever: none
        e["payload"]["wake_lever"] = None
    m = r.send("A", "*", ["B"])  # stored: it should start undeliverable
    r.recv("B", [m])
    v = r.check()
    assert rules(v) == {"AU5"}
    bad = next(x for x in v.violations if x.details.get("rule") == "AU5")
    assert (bad.details["answered"], bad.details["expected"]) == ("stored", "undeliverable")


def test_a_denial_names_a_holder_in_its_way() -> None:
    r = three()
    r.claim("B", "/w/r/x.py", mode="shared")
    r.claim("C", "/w/r/x.py", mode="shared")
    deny = {"ok": False, "token": None, "mode": "shared", "expires_at": None}
    r.op("A", "lease_claim", {"path": "/w/r/x.py", "ttl_s": 5}, r.tick(), result={**deny, "holder": "B"})
    assert r.check().verdict == "valid"
    r.op("B", "lease_claim", {"path": "/w/r/x.py", "ttl_s": 5}, r.tick(), result={**deny, "holder": "B"})  # itself
    assert rules(r.check()) == {"LR5"}


def test_a_trailing_slash_on_a_file_is_refused_never_answered_as_a_folder() -> None:
    """LR6: x.py/ on a file the run's edits wrote is refused invalid_argument; granted (a
    directory lease beside the file's) or denied, it was taken for a folder."""
    r = three()
    token = r.claim("B", "/w/r/x.py")
    r.op("B", "edit", {"path": "/w/r/x.py", "token": token}, r.tick(), result={"path": "/w/r/x.py", "token": token})
    r.op("A", "lease_claim", {"path": "/w/r/x.py/", "ttl_s": 5}, r.tick(), outcome="fail", error="invalid_argument")
    r.op("C", "lease_claim", {"path": "/w/r/x.py/", "ttl_s": 5}, r.tick(), outcome="fail", error="store_busy")
    r.claim("A", "/w/r/new/")  # a folder no edit wrote as a file: a directory lease, as ever
    assert r.check().verdict == "valid"
    r.claim("C", "/w/r/x.py/")  # beside B's exclusive lease of the file
    v = r.check()
    assert rules(v) == {"LR6"}
    bad = next(x for x in v.violations if x.details.get("rule") == "LR6")
    assert "was granted on /w/r/x.py/, but /w/r/x.py is a file" in bad.message
    r.op("A", "note_read", {"path": "/w/r/y.py"}, r.tick(), result={"hash": "ab" * 32})  # hashed: a file
    r.op("B", "note_read", {"path": "/w/r/z.py"}, r.tick(), outcome="fail", error="invalid_argument")
    r.claim("B", "/w/r/y.py/")
    r.claim("B", "/w/r/z.py/")  # (z.py: nothing says it is a file)
    assert sum(x.details.get("rule") == "LR6" for x in r.check().violations) == 2
