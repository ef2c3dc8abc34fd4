"""The oracle on small hand-written runs: a good run of every rule group comes out valid, and
each known-bad run is flagged by exactly the rule it breaks (``details["rule"]``), with the
operation and both answers in the counterexample."""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from sim.check.checker import Verdict, check

T0 = 1_800_000_000.0
R = "repo:r"


class Run:
    """Events as the store writes them and the history as agents record it. An op takes 2 ms;
    its event lands 1 ms after the invoke."""

    def __init__(self) -> None:
        self.events: list[dict[str, Any]] = []
        self.records: list[dict[str, Any]] = []
        self.index: dict[int, int] = defaultdict(int)
        self.t = T0
        self.mid = 0
        self.token = 0
        self.proc: dict[str, int] = {}
        self.rooms: dict[str, list[str]] = {}

    def tick(self) -> float:
        self.t += 0.05
        return self.t

    def event(self, at: float, session: str | None, kind: str, path: str | None = None, **payload: Any) -> None:
        self.events.append({"seq": len(self.events) + 1, "at": at, "session_id": session, "kind": kind,
                            "path": path, "payload": payload})

    def op(self, s: str | None, f: str, args: dict[str, Any], t: float, outcome: str = "ok",
           result: Any = None, error: str | None = None) -> None:
        p = self.proc.setdefault(s or "?", len(self.proc))
        for type_, wall, value in (("invoke", t, args),
                                   (outcome, t + 0.002, (result or {}) if outcome == "ok" else args)):
            self.records.append({"index": self.index[p], "time": int(wall * 1e9), "wall": wall, "process": p,
                                 "agent": f"a{p:02d}", "session": s, "type": type_, "f": f, "value": value,
                                 "error": error if type_ != "invoke" else None})
            self.index[p] += 1

    # -- operations ---------------------------------------------------------------------------------

    def join(self, s: str, rooms: list[str], tags: list[str] = (), cwd: str = "/w/r", autonomy: str | None = None,
             got: str | None = None, rejoin: bool = False) -> None:
        t = self.tick()
        args = {"extra_rooms": [r for r in rooms if r != R], "tags": list(tags), "harness_key": f"k-{s}"}
        if autonomy:
            args["autonomy"] = autonomy
        level = got or autonomy or "notify"
        self.rooms[s] = sorted(rooms)
        self.event(t + 0.001, s, "join", rooms=sorted(rooms), autonomy=level, harness_key=f"k-{s}", rejoin=rejoin,
                   tags=list(tags), cwd=cwd)
        self.op(s if rejoin else None, "room_join", args, t, result={"session_id": s, "rooms": sorted(rooms),
                                                                     "autonomy": level})

    def send(self, s: str, to: str, recipients: list[str], ttl: float | None = None,
             expires: float | None = None) -> int:
        t = self.tick()
        self.mid += 1
        exp = expires if expires is not None else (t + 0.001 + ttl if ttl else None)
        self.event(t + 0.001, s, "send", message_id=self.mid, selector=to, rooms=self.rooms.get(s, [R]),
                   recipients={r: "stored" for r in recipients}, ttl_s=ttl, expires_at=exp)
        args = {"to": to, "subject": f"{s}#{self.mid}", **({"ttl_s": ttl} if ttl else {})}
        self.op(s, "msg_send", args, t, result={"message_id": self.mid, "recipients": recipients})
        return self.mid

    def recv(self, s: str, answer: list[int], marked: list[int] | None = None, limit: int = 100) -> None:
        t = self.tick()
        marked = answer if marked is None else marked
        if marked:
            self.event(t + 0.001, s, "delivery", to="read", items=[[m, "stored"] for m in marked])
        self.op(s, "msg_recv", {"limit": limit}, t, result={"message_ids": answer})

    def claim(self, s: str, path: str, ttl: float = 10, mode: str = "exclusive", granted: float | None = None) -> int:
        t = self.tick()
        self.token += 1
        at = t + 0.001
        self.event(at, s, "lease_grant", path, mode=mode, token=self.token,
                   expires_at=at + (ttl if granted is None else granted), previous_mode=None)
        self.op(s, "lease_claim", {"path": path, "ttl_s": ttl, "mode": mode}, t,
                result={"ok": True, "token": self.token, "mode": mode, "expires_at": at + ttl, "holder": s})
        return self.token

    def leave(self, s: str, rooms: list[str], releases: list[tuple[str, int]] = (), expires: list[int] = ()) -> None:
        t = self.tick()
        for path, token in releases:
            self.event(t + 0.001, s, "lease_release", path, mode="exclusive", token=token, reason="leave")
        if expires:
            self.event(t + 0.001, s, "delivery", to="expired", items=[[m, "stored"] for m in expires])
        self.event(t + 0.001, s, "leave", rooms=rooms, reason="leave")
        self.op(s, "room_leave", {}, t)

    def check(self) -> Verdict:
        return check(self.events, self.records, "ok")


