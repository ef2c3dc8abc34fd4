"""Push latency of a wake on PostgreSQL: from the sender's commit to the waiter's wake, told by
LISTEN/NOTIFY (what the watcher and ``hook --wait`` do now) vs polling the newest seq (what
they did, and still do on SQLite), p50/p99 over N messages, one run.

    .venv/bin/python bench/pg_wake_latency.py [--messages 100] [--polls 0.3,0.5] [--fsync on|off]

A throwaway cluster (tests/pgcluster.py). The waiter is a process of its own blocking on
``store.mail_waiter`` (or a ``SeqPoller`` at each poll interval), and records when it woke and
the newest message id it then saw; the sender, another process, sends one message at a time
at random gaps (0.2-0.6 s, so polls meet messages at every phase) and records when its
``msg_send`` returned (the commit acknowledged). Latency = the first wake that saw the message
minus that moment: it can be slightly negative with NOTIFY, which reaches the listener while
the sender is still reading its commit's answer. Give the load (uptime) beside any figure.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

_WAITER = r"""
import json, sys, time
from agents_room.store import Store
from agents_room.store.mailwait import SeqPoller
url, me, mode, poll_s, n = sys.argv[1], sys.argv[2], sys.argv[3], float(sys.argv[4]), int(sys.argv[5])
store = Store.open(url)
waiter = store.mail_waiter(poll_s) if mode == "notify" else SeqPoller(store.last_seq, poll_s)
waiter.watch(me)
waiter.wait(0)  # the first look
print("ready", flush=True)
wakes, newest = [], 0
while newest < n:
    if waiter.wait(1.0):
        at = time.monotonic()
        with store.db.read() as tx:
            newest = tx.scalar("SELECT count(*) FROM deliveries WHERE recipient = ?", (me,))
        wakes.append((at, newest))
print(json.dumps(wakes), flush=True)
"""

_SENDER = r"""
import json, random, sys, time
from agents_room.store import Store
url, bob, me, n = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
rng = random.Random(7)
with Store.open(url) as store:
    sent = []
    for i in range(n):
        time.sleep(rng.uniform(0.2, 0.6))
        t0 = time.monotonic()
        store.msg_send(bob, me, subject=f"m{i}")
        sent.append((t0, time.monotonic()))
print(json.dumps(sent), flush=True)
"""


def run(url: str, mode: str, poll_s: float, n: int) -> dict:
    from agents_room.store import Store

    with Store.open(url) as store:
        me = store.room_join(cwd="/bench", pid=None, label="waiter", autonomy="wake").session_id
        bob = store.room_join(cwd="/bench", pid=None, label="sender").session_id
    waiter = subprocess.Popen([sys.executable, "-c", _WAITER, url, me, mode, str(poll_s), str(n)],
                              stdout=subprocess.PIPE, text=True)
    assert waiter.stdout is not None and waiter.stdout.readline().strip() == "ready"
    sender = subprocess.run([sys.executable, "-c", _SENDER, url, bob, me, str(n)], capture_output=True, text=True,
                            check=True)
    sent = json.loads(sender.stdout)
    wakes = json.loads(waiter.communicate(timeout=120)[0])
    lat, send_ms = [], []
    for i, (t0, t1) in enumerate(sent, start=1):
        woke = next(at for at, seen in wakes if seen >= i)
        lat.append((woke - t1) * 1e3)
        send_ms.append((t1 - t0) * 1e3)
    lat.sort()
    send_ms.sort()
    return {"mode": mode if mode == "notify" else f"poll {poll_s:g} s", "messages": n,
            "p50_ms": round(lat[n // 2], 1), "p99_ms": round(lat[min(n - 1, int(n * 0.99))], 1),
            "max_ms": round(lat[-1], 1), "wakes": len(wakes), "send_p50_ms": round(send_ms[n // 2], 1)}


if __name__ == "__main__":
    import pgcluster

    ap = argparse.ArgumentParser()
    ap.add_argument("--messages", type=int, default=100)
    ap.add_argument("--polls", default="0.3,0.5", help="poll intervals to compare (the watcher's, the hook's)")
    ap.add_argument("--fsync", default="on", choices=["on", "off"])
    args = ap.parse_args()
    cluster = pgcluster.start_cluster(fsync=args.fsync == "on")
    try:
        print(f"load: {os.getloadavg()}, PostgreSQL fsync={args.fsync}", flush=True)
        modes = [("notify", 0.3)] + [("poll", float(p)) for p in args.polls.split(",")]
        for mode, poll_s in modes:
            print(json.dumps(run(pgcluster.new_schema(cluster), mode, poll_s, args.messages)), flush=True)
        print(f"load: {os.getloadavg()}", flush=True)
    finally:
        cluster.stop()
