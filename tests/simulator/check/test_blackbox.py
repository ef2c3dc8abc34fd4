"""The black-box lease check: holding windows from the clients' history alone, and overlaps."""

from __future__ import annotations

import threading
import time
import uuid
from collections import defaultdict
from pathlib import Path
from typing import Any

from agents_room.store import Clock, RoomError, Store
from sim.check import blackbox
from sim.check.checker import check

T0 = 1_800_000_000.0
X = "/repo/x.py"


class History:
    def __init__(self) -> None:
        self.records: list[dict[str, Any]] = []
        self.index: dict[int, int] = defaultdict(int)

    def op(self, p: int, s: str, f: str, args: dict[str, Any], t: float, end: float | None = None,
           outcome: str = "ok", result: dict[str, Any] | None = None) -> History:
        for type_, wall, value in (("invoke", t, args), (outcome, end or t + 0.002, result or {})):
            if type_ == "pending":
                break
            self.records.append({"index": self.index[p], "time": int(wall * 1e9), "wall": wall, "process": p,
                                 "agent": f"a{p}", "session": s, "type": type_, "f": f, "value": value,
                                 "error": None if type_ in ("invoke", "ok") else "timeout"})
            self.index[p] += 1
        return self

    def claim(self, p: int, s: str, t: float, ttl: float = 10, mode: str = "exclusive", token: int = 1,
              end: float | None = None) -> History:
        end = end or t + 0.002
        return self.op(p, s, "lease_claim", {"path": X, "mode": mode}, t, end,
                       result={"ok": True, "token": token, "mode": mode, "expires_at": t + 0.001 + ttl, "holder": s})

    def release(self, p: int, s: str, t: float) -> History:
        return self.op(p, s, "lease_release", {"path": X}, t)

    def renew(self, p: int, s: str, t: float, expires_at: float, token: int = 9) -> History:
        return self.op(p, s, "lease_renew", {"path": X}, t, result={"token": token, "expires_at": expires_at})

    def overlaps(self) -> list[Any]:
        return list(blackbox.check(self.records).overlaps)


def test_release_before_the_next_claim_is_no_overlap() -> None:
    h = History().claim(0, "A", T0).release(0, "A", T0 + 1).claim(1, "B", T0 + 1.0005)
    assert h.overlaps() == []
    assert blackbox.check(h.records).windows == 2


def test_two_exclusive_windows_overlapping_are_named() -> None:
    h = History().claim(0, "A", T0, token=1).claim(1, "B", T0 + 1, token=2).release(0, "A", T0 + 2)
    (o,) = h.overlaps()
    assert o.invariant == "lease-windows" and o.details["sessions"] == ["A", "B"] and o.details["tokens"] == [1, 2]
    assert X in o.message and "release sent" in o.message and "08:00:01.002000Z" in o.message


def test_the_expiry_the_store_announced_ends_a_window() -> None:
    h = History().claim(0, "A", T0, ttl=1).claim(1, "B", T0 + 1.5)
    assert h.overlaps() == []
    assert History().claim(0, "A", T0, ttl=2).claim(1, "B", T0 + 1.5).overlaps() != []


def test_a_renewal_extends_the_window() -> None:
    h = History().claim(0, "A", T0, ttl=1).renew(0, "A", T0 + 0.5, expires_at=T0 + 3).claim(1, "B", T0 + 2)
    assert len(h.overlaps()) == 1
    failed = History().claim(0, "A", T0, ttl=1)
    failed.op(0, "A", "lease_renew", {"path": X}, T0 + 0.5, outcome="fail")
    assert failed.claim(1, "B", T0 + 2).overlaps() == []  # a refused renewal extends nothing


def test_the_holders_own_reclaim_extends_and_is_not_an_overlap() -> None:
    h = History().claim(0, "A", T0, ttl=1).claim(0, "A", T0 + 0.5, ttl=2, token=2)
    assert h.overlaps() == [] and blackbox.check(h.records).windows == 1
    assert len(h.claim(1, "B", T0 + 2, token=3).overlaps()) == 1  # the re-claim carried A's window past T0+2


def test_stepping_down_to_shared_ends_the_exclusive_window() -> None:
    h = History().claim(0, "A", T0).claim(0, "A", T0 + 1, mode="shared", token=2)
    h.claim(1, "B", T0 + 1.5, mode="shared", token=3)
    assert h.overlaps() == []
    assert len(History().claim(0, "A", T0, mode="shared").claim(1, "B", T0 + 1).overlaps()) == 1


def test_shared_windows_side_by_side_are_fine() -> None:
    h = History().claim(0, "A", T0, mode="shared").claim(1, "B", T0 + 0.1, mode="shared", token=2)
    assert h.overlaps() == []


def test_process_retirement_and_leave_end_windows() -> None:
    h = History().claim(0, "A", T0)
    h.op(0, "A", "room_who", {}, T0 + 0.5, outcome="info")  # the process retires: trust stops here
    assert h.claim(1, "B", T0 + 1).overlaps() == []
    h = History().claim(0, "A", T0).op(0, "A", "room_leave", {}, T0 + 0.5).claim(1, "B", T0 + 1)
    assert h.overlaps() == []
    h = History().claim(0, "A", T0).op(0, "A", "lease_claim", {"path": X}, T0 + 0.5, outcome="pending")
    assert h.claim(1, "B", T0 + 1).overlaps() == []  # killed mid-operation


