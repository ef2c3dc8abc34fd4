"""Several real OS processes (spawned: a fresh interpreter each, no inherited connection)
claim, renew and release the same few paths with one-second leases through one store (a
SQLite file, or a PostgreSQL database).
Afterwards the events table, replayed in seq order, must show mutual exclusion, increasing
fencing tokens and releases of what was held; every call that failed must have failed with a
coded error."""

from __future__ import annotations

import json
import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from agents_room.store import Event, Store

from .conftest import checker_problems

WORKERS = 6
GRANTS = 100  # at least, in all
SECONDS = 3.0
PATHS = ("a.txt", "b.txt", "c.txt")
# Directory leases (store/coverage.py): a directory, what lies beneath it, and a name beside it.
DIRECTORY_PATHS = ("src/", "src/a.txt", "src/b/", "src/b/c.txt", "srcs.txt")

_TEMPLATE = r"""
import json, os, random, sys, time
from agents_room.store import RoomError, Store

db, cwd, go, seconds, seed = sys.argv[1:6]
rng = random.Random(int(seed))
store = Store.open(db, busy_timeout_s=3.0)
sid = store.room_join(cwd=cwd, pid=os.getpid(), label=f"w{seed}").session_id
out = {"session": sid, "tokens": [], "granted": 0, "denied": 0, "codes": {}, "uncoded": []}

def call(f, *args, **kw):
    try:
        return True, f(*args, **kw)
    except RoomError as exc:
        out["codes"][exc.code] = out["codes"].get(exc.code, 0) + 1
    except Exception as exc:  # anything uncoded is what the test looks for
        out["uncoded"].append(repr(exc))
    return False, None

print("ready", flush=True)
while not os.path.exists(go):
    time.sleep(0.001)
end = time.monotonic() + float(seconds)
# A slower engine, or a loaded machine, hammers longer (not a lower bar): at least the
# seconds given, then until this worker has its share of the grants the test asks for.
last = end + 30
abandoned = {}  # path -> until when this worker keeps away from a lease it left to expire
while time.monotonic() < end or (out["granted"] < %(share)d and time.monotonic() < last):
    now = time.monotonic()
    choices = [p for p in %(paths)r if abandoned.get(p, 0) < now]
    if not choices:
        time.sleep(0.005)
        continue
    path = rng.choice(choices)
    mode = "shared" if rng.random() < 0.3 else "exclusive"
    ok, claim = call(store.lease_claim, sid, path, ttl_s=1, mode=mode)
    if not ok:
        continue
    if not claim.ok:
        out["denied"] += 1
        continue
    out["granted"] += 1
    out["tokens"].append(claim.lease.token)
    time.sleep(rng.random() * 0.004)
    roll = rng.random()
    if roll < 0.25:
        ok, lease = call(store.lease_renew, sid, path, ttl_s=1)
        if ok:
            out["tokens"].append(lease.token)
    if roll < 0.95 and out["granted"] != 2:
        call(store.lease_release, sid, path)
    else:  # left to expire (each worker's second grant at least), to be swept by another's claim
        abandoned[path] = time.monotonic() + 1.5
store.close()
print(json.dumps(out), flush=True)
"""


