"""The checker on small hand-written histories: one known-good run, one known-bad run per
invariant (each asserting exactly which invariants it breaks), and a history recorded from a
real store that must come out valid."""

from __future__ import annotations

import hashlib
import itertools
import json
import time
import uuid
from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest

from agents_room.store import Clock, RoomError, Store
from sim.check.checker import INVARIANTS, Verdict, check

T0 = 1_800_000_000.0
X, Y = "/repo/src/x.py", "/repo/src/y.py"


class Run:
    """A hand-written run: events as the store would write them, history records as the
    agents would. Every op takes 2 ms; its event lands 1 ms after the invoke."""

    def __init__(self) -> None:
        self.events: list[dict[str, Any]] = []
        self.records: list[dict[str, Any]] = []
        self.index: dict[int, int] = defaultdict(int)
        self.tokens = itertools.count(1)
        self.mids = itertools.count(1)

    def event(self, at: float, session: str | None, kind: str, path: str | None = None, **payload: Any) -> int:
        self.events.append({"seq": len(self.events) + 1, "at": at, "session_id": session, "kind": kind,
                            "path": path, "payload": payload})
        return len(self.events)

    def record(self, process: int, session: str | None, type_: str, f: str, value: Any, wall: float,
               error: str | None = None) -> None:
        self.records.append({"index": self.index[process], "time": int(wall * 1e9), "wall": wall, "process": process,
                             "agent": f"a{process:02d}", "session": session, "type": type_, "f": f, "value": value,
                             "error": error})
        self.index[process] += 1

    def op(self, process: int, session: str | None, f: str, args: dict[str, Any], t: float,
           outcome: str = "ok", result: Any = None, error: str | None = None) -> None:
        self.record(process, session, "invoke", f, args, t)
        value = (result if result is not None else {}) if outcome == "ok" else args
        self.record(process, session, outcome, f, value, t + 0.002, error)

    # -- operations with their events --------------------------------------------------------------

    def claim(self, p: int, s: str, path: str, t: float, mode: str = "exclusive", ttl: float = 10.0,
              previous: str | None = None, token: int | None = None) -> int:
        token = token if token is not None else next(self.tokens)
        self.event(t + 0.001, s, "lease_grant", path, mode=mode, token=token, expires_at=t + 0.001 + ttl,
                   previous_mode=previous)
        self.op(p, s, "lease_claim", {"path": path, "mode": mode, "ttl_s": ttl}, t,
                result={"ok": True, "token": token, "mode": mode, "expires_at": t + 0.001 + ttl, "holder": s})
        return token

    def deny(self, p: int, s: str, path: str, t: float, holder: str, mode: str = "exclusive") -> None:
        self.op(p, s, "lease_claim", {"path": path, "mode": mode, "ttl_s": 10}, t,
                result={"ok": False, "token": None, "mode": "exclusive", "expires_at": t + 5, "holder": holder})

    def release(self, p: int, s: str, path: str, t: float, token: int, mode: str = "exclusive") -> None:
        self.event(t + 0.001, s, "lease_release", path, mode=mode, token=token, reason="release")
        self.op(p, s, "lease_release", {"path": path}, t)

    def send(self, p: int, s: str, t: float, to: dict[str, str], selector: str = "*") -> int:
        mid = next(self.mids)
        self.event(t + 0.001, s, "send", message_id=mid, selector=selector, rooms=["repo:r"], recipients=to)
        self.op(p, s, "msg_send", {"to": selector, "subject": f"a{p:02d}#{mid}"}, t,
                result={"message_id": mid, "recipients": list(to), "op": f"a{p:02d}#{mid}"})
        return mid

    def recv(self, p: int, s: str, t: float, mids: list[int], marked: list[int] | None = None) -> None:
        marked = mids if marked is None else marked
        if marked:
            self.event(t + 0.001, s, "delivery", to="read", items=[[m, "stored"] for m in marked])
        self.op(p, s, "msg_recv", {"limit": 100}, t, result={"message_ids": mids, "senders": []})

    def check(self, integrity: str | None = "ok") -> Verdict:
        return check(self.events, self.records, integrity)


def violated(v: Verdict) -> set[str]:
    return {name for name, r in v.invariants.items() if r.status == "violated"}