def rules(v: Verdict) -> set[str]:
    return {x.details.get("rule") for x in v.violations if x.details.get("rule")}


def three() -> Run:
    """A and B share room crew; C is in another repo's room only."""
    r = Run()
    r.join("A", [R, "crew"], tags=["core"])
    r.join("B", [R, "crew"], tags=["shell"], cwd="/w/b")
    r.join("C", ["repo:other"], tags=["shell"], cwd="/w/c")
    return r


def drain(r: Run, *sessions: str) -> None:
    for s in sessions:
        r.recv(s, [])


def test_a_good_run_of_every_group_is_valid() -> None:
    r = three()
    m1 = r.send("A", "*", ["B"])
    m2 = r.send("A", "tag:shell", ["B"], ttl=30)
    r.claim("B", "/w/b/src/x.py")
    m3 = r.send("A", "file:src/x.py", ["B"])
    m4 = r.send("C", "B", ["B"])
    r.recv("B", [m1, m2], limit=2)
    r.op("B", "msg_unread", {}, r.tick(), result={"count": 2})
    r.recv("B", [m3, m4])
    r.event(r.tick() + 0.001, "B", "delivery", to="acked", items=[[m1, "read"]])
    r.op("B", "msg_ack", {"message_id": m1}, r.t)
    r.op("A", "room_who", {}, r.tick(), result={"sessions": ["A", "B"]})
    r.op("A", "room_history", {"room": R, "limit": 2}, r.tick(), result={"room": R, "message_ids": [m2, m3]})
    drain(r, "A", "B", "C")
    v = r.check()
    assert v.verdict == "valid", v.violations
    for group in ("selectors", "recv-order", "ack", "read-answers", "lease-ttl"):
        assert v.invariants[group].checked > 0, group


def test_a_broadcast_that_reaches_its_sender() -> None:
    r = three()
    r.send("A", "*", ["A", "B"])
    v = r.check()
    assert rules(v) == {"SE1"}
    bad = next(x for x in v.violations if x.invariant == "selectors")
    assert "extra ['A']" in bad.message and "msg_send by a01 (process 1, session A)" in bad.message
    assert (bad.details["answered"], bad.details["expected"]) == (["A", "B"], ["B"])


def test_a_broadcast_to_a_session_sharing_no_room() -> None:
    r = three()
    r.send("A", "*", ["B", "C"])
    assert rules(r.check()) == {"SE1"}


def test_tag_and_file_selectors_reach_room_peers_only() -> None:
    r = three()
    r.send("A", "tag:shell", ["B", "C"])  # C has the tag but shares no room
    r.claim("C", "/w/c/src/x.py")
    r.send("A", "file:x.py", ["C"])  # C holds x.py but shares no room; B holds nothing
    v = r.check()
    assert rules(v) == {"SE2", "SE3"}


def test_a_file_selector_matches_the_holders_relative_path() -> None:
    r = three()
    r.claim("B", "/w/b/src/x.py")
    r.send("A", "file:src/x.py", [])  # relative to B's cwd, src/x.py is the leased path
    drain(r, "B")
    assert rules(r.check()) == {"SE3"}


def test_a_departed_session_is_no_recipient() -> None:
    r = three()
    r.leave("B", [R, "crew"])
    r.send("A", "B", ["B"])
    assert rules(r.check()) == {"SE4"}


