"""How fast an idle Claude Code session is woken by mail, per lever: from another agent's
``msg_send`` answer to the first model request that holds the message.

One interactive Claude Code (a real terminal: tmux) per lever, against the scripted model on
loopback (sim/harness), joined at ``wake``; ``--n`` times: wait until it is idle (its Stop
hooks ran: a new asyncRewake waiter holds its marker beside the store), send it a message from
this process, wait for the request that holds it, and for the woken turn's end. The levers:
``async-rewake`` (the installed ``hook --wait`` Stop hook) and ``channel`` (``install
claude-code --channel``, started with ``--dangerously-load-development-channels server:room``).

    .venv/bin/python bench/wake_latency.py [--n 10] [--lever async-rewake channel]

The session, its HOME and store live in a scratch folder under /var/tmp (never ~/.agents-room);
the CLI comes from $AGENTS_ROOM_NPM_CACHE; its traffic beyond the model goes to a refusing
proxy on loopback.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

from harnesscli import scratch_home  # noqa: E402
from harnessrig import Rig  # noqa: E402
from test_wake_idle import WAKE_S, Idle, asked_after, channel_session, idle_session  # noqa: E402


def waiter_pid(rig: Rig, idle: Idle, other_than: str | None) -> str:
    """The pid in the session's waiter marker once a waiter other than ``other_than`` holds it."""
    marker = rig.store.parent / "waiters" / idle.session
    deadline = time.monotonic() + WAKE_S
    while time.monotonic() < deadline:
        try:
            pid = marker.read_text()
        except OSError:
            pid = ""
        if pid and pid != other_than:
            return pid
        time.sleep(0.05)
    raise SystemExit(f"{idle.agent.name}: no new asyncRewake waiter within {WAKE_S:g} s")


def measure(lever: str, n: int) -> list[float]:
    root = scratch_home()
    rig = Rig(root)
    try:
        if lever == "channel":
            idle = channel_session(rig, "grace")
        else:
            idle = idle_session(rig, "claude-code", "frank")
        latencies, waiter = [], None
        for i in range(n):
            waiter = waiter_pid(rig, idle, waiter)
            subject = f"{lever} wake {i}"
            message, sent_at = rig.peer_send(idle.session, subject, "please look")
            shown = asked_after(idle, lambda r, s=subject: s in r.text(), f"a request holding {subject!r}")
            latencies.append(shown.at - sent_at)
            rig.wait_delivery(idle.session, message, ("accepted",), timeout=WAKE_S)
        return latencies
    finally:
        left = rig.close()
        shutil.rmtree(root, ignore_errors=True)
        if left:
            raise SystemExit("; ".join(left))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", type=int, default=10, help="wakes per lever")
    parser.add_argument("--lever", nargs="+", choices=["async-rewake", "channel"], default=["async-rewake", "channel"])
    args = parser.parse_args()
    print(f"{'lever':<14} {'n':>3} {'p50 ms':>8} {'max ms':>8}  all (ms)")
    for lever in args.lever:
        ms = [x * 1000 for x in measure(lever, args.n)]
        print(f"{lever:<14} {len(ms):>3} {statistics.median(ms):>8.0f} {max(ms):>8.0f}  {' '.join(f'{x:.0f}' for x in ms)}")


if __name__ == "__main__":
    main()