def good_run() -> Run:
    """Two sessions share a path in turn, exchange a message, read and check a file, drain."""
    r = Run()
    r.event(T0, "A", "join", rooms=["repo:r"], autonomy="notify", harness_key="ka", rejoin=False)
    r.op(0, None, "room_join", {"harness_key": "ka"}, T0 - 0.001, result={"session_id": "A"})
    r.event(T0 + 0.010, "B", "join", rooms=["repo:r"], autonomy="notify", harness_key="kb", rejoin=False)
    r.op(1, None, "room_join", {"harness_key": "kb"}, T0 + 0.009, result={"session_id": "B"})
    ta = r.claim(0, "A", X, T0 + 0.1)
    r.deny(1, "B", X, T0 + 0.2, holder="A")
    r.event(T0 + 0.301, "B", "note_read", X, hash="h0")
    r.op(1, "B", "note_read", {"path": X}, T0 + 0.3, result={"hash": "h0"})
    r.op(0, "A", "edit", {"path": X, "token": ta}, T0 + 0.4, result={"path": X, "token": ta, "hash": "h1"})
    r.release(0, "A", X, T0 + 0.5, ta)
    tb = r.claim(1, "B", X, T0 + 0.6)
    r.op(1, "B", "drift_check", {"path": X}, T0 + 0.7, result={"severity": "CRITICAL", "changed": True, "holder": "A"})
    mid = r.send(0, "A", T0 + 0.8, {"B": "stored"})
    r.recv(1, "B", T0 + 0.9, [mid])
    r.event(T0 + 1.001, "B", "delivery", to="acked", items=[[mid, "read"]])
    r.op(1, "B", "msg_ack", {"message_id": mid}, T0 + 1.0, result={"message_id": mid})
    r.release(1, "B", X, T0 + 1.1, tb)
    r.recv(0, "A", T0 + 1.2, [])
    r.recv(1, "B", T0 + 1.2, [])
    return r


def test_the_good_run_is_valid_and_counts_what_it_checked() -> None:
    v = good_run().check()
    assert (v.verdict, v.violations, v.counterexample, v.exit_code) == ("valid", (), None, 0)
    assert all(r.status == "ok" for r in v.invariants.values())
    assert set(v.invariants) == set(INVARIANTS)
    assert v.invariants["lease-exclusive"].checked == 2 and v.invariants["drift-truth"].checked == 1
    d = v.deliveries
    assert (d.messages, d.sent, d.delivered_once, d.lost, d.duplicated, d.unexpected) == (1, 1, 1, 0, 0, 0)
    assert v.counts["lease_windows"] == 2 and v.stale_writes == ()


def test_to_dict_is_plain_json() -> None:
    r = Run()
    r.claim(0, "A", X, T0)
    r.claim(1, "B", X, T0 + 1)  # B granted beside A: one violation to carry
    data = json.loads(json.dumps(r.check().to_dict()))
    assert data["verdict"] == "invalid"
    assert data["invariants"]["lease-exclusive"] == {"status": "violated", "checked": 2, "violations": 1}
    assert data["violations"][0]["invariant"] == "lease-exclusive" and data["violations"][0]["seq"] == 2
    assert set(data["deliveries"]) >= {"sent", "delivered_once", "lost", "duplicated", "unexpected",
                                       "unread_recipient_gone"}


# -- leases -------------------------------------------------------------------------------------


def test_a_double_exclusive_grant_is_named_with_path_sessions_seqs_and_times() -> None:
    r = Run()
    r.claim(0, "A", X, T0)
    seq_b = len(r.events) + 1
    r.claim(1, "B", X, T0 + 1)
    v = r.check()
    assert v.verdict == "invalid" and v.exit_code == 1
    assert violated(v) == {"lease-exclusive", "lease-windows"}  # the events and the black box agree
    text = v.counterexample or ""
    assert text.startswith("lease-exclusive: ") and X in text and "session B" in text and "session A" in text
    assert f"seq {seq_b}" in text and "08:00:01.001000Z" in text  # T0 is 2027-01-15T08:00:00Z
    assert v.violations[0].seq == seq_b and v.violations[0].details["other_session"] == "A"


def test_a_shared_grant_beside_an_exclusive_holder() -> None:
    r = Run()
    r.claim(0, "A", X, T0)
    r.claim(1, "B", X, T0 + 1, mode="shared")
    assert violated(r.check()) == {"lease-exclusive", "lease-windows"}