def test_expiry_only_after_the_clients_ttl_or_on_leave() -> None:
    r = three()
    m1 = r.send("A", "B", ["B"], ttl=30)
    m2 = r.send("A", "B", ["B"])
    r.event(r.tick(), "B", "delivery", to="expired", items=[[m1, "stored"], [m2, "stored"]])
    m3 = r.send("A", "*", ["B"], ttl=5, expires=r.t + 0.001 + 0.005)  # stored with 5 ms, not 5 s
    r.leave("B", [R, "crew"], expires=[m3])  # on leave: allowed
    v = r.check()
    assert rules(v) == {"EX1", "EX2"}
    assert sum(x.details.get("rule") == "EX2" for x in v.violations) == 2


def test_recv_reads_the_oldest_page_oldest_first() -> None:
    r = three()
    ids = [r.send("A", "B", ["B"]) for _ in range(3)]
    r.recv("B", [ids[2], ids[1]], limit=2)  # newest first
    v = r.check()
    assert rules(v) == {"RV1"}
    bad = next(x for x in v.violations if x.details.get("rule") == "RV1")
    assert bad.details["expected"] == ids[:2] and bad.details["answered"] == sorted(ids[1:])


def test_recv_answer_order_and_empty_answers() -> None:
    r = three()
    ids = [r.send("A", "B", ["B"]) for _ in range(2)]
    r.recv("B", [ids[1], ids[0]], marked=ids)  # read the right ones, answered newest first
    m3 = r.send("A", "B", ["B"])
    r.op("B", "msg_recv", {"limit": 100}, r.tick(), result={"message_ids": []})  # m3 waited
    r.recv("B", [m3])
    drain(r, "B")
    assert rules(r.check()) == {"RV2", "RV3"}


def test_only_a_recv_marks_read_and_only_the_recipient_acks() -> None:
    r = three()
    m1 = r.send("A", "B", ["B"])
    r.op("B", "room_history", {}, r.tick(), result={"room": R, "message_ids": [m1]})
    r.event(r.t + 0.001, "B", "delivery", to="read", items=[[m1, "stored"]])  # by the history call
    m2 = r.send("A", "*", ["B"])
    r.op("A", "msg_ack", {"message_id": m2}, r.tick())  # A acks B's unread message: ok, no event
    drain(r, "B")
    assert {"RV4", "AK2"} <= rules(r.check())


def test_lease_ttls_are_the_clients() -> None:
    r = three()
    r.claim("A", "/w/r/x.py", ttl=2, mode="shared", granted=0.002)
    r.claim("B", "/w/r/x.py", ttl=2, mode="exclusive")  # the store let A's run out: LT3 beside it
    v = r.check()
    assert rules(v) == {"LT1", "LT3", "LT5"}  # (and never swept A's with a lease_expire: LT5)


def test_a_denial_needs_a_holder_and_a_refused_renewal_needs_no_lease() -> None:
    r = three()
    r.op("A", "lease_claim", {"path": "/w/r/x.py", "ttl_s": 5, "mode": "shared"}, r.tick(),
         result={"ok": False, "token": None, "mode": None, "expires_at": None, "holder": "B"})
    r.claim("B", "/w/r/y.py", ttl=10)
    r.op("B", "lease_renew", {"path": "/w/r/y.py", "ttl_s": 5}, r.tick(), outcome="fail", error="lease_not_held")
    assert rules(r.check()) == {"LR1", "LR2"}


def test_leave_releases_leases_and_expires_unread() -> None:
    r = three()
    r.claim("B", "/w/r/x.py")
    r.send("A", "B", ["B"])
    r.leave("B", [R, "crew"])
    assert rules(r.check()) == {"LV1", "LV2"}


def test_autonomy_on_join_rejoin_and_cap() -> None:
    r = three()
    r.join("D", [R], autonomy="wake", got="wake")
    r.event(r.tick(), "A", "cap", room=R, autonomy="hold")
    r.event(r.t, "A", "autonomy", **{"from": "notify", "to": "hold", "reason": f"cap:{R}"})  # D stays at wake
    r.join("A", [R, "crew"], tags=["core"], autonomy="wake", got="wake", rejoin=True)  # not clamped
    r.join("E", [R], got="notify")  # a new session under a hold cap
    v = r.check()
    assert rules(v) == {"AU3", "AU2", "AU1"}