def _worker(paths: tuple[str, ...]) -> str:
    return _TEMPLATE % {"paths": paths, "share": -(-GRANTS // WORKERS)}


def replay_leases(events: list[Event]) -> list[str]:
    """Replay the lease events in seq order against a model of the holders of each path;
    return every violation found (empty: the history is consistent)."""
    holders: dict[str, dict[str, tuple[str, int]]] = {}
    last_token: dict[str, int] = {}
    seen_tokens: set[int] = set()
    problems: list[str] = []
    for e in events:
        if not e.kind.startswith("lease_"):
            continue
        path, sid, p = e.path or "", e.session_id or "", e.payload
        held = holders.setdefault(path, {})
        token = p["token"]
        if e.kind in ("lease_grant", "lease_renew"):
            if token in seen_tokens:
                problems.append(f"seq {e.seq}: token {token} issued twice")
            seen_tokens.add(token)
            if token <= last_token.get(path, 0):
                problems.append(f"seq {e.seq}: token {token} on {path} not above {last_token[path]}")
            last_token[path] = token
        if e.kind == "lease_grant":
            if (p["previous_mode"] is None) != (sid not in held):
                problems.append(f"seq {e.seq}: grant to {sid} on {path} disagrees on whether it held it")
            others = {s: m for s, (m, _) in held.items() if s != sid}
            if others and (p["mode"] == "exclusive" or "exclusive" in others.values()):
                problems.append(f"seq {e.seq}: {p['mode']} grant to {sid} on {path} while held by {others}")
            held[sid] = (p["mode"], token)
        elif e.kind == "lease_renew":
            if sid not in held:
                problems.append(f"seq {e.seq}: renew by {sid} of {path}, which it does not hold")
            held[sid] = (p["mode"], token)
        elif e.kind in ("lease_release", "lease_expire"):
            if held.get(sid, (None, None))[1] != token:
                problems.append(f"seq {e.seq}: {e.kind} by {sid} of {path} token {token}, held {held.get(sid)}")
            held.pop(sid, None)
    return problems


def _event(seq: int, kind: str, sid: str, **payload: Any) -> Event:
    return Event(seq, 0.0, sid, kind, "/p", payload)


def test_the_replay_flags_two_exclusive_holders() -> None:
    bad = [_event(1, "lease_grant", "s1", mode="exclusive", token=1, previous_mode=None),
           _event(2, "lease_grant", "s2", mode="exclusive", token=2, previous_mode=None)]
    assert len(replay_leases(bad)) == 1


def test_the_replay_flags_a_token_going_down() -> None:
    bad = [_event(1, "lease_grant", "s1", mode="shared", token=5, previous_mode=None),
           _event(2, "lease_grant", "s2", mode="shared", token=4, previous_mode=None)]
    assert len(replay_leases(bad)) == 1


def test_the_replay_flags_a_release_of_a_stale_token() -> None:
    bad = [_event(1, "lease_grant", "s1", mode="exclusive", token=1, previous_mode=None),
           _event(2, "lease_renew", "s1", mode="exclusive", token=2),
           _event(3, "lease_release", "s1", mode="exclusive", token=1, reason="release")]
    assert len(replay_leases(bad)) == 1


def test_the_replay_accepts_shared_holders_and_a_handover() -> None:
    good = [_event(1, "lease_grant", "s1", mode="shared", token=1, previous_mode=None),
            _event(2, "lease_grant", "s2", mode="shared", token=2, previous_mode=None),
            _event(3, "lease_release", "s1", mode="shared", token=1, reason="release"),
            _event(4, "lease_expire", "s2", mode="shared", token=2, expires_at=0.0),
            _event(5, "lease_grant", "s1", mode="exclusive", token=3, previous_mode=None)]
    assert replay_leases(good) == []


@pytest.mark.slow
@pytest.mark.parametrize("paths", [PATHS, DIRECTORY_PATHS], ids=["files", "directories"])
def test_processes_claiming_the_same_paths_never_overlap(tmp_path: Path, location: str, paths: tuple[str, ...]) -> None:
    db = location  # a file, or a PostgreSQL schema (every engine: tests/store/conftest.py)
    cwd = tmp_path / "work"
    cwd.mkdir()
    Store.open(db).close()
    go = tmp_path / "go"
    procs = [
        subprocess.Popen([sys.executable, "-c", _worker(paths), str(db), str(cwd), str(go), str(SECONDS), str(seed)],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        for seed in range(WORKERS)
    ]
    for p in procs:
        assert p.stdout is not None and p.stdout.readline().strip() == "ready"
    go.touch()
    results = [(p.communicate(timeout=60), p.returncode) for p in procs]
    reports = []
    for (out, errs), code in results:
        assert code == 0, errs
        reports.append(json.loads(out.strip().splitlines()[-1]))

    uncoded = [u for r in reports for u in r["uncoded"]]
    assert uncoded == []
    codes = Counter()
    for r in reports:
        codes.update(r["codes"])
    # store_busy is the worst a contended call may see; lease_not_held is a release or renew
    # that came after its own one-second lease had already expired.
    assert set(codes) <= {"store_busy", "lease_not_held"}, codes
    granted = sum(r["granted"] for r in reports)
    assert granted >= GRANTS and sum(r["denied"] for r in reports) > 0, reports

    with Store.open(db) as store:
        events = store.events(limit=10_000_000)
        assert store.integrity_check() == "ok"
    assert replay_leases(events) == []
    # the simulator's checker: seq order is commit order, one clock; its own coverage rule
    # (sim/check/cover.py) holds a directory and the paths beneath it to exclusion
    assert checker_problems(events) == []
    assert any(e.kind == "lease_expire" for e in events)
    if paths == DIRECTORY_PATHS:
        assert {e.path[len(str(cwd)) + 1:] for e in events if e.kind == "lease_grant"} == set(DIRECTORY_PATHS)
    issued = {(e.session_id, e.payload["token"]) for e in events if e.kind in ("lease_grant", "lease_renew")}
    answered = {(r["session"], t) for r in reports for t in r["tokens"]}
    assert answered == issued