def test_shared_holders_side_by_side_are_fine() -> None:
    r = Run()
    r.claim(0, "A", X, T0, mode="shared")
    r.claim(1, "B", X, T0 + 1, mode="shared")
    assert r.check().verdict == "valid"


def test_a_token_going_backward() -> None:
    r = Run()
    ta = r.claim(0, "A", X, T0, token=5)
    r.release(0, "A", X, T0 + 1, ta)
    r.claim(1, "B", X, T0 + 2, token=3)
    v = r.check()
    assert violated(v) == {"lease-token-monotonic"}
    assert "token 3" in (v.counterexample or "") and "token 5" in (v.counterexample or "")


def test_a_token_issued_twice_on_two_paths() -> None:
    r = Run()
    r.claim(0, "A", X, T0, token=7)
    r.claim(1, "B", Y, T0 + 1, token=7)
    v = r.check()
    assert violated(v) == {"lease-token-monotonic"} and "issued twice" in (v.counterexample or "")


def test_a_release_of_an_unheld_lease() -> None:
    r = Run()
    ta = r.claim(0, "A", X, T0)
    r.release(1, "B", X, T0 + 1, ta)
    v = r.check()
    assert violated(v) == {"lease-release-held"} and "session B" in (v.counterexample or "")


def test_an_expiry_before_its_time_and_the_grant_it_lets_through() -> None:
    r = Run()
    r.claim(0, "A", X, T0, ttl=10)
    r.event(T0 + 2, "A", "lease_expire", X, mode="exclusive", token=1, expires_at=T0 + 10.001)
    r.claim(1, "B", X, T0 + 2)
    v = r.check()
    assert violated(v) == {"lease-release-held", "lease-exclusive", "lease-windows"}
    assert "before its time" in (v.counterexample or "")


def test_an_expiry_on_time_lets_the_next_holder_in() -> None:
    r = Run()
    r.claim(0, "A", X, T0, ttl=1)
    r.event(T0 + 2, "A", "lease_expire", X, mode="exclusive", token=1, expires_at=T0 + 1.001)
    r.claim(1, "B", X, T0 + 2)
    assert r.check().verdict == "valid"


# -- deliveries ---------------------------------------------------------------------------------


def test_a_delivery_moving_backward() -> None:
    r = Run()
    mid = r.send(0, "A", T0, {"B": "stored"})
    r.recv(1, "B", T0 + 1, [mid])
    r.event(T0 + 2.001, "B", "delivery", to="acked", items=[[mid, "read"]])
    r.op(1, "B", "msg_ack", {"message_id": mid}, T0 + 2, result={"message_id": mid})
    r.event(T0 + 3, "B", "delivery", to="read", items=[[mid, "acked"]])
    r.recv(1, "B", T0 + 4, [], marked=[])
    v = r.check()
    # the oracle sees the same move from its side: a read no recv made (RV4)
    assert violated(v) == {"delivery-forward", "recv-order"} and "acked → read" in (v.counterexample or "")


def test_a_message_lost_after_the_recipient_drained() -> None:
    r = Run()
    mid = r.send(0, "A", T0, {"B": "stored", "C": "stored"})
    r.recv(1, "B", T0 + 1, [mid])
    r.recv(2, "C", T0 + 1, [])  # drained after the send, yet the store kept it unread
    v = r.check()
    assert violated(v) == {"delivery-exactly-once", "recv-order"}  # the oracle: an empty answer while it waited (RV3)
    assert (v.deliveries.lost, v.deliveries.delivered_once) == (1, 1)
    assert f"lost: message {mid}" in (v.counterexample or "") and "session C" in (v.counterexample or "")


def test_a_message_the_store_marked_read_but_nobody_got_is_lost() -> None:
    r = Run()
    mid = r.send(0, "A", T0, {"B": "stored"})
    r.recv(1, "B", T0 + 1, [], marked=[mid])
    v = r.check()
    assert violated(v) == {"delivery-exactly-once", "recv-order"} and v.deliveries.lost == 1  # RV2: not answered