def test_read_answers_against_the_model() -> None:
    r = three()
    m1 = r.send("A", "B", ["B"])
    r.claim("B", "/w/r/x.py", mode="shared")
    r.op("B", "msg_unread", {}, r.tick(), result={"count": 2})
    r.op("B", "room_who", {}, r.tick(), result={"sessions": ["A", "B", "C"]})
    r.op("A", "lease_check", {"path": "/w/r/x.py"}, r.tick(), result={"free": True, "holders": []})
    r.op("A", "lease_list", {}, r.tick(), result={"leases": []})
    r.op("A", "room_history", {"room": R, "limit": 5}, r.tick(), result={"room": R, "message_ids": []})
    r.op("A", "msg_sent", {"limit": 5}, r.tick(), result={"messages": [[m1, {"B": "read"}, 0]]})
    r.recv("B", [m1])
    drain(r, "B")
    v = r.check()
    assert rules(v) == {"RD1", "RD2", "RD3", "RD4", "RD5", "RD6"}


def test_a_read_may_see_the_state_before_an_event_that_committed_late() -> None:
    """An event's ``at`` is its transaction's start: a read invoked after it may still see the
    state before it, as long as the op that wrote it had not completed."""
    r = three()
    t = r.tick()
    r.event(t + 0.001, "A", "send", message_id=1, selector="B", rooms=r.rooms["A"], recipients={"B": "stored"},
            ttl_s=None, expires_at=None)
    r.op("B", "msg_unread", {}, t + 0.0105, result={"count": 0})  # invoked 9.5 ms after at
    r.t = t + 0.06
    r.records.append({"index": 0, "time": int(t * 1e9), "wall": t, "process": 9, "agent": "a09", "session": "A",
                      "type": "invoke", "f": "msg_send", "value": {"to": "B"}, "error": None})
    r.records.append({"index": 1, "time": int((t + 0.05) * 1e9), "wall": t + 0.05, "process": 9, "agent": "a09",
                      "session": "A", "type": "ok", "f": "msg_send", "value": {"message_id": 1, "recipients": ["B"]},
                      "error": None})
    r.mid = 1
    r.recv("B", [1])
    drain(r, "B")
    v = r.check()
    assert v.verdict == "valid", v.violations


def test_the_verdict_names_each_broken_rule_with_its_first_counterexample() -> None:
    r = three()
    r.send("A", "*", ["A", "B"])
    r.send("A", "*", ["A", "B"])
    r.send("A", "*", ["B", "C"])
    v = r.check()
    assert set(v.rules) == {"SE1"} and v.rules["SE1"]["violations"] == 3
    assert v.rules["SE1"]["invariant"] == "selectors"
    assert v.rules["SE1"]["first"].startswith("[SE1] seq 4 ") and "extra ['A']" in v.rules["SE1"]["first"]
    assert v.to_dict()["rules"] == v.rules


# -- wake levers (WK1-WK4): each agent's lever looks for its own session -----------------------------


def lever_run() -> Run:
    """S at wake with a lever, N at notify with a lever, A a plain sender; one room."""
    r = Run()
    for s, level, lever in (("S", "wake", "sim"), ("N", "notify", "sim"), ("A", "notify", None)):
        t = r.tick()
        r.rooms[s] = [R]
        r.event(t + 0.001, s, "join", rooms=[R], autonomy=level, harness_key=f"k-{s}", rejoin=False, tags=[],
                cwd="/w/r", wake_lever=lever)
        args = {"extra_rooms": [], "tags": [], "harness_key": f"k-{s}", "autonomy": level,
                **({"wake_lever": lever} if lever else {})}
        r.op(None, "room_join", args, t, result={"session_id": s, "rooms": [R], "autonomy": level})
    return r


