"""How fast the terminal wake lever wakes an idle Codex or Gemini CLI in a tmux pane: from
another agent's ``msg_send`` answer to the first model request that holds the lever's prompt.

One interactive session per harness (a real terminal: tmux, its ``TMUX`` and ``TMUX_PANE``
passed on as a shell in a pane has them), against the scripted model on loopback
(sim/harness), joined at ``wake``; ``--n`` times: wait until it is idle (its end-of-turn hook
marked the pane idle: agents_room/harnesses/turns.py), send it a message from this process,
wait for the request holding the typed prompt, then for the delivery to be ``read`` (the
woken turn calls msg_recv) and the pane idle again.

    .venv/bin/python bench/terminal_wake_latency.py [--n 10] [--harness codex gemini]

The session, its HOME and store live in a scratch folder under /var/tmp (never ~/.agents-room);
the CLIs come from $AGENTS_ROOM_NPM_CACHE; their traffic beyond the model goes to a refusing
proxy on loopback; every process they started (Codex's app-server daemon too) is ended.
"""

from __future__ import annotations

import argparse
import math
import shutil
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

from harnesscli import scratch_home  # noqa: E402
from harnessrig import Rig  # noqa: E402
from test_wake_idle import READY, START_S, WAKE_S, Idle, asked_after  # noqa: E402
from test_wake_terminal import wait_idle  # noqa: E402

from agents_room.harnesses.terminal import PROMPT_HEAD  # noqa: E402
from sim.harness.script import Request, Say, ToolCall  # noqa: E402


def measure(harness: str, n: int) -> list[float]:
    root = scratch_home()
    rig = Rig(root)
    session: dict[str, str] = {}

    def policy(request: Request):
        results = {r.name for r in request.tool_results()}
        if "room_join" in results:
            return Say("joined, waiting")
        if "msg_recv" in results:
            return Say("mail read")
        if not session:
            return ToolCall("room_join", {"autonomy": "wake"})
        return ToolCall("msg_recv", {"session_id": session["id"]})

    try:
        agent, launch = rig.agent(harness, f"bench-{harness}", policy)
        term = rig.terminal(launch, multiplexed=True)
        term.wait_screen(READY[harness], what="the prompt", timeout=START_S)
        term.type("join the room", submitted=lambda: bool(agent.requests))
        joined = agent.wait_for(lambda r: any(t.name == "room_join" for t in r.tool_results()),
                                what="room_join's answer", timeout=START_S)
        session["id"] = joined.result_of("room_join").data()["session_id"]
        idle = Idle(agent, launch, term, session["id"])
        latencies = []
        for i in range(n):
            wait_idle(rig, idle)
            count = len(agent.requests)
            message, sent_at = rig.peer_send(idle.session, f"{harness} wake {i}", "please look")
            shown = asked_after(idle, lambda r, c=count: agent.requests.index(r) >= c and PROMPT_HEAD in r.text(),
                                f"the prompt of wake {i}")
            latencies.append(shown.at - sent_at)
            rig.wait_delivery(idle.session, message, ("read",), timeout=WAKE_S)
        return latencies
    finally:
        left = rig.close()
        shutil.rmtree(root, ignore_errors=True)
        if left:
            raise SystemExit("; ".join(left))


def p99(values: list[float]) -> float:
    """The nearest-rank 99th percentile (of ten: the largest)."""
    ranked = sorted(values)
    return ranked[max(0, math.ceil(0.99 * len(ranked)) - 1)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", type=int, default=10, help="wakes per harness")
    parser.add_argument("--harness", nargs="+", choices=["codex", "gemini"], default=["codex", "gemini"])
    args = parser.parse_args()
    print(f"{'harness':<8} {'n':>3} {'p50 ms':>8} {'p99 ms':>8}  all (ms)")
    for harness in args.harness:
        started = time.monotonic()
        ms = [x * 1000 for x in measure(harness, args.n)]
        print(f"{harness:<8} {len(ms):>3} {statistics.median(ms):>8.0f} {p99(ms):>8.0f}  "
              f"{' '.join(f'{x:.0f}' for x in ms)}  ({time.monotonic() - started:.0f} s)")


if __name__ == "__main__":
    main()