def test_a_message_received_twice() -> None:
    r = Run()
    m1 = r.send(0, "A", T0, {"B": "stored"})
    r.recv(1, "B", T0 + 1, [m1])
    m2 = r.send(0, "A", T0 + 2, {"B": "stored"})
    r.recv(1, "B", T0 + 3, [m1, m2], marked=[m2])
    v = r.check()
    assert violated(v) == {"delivery-exactly-once", "recv-order"}  # RV2: answered more than it read
    assert (v.deliveries.duplicated, v.deliveries.delivered_once) == (1, 1)
    assert (v.counterexample or "").startswith(f"delivery-exactly-once: duplicated: message {m1}")


def test_a_message_for_someone_else() -> None:
    r = Run()
    mid = r.send(0, "A", T0, {"B": "stored"})
    r.recv(1, "B", T0 + 1, [mid])
    r.recv(2, "C", T0 + 2, [mid], marked=[])
    v = r.check()
    assert "delivery-exactly-once" in violated(v) and v.deliveries.unexpected == 1


def test_recipients_that_differ_from_the_send_event() -> None:
    r = Run()
    r.send(0, "A", T0, {"B": "stored"})
    r.records[-1]["value"]["recipients"] = ["B", "C"]
    r.recv(1, "B", T0 + 1, [1])
    assert violated(r.check()) == {"delivery-exactly-once"}


def test_an_undrained_recipient_makes_the_verdict_unknown() -> None:
    r = Run()
    r.send(0, "A", T0, {"B": "stored"})
    r.op(1, "B", "room_who", {}, T0 + 1)  # alive after the send, never drained
    v = r.check()
    assert (v.verdict, v.exit_code, v.deliveries.undrained) == ("unknown", 2, 1)
    assert v.invariants["delivery-exactly-once"].status == "unknown" and v.unknown_because


def test_a_late_info_recv_inside_the_next_recvs_window_is_not_a_loss() -> None:
    r = Run()
    m1 = r.send(0, "A", T0, {"B": "stored"})
    m2 = r.send(0, "A", T0 + 0.5, {"B": "stored"})
    r.op(1, "B", "msg_recv", {"limit": 1}, T0 + 0.6, outcome="info", error="timeout")  # B's process 1 retires
    r.event(T0 + 1.0005, "B", "delivery", to="read", items=[[m1, "stored"]])  # ... its recv lands late
    r.recv(4, "B", T0 + 1, [m2])  # B, now process 4, reads m2 in a window that also holds m1's event
    r.recv(4, "B", T0 + 2, [])
    v = r.check()
    assert v.verdict == "valid", v.violations
    assert (v.deliveries.delivered_once, v.deliveries.read_by_info_recv) == (1, 1)
    assert v.info["msg_recv"] == {"found": 1, "not_found": 0, "unsettled": 0}


def test_a_recipient_that_left_or_died_is_counted_apart() -> None:
    r = Run()
    r.send(0, "A", T0, {"B": "stored", "C": "stored"})
    r.event(T0 + 1, "B", "delivery", to="expired", items=[[1, "stored"]])
    r.event(T0 + 1, "B", "leave", rooms=["repo:r"], reason="leave")
    r.op(1, "B", "room_leave", {}, T0 + 0.999)
    r.op(2, "C", "msg_recv", {"limit": 100}, T0 + 1, outcome="info", error="killed")
    v = r.check()
    assert v.verdict == "valid" and v.deliveries.unread_recipient_gone == 2


# -- history against events ----------------------------------------------------------------------


def test_an_ok_grant_with_no_event() -> None:
    r = Run()
    r.op(0, "A", "lease_claim", {"path": X}, T0,
         result={"ok": True, "token": 4, "mode": "exclusive", "expires_at": T0 + 10, "holder": "A"})
    v = r.check()
    assert violated(v) == {"history-events"} and "token 4" in (v.counterexample or "")


def test_a_failed_claim_that_has_its_event() -> None:
    r = Run()
    r.event(T0 + 0.001, "A", "lease_grant", X, mode="exclusive", token=1, expires_at=T0 + 10, previous_mode=None)
    r.op(0, "A", "lease_claim", {"path": X}, T0, outcome="fail", error="store_busy")
    v = r.check()
    assert violated(v) == {"history-events"} and "failed (store_busy)" in (v.counterexample or "")