def look(r: Run, s: str, answer: str = "unknown", *, offered: list[int] = (), retried: list[int] = (),
         accepted: list[int] = (), wait: float = 0.0) -> None:
    """One look of ``s``'s lever (retry window 0.2 s), ``wait`` seconds after the last step,
    with the events the store wrote for it."""
    r.t += wait
    t = r.tick()
    if offered:
        r.event(t + 0.001, s, "delivery", to="offered", items=[[m, "stored"] for m in offered])
    if retried:
        r.event(t + 0.001, s, "wake", lever="sim", items=list(retried), retry=True)
    if accepted:
        r.event(t + 0.001, s, "delivery", to="accepted", items=[[m, "offered"] for m in accepted])
    signalled = [*offered, *retried]
    verdict = {"accept": True, "unknown": None, "refuse": False}[answer]
    r.op(s, "wake", {"retry_s": 0.2, "answer": answer},
         t, result={"signals": [[signalled, verdict]] if signalled else []})


def test_a_lever_that_offers_retries_and_is_confirmed_is_valid() -> None:
    r = lever_run()
    m1 = r.send("A", "*", ["S", "N"])
    look(r, "S", offered=[m1])  # the lever cannot say
    look(r, "S")  # inside the retry window: nothing due
    look(r, "S", retried=[m1], wait=0.3)  # past it, with no tool call between: signalled again
    look(r, "N")  # at notify: nothing is ever due
    m2 = r.send("A", "S", ["S"])
    look(r, "S", "accept", offered=[m2], accepted=[m2])  # the lever confirmed it
    r.op("S", "msg_unread", {}, r.tick(), result={"count": 2})  # a tool call after the signals
    look(r, "S", accepted=[m1])  # the turn came: confirmed by it
    t = r.tick()
    r.event(t + 0.001, "S", "delivery", to="read", items=[[m1, "accepted"], [m2, "accepted"]])
    r.op("S", "msg_recv", {"limit": 100}, t, result={"message_ids": [m1, m2]})
    drain(r, "A", "S")
    r.recv("N", [m1])
    v = r.check()
    assert v.verdict == "valid", v.violations
    assert v.invariants["wake"].checked >= 6


def test_an_offer_to_a_session_not_at_wake_or_of_a_message_run_out() -> None:
    r = lever_run()
    m1 = r.send("A", "*", ["S", "N"])
    look(r, "N", offered=[m1])
    m2 = r.send("A", "S", ["S"], ttl=0.01)
    look(r, "S", offered=[m1, m2], wait=0.1)
    v = r.check()
    assert rules(v) == {"WK1"}
    assert len([x for x in v.violations if x.details.get("rule") == "WK1"]) == 2


def test_a_retry_inside_the_window_and_a_due_offer_left_alone() -> None:
    r = lever_run()
    m1 = r.send("A", "S", ["S"])
    look(r, "S", offered=[m1])
    look(r, "S", retried=[m1])  # 50 ms after its signal, with a 200 ms window
    assert rules(r.check()) == {"WK2"}
    r = lever_run()
    m1 = r.send("A", "S", ["S"])
    look(r, "S", offered=[m1])
    look(r, "S", wait=0.3)  # due for a retry, and the look signalled nothing
    assert rules(r.check()) == {"WK3"}
    r = lever_run()
    r.send("A", "S", ["S"])
    look(r, "S", wait=0.1)  # stored before the look began: due, never offered
    assert rules(r.check()) == {"WK3"}


def test_an_acceptance_needs_the_levers_word_or_a_turn() -> None:
    r = lever_run()
    m1 = r.send("A", "S", ["S"])
    look(r, "S", "refuse", offered=[m1])
    look(r, "S", accepted=[m1])  # no tool call of S since the signal, and the lever refused
    v = r.check()
    assert rules(v) == {"WK4"}
    assert "made no tool call after its signal" in v.counterexample


def test_a_wake_event_with_no_look_of_its_session_around_it() -> None:
    r = lever_run()
    m1 = r.send("A", "S", ["S"])
    r.event(r.tick() + 0.001, "S", "delivery", to="offered", items=[[m1, "stored"]])
    v = r.check()
    assert "history-events" in {x.invariant for x in v.violations}
    assert any("no wake look of that session" in x.message for x in v.violations)