def test_an_info_or_denied_claim_opens_no_window() -> None:
    h = History().op(0, "A", "lease_claim", {"path": X}, T0, outcome="info")
    h.op(2, "C", "lease_claim", {"path": X}, T0, result={"ok": False, "token": None, "mode": "exclusive",
                                                          "expires_at": T0 + 9, "holder": "B"})
    assert h.claim(1, "B", T0 + 0.1).overlaps() == [] and blackbox.check(h.records).windows == 1


def test_the_checker_carries_the_black_box_result() -> None:
    h = History().claim(0, "A", T0, token=1).claim(1, "B", T0 + 1, token=2)
    events = [  # the store's events agree with the overlap
        {"seq": 1, "at": T0 + 0.001, "session_id": "A", "kind": "lease_grant", "path": X,
         "payload": {"mode": "exclusive", "token": 1, "expires_at": T0 + 10.001, "previous_mode": None}},
        {"seq": 2, "at": T0 + 1.001, "session_id": "B", "kind": "lease_grant", "path": X,
         "payload": {"mode": "exclusive", "token": 2, "expires_at": T0 + 11.001, "previous_mode": None}},
    ]
    v = check(events, h.records, "ok")
    assert v.invariants["lease-windows"].status == "violated"
    assert v.invariants["lease-exclusive"].status == "violated"


def test_threads_contending_on_a_real_store_leave_no_overlap(tmp_path: Path, repo: Path) -> None:
    """Four threads (one process each, in history terms) claim and release one hot path with
    short TTLs on a real store: many windows, none overlapping, and the model agrees. A lease
    left to expire holds the path for its whole second while the others are denied, so the
    threads go on (past 60 claims each) until 24 exclusive grants were made: how many windows
    a fixed count of claims yields depends on the machine's speed."""
    store = Store.open(tmp_path / "s" / "room.db", clock=Clock(), busy_timeout_s=5.0)
    records: list[dict[str, Any]] = []
    lock = threading.Lock()
    path = str(repo / "hot.txt")
    exclusive_grants = [0]
    deadline = time.monotonic() + 60

    def write(p: int, s: str | None, idx: list[int], type_: str, f: str, value: Any, error: str | None = None) -> None:
        with lock:
            records.append({"index": idx[0], "time": 0, "wall": store.clock.now(), "process": p, "agent": f"a{p}",
                            "session": s, "type": type_, "f": f, "value": value, "error": error})
        idx[0] += 1

    def agent(p: int) -> None:
        idx = [0]
        args = {"cwd": str(repo), "pid": None, "harness": "sim", "harness_key": str(uuid.UUID(int=p + 1))}
        write(p, None, idx, "invoke", "room_join", args)
        sid = store.room_join(**args).session_id
        write(p, sid, idx, "ok", "room_join", {"session_id": sid})
        n = 0
        while n < 60 or (exclusive_grants[0] < 24 and time.monotonic() < deadline):
            n += 1
            mode = "shared" if (n + p) % 3 == 0 else "exclusive"
            write(p, sid, idx, "invoke", "lease_claim", {"path": path, "mode": mode, "ttl_s": 1})
            try:
                c = store.lease_claim(sid, path, ttl_s=1, mode=mode)
            except RoomError as exc:
                write(p, sid, idx, "fail", "lease_claim", {"path": path}, exc.code)
                continue
            lease = c.lease or c.holder
            if c.ok and mode == "exclusive":
                with lock:
                    exclusive_grants[0] += 1
            write(p, sid, idx, "ok", "lease_claim", {"ok": c.ok, "token": c.lease.token if c.lease else None,
                                                      "mode": lease.mode, "expires_at": lease.expires_at})
            if c.ok and n % 8:
                write(p, sid, idx, "invoke", "lease_release", {"path": path})
                try:
                    store.lease_release(sid, path)
                    write(p, sid, idx, "ok", "lease_release", {})
                except RoomError as exc:
                    write(p, sid, idx, "fail", "lease_release", {"path": path}, exc.code)

    threads = [threading.Thread(target=agent, args=(p,)) for p in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for r in records:
        r["time"] = int(r["wall"] * 1e9)
    box = blackbox.check(records)
    v = check(store.events(0, 100_000), records, store.integrity_check())
    store.close()
    assert box.overlaps == () and box.exclusive_windows > 10
    assert v.verdict == "valid", v.violations[:3]


def test_a_reclaim_answered_after_the_old_expiry_starts_a_new_window() -> None:
    """A's lease ran out while its re-claim waited for the write lock; B held the path in
    that gap. A's windows must not span the gap."""
    h = History().claim(0, "A", T0, ttl=1, token=1)
    h.claim(1, "B", T0 + 1.1, ttl=1, token=2).release(1, "B", T0 + 1.3)
    h.claim(0, "A", T0 + 0.9, ttl=5, token=3, end=T0 + 1.4)
    assert h.overlaps() == []
    assert blackbox.check(h.records).windows == 3