def test_a_denied_claim_that_has_a_grant_event() -> None:
    r = Run()
    r.event(T0 + 0.001, "A", "lease_grant", X, mode="exclusive", token=1, expires_at=T0 + 10, previous_mode=None)
    r.deny(0, "A", X, T0, holder="B")
    assert violated(r.check()) == {"history-events", "lease-rules"}  # LR1: B never held X


def test_a_grant_nobody_asked_for() -> None:
    r = Run()
    r.event(T0, "A", "lease_grant", X, mode="exclusive", token=1, expires_at=T0 + 10, previous_mode=None)
    v = r.check()
    assert violated(v) == {"history-events"} and "no operation in the history" in (v.counterexample or "")


def test_an_ack_its_recipient_never_asked_for() -> None:
    """A's ack moved B's delivery too (one event each): B's has no op of B's to explain it."""
    r = good_run()
    mid = r.send(0, "A", T0 + 2.0, {"B": "stored"})
    r.recv(1, "B", T0 + 2.1, [mid])
    r.event(T0 + 2.201, "B", "delivery", to="acked", items=[[mid, "read"]])
    v = r.check()
    assert violated(v) == {"history-events", "ack"}  # ack: AK1, the oracle's own reckoning
    told = [x.message for x in v.violations if x.invariant == "history-events"]
    assert len(told) == 1 and "delivery event" in told[0] and "no operation in the history" in told[0]


def test_info_ops_are_settled_found_and_not_found() -> None:
    r = Run()
    r.event(T0 + 0.5, "A", "lease_grant", X, mode="exclusive", token=1, expires_at=T0 + 10, previous_mode=None)
    r.op(0, "A", "lease_claim", {"path": X, "ttl_s": 9.5}, T0, outcome="info", error="timeout")
    r.op(1, "B", "lease_claim", {"path": Y}, T0, outcome="info", error="timeout")
    r.record(2, "C", "invoke", "msg_send", {"to": "*"}, T0)  # killed before it could complete
    v = r.check()
    assert v.verdict == "valid"
    assert v.info == {"lease_claim": {"found": 1, "not_found": 1, "unsettled": 0},
                      "msg_send": {"found": 0, "not_found": 1, "unsettled": 0}}


def test_an_info_claim_that_took_effect_twice() -> None:
    r = Run()
    r.event(T0 + 0.5, "A", "lease_grant", X, mode="exclusive", token=1, expires_at=T0 + 10, previous_mode=None)
    r.event(T0 + 0.6, "A", "lease_grant", X, mode="exclusive", token=2, expires_at=T0 + 10, previous_mode="exclusive")
    r.op(0, "A", "lease_claim", {"path": X, "ttl_s": 9.5}, T0, outcome="info", error="timeout")
    v = r.check()
    assert violated(v) == {"history-events"} and "took effect twice" in (v.counterexample or "")


def test_an_op_settled_both_info_and_ok() -> None:
    r = Run()
    r.claim(0, "A", X, T0)
    r.records[-1]["type"] = "info"  # the op ended info ...
    r.record(0, "A", "ok", "lease_claim", {"ok": True, "token": 1}, T0 + 0.003)  # ... and then ok as well
    v = r.check()
    assert violated(v) == {"history-events"} and "settled two ways" in (v.counterexample or "")


def test_a_retired_process_that_invokes_again() -> None:
    r = Run()
    r.op(0, "A", "room_who", {}, T0, outcome="info", error="timeout")
    r.op(0, "A", "room_who", {}, T0 + 1)
    assert violated(r.check()) == {"history-events"}


def test_malformed_records_are_refused_naming_the_field() -> None:
    r = good_run()
    del r.records[3]["wall"]
    with pytest.raises(ValueError, match="history record 3: missing field 'wall'"):
        r.check()
    with pytest.raises(ValueError, match="event 0: missing field 'kind'"):
        check([{"seq": 1, "at": T0}], [], "ok")


# -- drift, stale writes, integrity ---------------------------------------------------------------


def test_drift_critical_without_any_other_holder() -> None:
    r = Run()
    ta = r.claim(0, "A", X, T0)
    r.event(T0 + 1.001, "A", "note_read", X, hash="h0")
    r.op(0, "A", "note_read", {"path": X}, T0 + 1, result={"hash": "h0"})
    r.op(0, "A", "edit", {"path": X, "token": ta}, T0 + 2, result={"path": X, "token": ta, "hash": "h1"})
    r.op(0, "A", "drift_check", {"path": X}, T0 + 3, result={"severity": "CRITICAL", "changed": True, "holder": None})
    v = r.check()
    assert violated(v) == {"drift-truth"}
    assert "said CRITICAL" in (v.counterexample or "") and "no other session held it" in (v.counterexample or "")