def test_room_who_calls_a_running_agents_session_alive() -> None:
    def who(r: Run, said: str, pids: list[int | None] = (11, 12)) -> None:
        r.op("A", "room_who", {}, r.tick(), result={"sessions": ["A", "B"], "liveness": ["alive", said],
                                                    "hosts": ["h", "h"], "pids": list(pids)})

    r = three()
    r.op("B", "msg_unread", {}, r.tick(), result={"count": 0})
    who(r, "gone")  # B's agent acts before and after the read: its process ran throughout
    r.op("B", "msg_unread", {}, r.tick(), result={"count": 0})
    v = r.check()
    assert rules(v) == {"RD8"} and "called session B gone" in v.counterexample
    r = three()
    r.op("B", "msg_unread", {}, r.tick(), result={"count": 0})
    who(r, "unknown", pids=[11, None])  # no pid recorded: unknown is right
    who(r, "gone")  # B never acts after this read: it may have exited
    assert not rules(r.check())


# -- the rules a hunt for escapes added ---------------------------------------------------------------


def test_a_cap_lowers_members_only_and_warnings_come_exactly_when_due() -> None:
    r = three()
    t = r.tick()
    r.event(t + 0.001, "A", "cap", room="crew", autonomy="hold")
    r.op("A", "room_set_autonomy_cap", {"room": "crew", "autonomy": "hold"}, t, result={"room": "crew", "autonomy": "hold"})
    r.t = t + 0.001
    r.event(r.t, "A", "autonomy", **{"from": "notify", "to": "hold", "reason": "cap:crew"})
    r.event(r.t, "B", "autonomy", **{"from": "notify", "to": "hold", "reason": "cap:crew"})
    r.event(r.t, "C", "autonomy", **{"from": "notify", "to": "hold", "reason": "cap:crew"})  # C is not in crew
    v = r.check()
    assert rules(v) == {"AU3"} and "session C" in v.counterexample
    assert {x.invariant for x in v.violations} == {"autonomy"}  # the cap event is its op's
    r.event(r.tick(), None, "cap", room="crew", autonomy="wake")  # a cap no operation asked for
    assert "history-events" in {x.invariant for x in r.check().violations}
    r = three()
    t = r.tick()  # B rejoins asking hold, below its notify: refused, and it must say so
    r.event(t + 0.001, "B", "join", rooms=sorted([R, "crew"]), autonomy="notify", harness_key="k-B", rejoin=True,
            tags=["shell"], cwd="/w/b")
    r.op("B", "room_join", {"extra_rooms": ["crew"], "tags": ["shell"], "harness_key": "k-B", "autonomy": "hold"}, t,
         result={"session_id": "B", "rooms": sorted([R, "crew"]), "autonomy": "notify", "warned": False})
    t = r.tick()  # a send that reached someone, with a warning that it matched nobody
    r.mid += 1
    r.event(t + 0.001, "A", "send", message_id=r.mid, selector="B", rooms=r.rooms["A"], recipients={"B": "stored"},
            ttl_s=None, expires_at=None)
    r.op("A", "msg_send", {"to": "B", "subject": f"A#{r.mid}"}, t,
         result={"message_id": r.mid, "recipients": ["B"], "warned": True})
    assert rules(r.check()) == {"AU6", "SE6"}


def test_refusals_of_a_second_ack_and_of_leaving_a_room_one_is_in() -> None:
    r = three()
    m1 = r.send("A", "B", ["B"])
    r.recv("B", [m1])
    r.event(r.tick() + 0.001, "B", "delivery", to="acked", items=[[m1, "read"]])
    r.op("B", "msg_ack", {"message_id": m1}, r.t)
    r.op("B", "msg_ack", {"message_id": m1}, r.tick(), outcome="fail", error="invalid_argument")  # a no-op, refused
    r.op("B", "room_leave_room", {"room": "crew"}, r.tick(), outcome="fail", error="invalid_argument")  # B is in it
    r.op("B", "room_leave_room", {"room": "nowhere"}, r.tick(), outcome="fail", error="invalid_argument")  # right
    v = r.check()
    assert rules(v) == {"AK4", "SR3"}