def test_drift_safe_after_a_completed_edit() -> None:
    r = Run()
    r.event(T0 + 0.001, "A", "note_read", X, hash="h0")
    r.op(0, "A", "note_read", {"path": X}, T0, result={"hash": "h0"})
    r.op(1, "B", "edit", {"path": X, "token": 1}, T0 + 1, result={"path": X, "token": 1, "hash": "h1"})
    r.op(0, "A", "drift_check", {"path": X}, T0 + 2, result={"severity": "SAFE", "changed": False, "holder": None})
    assert violated(r.check()) == {"drift-truth"}


def test_drift_minor_while_another_session_held_the_path() -> None:
    r = Run()
    r.claim(1, "B", X, T0)
    r.event(T0 + 1.001, "A", "note_read", X, hash="h0")
    r.op(0, "A", "note_read", {"path": X}, T0 + 1, result={"hash": "h0"})
    r.op(1, "B", "edit", {"path": X, "token": 1}, T0 + 2, result={"path": X, "token": 1, "hash": "h1"})
    r.op(0, "A", "drift_check", {"path": X}, T0 + 3, result={"severity": "MINOR", "changed": True, "holder": None})
    v = r.check()
    assert violated(v) == {"drift-truth"} and "session B held it at the read" in (v.counterexample or "")


def test_a_stale_holder_write_is_listed_apart_and_is_not_a_violation() -> None:
    r = Run()
    ta = r.claim(0, "A", X, T0, ttl=1)
    r.event(T0 + 2, "A", "lease_expire", X, mode="exclusive", token=ta, expires_at=T0 + 1.001)
    tb = r.claim(1, "B", X, T0 + 2)
    r.op(0, "A", "edit", {"path": X, "token": ta}, T0 + 3, result={"path": X, "token": ta, "hash": "h1"})
    v = r.check()
    assert v.verdict == "valid" and violated(v) == set()
    assert len(v.stale_writes) == 1
    w = v.stale_writes[0]
    assert (w.path, w.session, w.token, w.newer_token, w.newer_session) == (X, "A", ta, tb, "B")
    assert v.to_dict()["stale_writes"][0]["newer_session"] == "B"


def test_integrity_not_ok() -> None:
    v = good_run().check(integrity="*** in database main ***\nPage 7: btreeInitPage() returns error code 11")
    assert violated(v) == {"integrity"} and v.verdict == "invalid"
    assert good_run().check(integrity=None).verdict == "unknown"


def test_an_empty_run_is_unknown() -> None:
    assert check([], [], "ok").verdict == "unknown"


# -- a real store -------------------------------------------------------------------------------