def test_history_default_room_and_sent_overdue_and_left() -> None:
    r = three()
    m1 = r.send("A", "B", ["B"], ttl=0.01)
    r.op("A", "room_history", {"limit": 5}, r.tick(), result={"room": "crew", "message_ids": [m1]})  # not its repo room
    r.op("A", "msg_sent", {"limit": 5}, r.tick(), result={"messages": [[m1, {"B": "stored"}, 1, []]]})  # overdue
    v = r.check()
    assert rules(v) == {"RD5", "RD6"}
    r = three()
    m1 = r.send("A", "B", ["B"])
    r.op("A", "msg_sent", {"limit": 5}, r.tick(), result={"messages": [[m1, {"B": "stored"}, 1, ["B"]]]})  # B is here
    assert rules(r.check()) == {"RD6"}


def test_a_claim_grants_only_after_sweeping_every_lease_whose_time_is_up() -> None:
    r = three()
    r.claim("A", "/w/r/x.py", ttl=0.01)
    r.claim("B", "/w/r/y.py", ttl=5)  # 50 ms later: A's lease was up, and no lease_expire swept it
    v = r.check()
    assert rules(v) == {"LT5"} and "session A" in v.counterexample


def test_a_look_accepts_an_offer_its_session_acted_on() -> None:
    r = lever_run()
    m1 = r.send("A", "S", ["S"])
    look(r, "S", offered=[m1])  # the lever cannot say
    r.claim("S", "/w/r/x.py")  # a write of S: its last_seen moves past the signal
    look(r, "S")  # ... and the next look accepts nothing
    v = r.check()
    assert rules(v) == {"WK5"}


def test_events_that_misreport_a_ttl_or_a_renewals_mode() -> None:
    r = three()
    t = r.tick()
    r.mid += 1
    r.event(t + 0.001, "A", "send", message_id=r.mid, selector="B", rooms=r.rooms["A"], recipients={"B": "stored"},
            ttl_s=None, expires_at=t + 0.001 + 30)  # expires as asked, but says it had no ttl_s
    r.op("A", "msg_send", {"to": "B", "subject": f"A#{r.mid}", "ttl_s": 30}, t,
         result={"message_id": r.mid, "recipients": ["B"]})
    token = r.claim("B", "/w/r/x.py", mode="shared")
    t = r.tick()
    r.event(t + 0.001, "B", "lease_renew", "/w/r/x.py", mode="exclusive", token=token + 1, expires_at=t + 0.001 + 10)
    r.op("B", "lease_renew", {"path": "/w/r/x.py", "ttl_s": 10}, t,
         result={"token": token + 1, "expires_at": t + 0.001 + 10, "mode": "shared"})
    assert rules(r.check()) == {"EX1", "LT4"}


def test_a_recv_returns_each_message_as_it_was_sent() -> None:
    r = three()
    m1 = r.send("A", "B", ["B"])
    t = r.tick()
    r.event(t + 0.001, "B", "delivery", to="read", items=[[m1, "stored"]])
    r.op("B", "msg_recv", {"limit": 100}, t, result={"message_ids": [m1], "senders": ["A"], "labels": [None],
                                                     "subjects": [f"A#{m1}"], "to": ["*"]})  # it went to B
    drain(r, "B")
    v = r.check()
    assert rules(v) == {"RV5"} and "'*'" in v.counterexample


def test_a_message_sent_without_ttl_s_never_expires() -> None:
    r = three()
    t = r.tick()
    r.mid += 1
    r.event(t + 0.001, "A", "send", message_id=r.mid, selector="B", rooms=r.rooms["A"], recipients={"B": "stored"},
            ttl_s=3600, expires_at=t + 0.001 + 3600)  # a store that gives it a default ttl_s
    r.op("A", "msg_send", {"to": "B", "subject": f"A#{r.mid}"}, t, result={"message_id": r.mid, "recipients": ["B"]})
    assert rules(r.check()) == {"EX1"}