class Recorder:
    """Calls the real store and records each call the way an agent does (docs/history.md).
    Walls come from the store's own clock, so a clock shift stands in for waiting."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self.records: list[dict[str, Any]] = []
        self.index: dict[int, int] = defaultdict(int)
        self.session: dict[int, str | None] = defaultdict(lambda: None)

    def _write(self, p: int, type_: str, f: str, value: Any, error: str | None = None) -> None:
        self.records.append({"index": self.index[p], "time": time.monotonic_ns(), "wall": self.store.clock.now(),
                             "process": p, "agent": f"a{p:02d}", "session": self.session[p], "type": type_,
                             "f": f, "value": value, "error": error})
        self.index[p] += 1

    def call(self, p: int, f: str, args: dict[str, Any], digest: Any = lambda r: {}) -> Any:
        self._write(p, "invoke", f, args)
        try:
            got = getattr(self.store, f)(**args) if f != "edit" else _edit(**args)
        except RoomError as exc:
            self._write(p, "fail" if exc.definite else "info", f, args, exc.code)
            return None
        self._write(p, "ok", f, digest(got))
        return got

    def join(self, p: int, cwd: Path) -> str:
        joined = self.call(p, "room_join", {"cwd": str(cwd), "pid": None, "harness": "sim", "harness_key": str(uuid.UUID(int=p + 1))},
                           lambda j: {"session_id": j.session_id, "rooms": j.rooms, "autonomy": j.autonomy})
        self.session[p] = joined.session_id
        return joined.session_id

    def claim(self, p: int, path: Path, ttl: float = 30, mode: str = "exclusive") -> Any:
        def digest(c: Any) -> dict[str, Any]:
            lease = c.lease or c.holder
            return {"ok": c.ok, "token": c.lease.token if c.lease else None, "mode": lease.mode,
                    "expires_at": lease.expires_at, "holder": lease.session_id}
        return self.call(p, "lease_claim", {"session_id": self.session[p], "path": str(path), "ttl_s": ttl,
                                            "mode": mode}, digest)

    def recv(self, p: int) -> list[int]:
        got = self.call(p, "msg_recv", {"session_id": self.session[p]},
                        lambda r: {"message_ids": [m.id for m in r.messages], "senders": [m.sender for m in r.messages]})
        return [m.id for m in got.messages]


def _edit(session_id: str, path: str, token: int) -> dict[str, Any]:
    content = f"{session_id} {token}\n".encode()
    Path(path).write_bytes(content)
    return {"path": path, "token": token, "hash": hashlib.sha256(content).hexdigest()}


def test_a_history_recorded_from_a_real_store_is_valid(tmp_path: Path, repo: Path) -> None:
    store = Store.open(tmp_path / "real" / "room.db", clock=Clock(), busy_timeout_s=2.0)
    rec = Recorder(store)
    a, b, c = (rec.join(p, repo) for p in range(3))
    x, y, z = repo / "x.py", repo / "y.py", repo / "z.py"
    for f in (x, y, z):
        f.write_text("original\n")
    edit = {"digest": lambda r: r}

    ta = rec.claim(0, x).lease.token
    assert not rec.claim(1, x).ok  # denied: A holds it
    rec.call(2, "note_read", {"session_id": c, "path": str(x)}, lambda h: {"hash": h})
    rec.call(0, "edit", {"session_id": a, "path": str(x), "token": ta}, **edit)
    rec.call(0, "lease_release", {"session_id": a, "path": str(x)})
    tb = rec.claim(1, x).lease.token
    rec.call(1, "lease_renew", {"session_id": b, "path": str(x)},
             lambda lease: {"token": lease.token, "expires_at": lease.expires_at, "mode": lease.mode})
    drift = rec.call(2, "drift_check", {"session_id": c, "path": str(x)},
                     lambda d: {"severity": d.severity, "changed": d.changed, "holder": d.holder})
    assert drift.severity == "CRITICAL"
    assert rec.claim(1, y, mode="shared").ok and rec.claim(2, y, mode="shared").ok and not rec.claim(0, y).ok
    mid = rec.call(0, "msg_send", {"session_id": a, "to": "*", "subject": "a00#1"},
                   lambda s: {"message_id": s.message_id, "recipients": s.recipients, "op": "a00#1"}).message_id
    assert rec.recv(1) == [mid]
    rec.call(1, "msg_ack", {"session_id": b, "message_id": mid}, lambda _: {"message_id": mid})
    assert rec.claim(2, z, ttl=1).ok
    store.clock.shift(2)  # C's lease on z runs out; B takes it (the sweep writes lease_expire)
    assert rec.claim(1, z).ok
    assert rec.call(2, "lease_release", {"session_id": c, "path": str(z)}) is None  # fail: lease_not_held
    rec.call(2, "room_leave", {"session_id": c})  # C leaves with the broadcast unread
    assert rec.recv(0) == [] and rec.recv(1) == []  # the final drain
    rec.call(1, "lease_release", {"session_id": b, "path": str(x)})

    events = store.events(0, 100_000)
    v = check(events, rec.records, store.integrity_check())
    store.close()
    assert v.verdict == "valid", v.violations
    assert {e.kind for e in events} >= {"join", "lease_grant", "lease_renew", "lease_release", "lease_expire",
                                        "note_read", "send", "delivery", "leave"}
    d = v.deliveries
    assert (d.sent, d.delivered_once, d.unread_recipient_gone, d.lost, d.duplicated) == (2, 1, 1, 0, 0)
    assert v.invariants["lease-exclusive"].checked == 6 and v.invariants["drift-truth"].checked == 1
    assert v.counts["exclusive_windows"] == 4 and v.stale_writes == ()
    assert tb > ta
