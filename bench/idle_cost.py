"""What an idle agent costs agents-room: CPU per idle hour of the processes that stay beside
a harness while nothing happens.

- the asyncRewake waiter (Claude Code's second Stop hook, ``hook --wait`` exactly as
  ``agents-room install claude-code`` writes it, through ``/bin/sh -c``), for a session at
  ``wake`` with no mail: it blocks on the store's mail waiter, polling the newest event's seq;
- a stdio ``agents-room serve`` (its MCP loop idle, its quiet-marker keeper polling the seq).

Both are started with this process standing for the harness (their parent; the session
records this pid), left to settle, then their CPU (``/proc/<pid>/stat`` user + system) is
read at the start and the end of ``--seconds`` and scaled to an hour. A store write from
another session every ``--write-every`` seconds (default none) shows what a busy store adds
(each write moves the seq, so each poller looks for real).

    .venv/bin/python bench/idle_cost.py [--seconds 60] [--write-every 0]
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from agents_room.store import Store  # noqa: E402
from sim.bench.hook import installed_command  # noqa: E402
from sim.run.drivers import serve_command  # noqa: E402

TICKS = os.sysconf("SC_CLK_TCK")


def cpu_s(pid: int) -> float:
    """User + system CPU seconds of ``pid`` and of every live process under it (the shell a
    hook runs through forks the interpreter)."""
    with open(f"/proc/{pid}/stat", "rb") as f:
        fields = f.read().rsplit(b")", 1)[1].split()
    total = sum(int(x) for x in fields[11:15]) / TICKS  # utime, stime, cutime, cstime
    try:
        children = open(f"/proc/{pid}/task/{pid}/children").read().split()
    except OSError:
        children = []
    return total + sum(cpu_s(int(c)) for c in children)


def measure(folder: Path, seconds: float, write_every: float) -> dict[str, object]:
    repo = folder / "repo"
    (repo / ".git").mkdir(parents=True)
    home = folder / "home"
    home.mkdir()
    db = folder / "store" / "room.db"
    with Store.open(db) as store:
        me = store.room_join(cwd=str(repo), pid=os.getpid(), label="idle", harness="claude-code",
                             autonomy="wake", wake_lever="stop-hook").session_id
        peer = store.room_join(cwd=str(repo), pid=None, label="peer").session_id
        other = store.room_join(cwd=str(repo), pid=None, label="other").session_id
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(home), "AGENTS_ROOM_DB": str(db)}
    stop = installed_command(repo, "Stop")
    waiter_line = installed_command_wait(repo)
    procs = {
        "waiter": subprocess.Popen(["/bin/sh", "-c", waiter_line], stdin=subprocess.PIPE, stdout=subprocess.DEVNULL,
                                   stderr=subprocess.PIPE, env=env, cwd=repo),
        "serve": subprocess.Popen([*shlex.split(serve_command()), "serve"], stdin=subprocess.PIPE,
                                  stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env, cwd=repo),
    }
    procs["waiter"].stdin.write(json.dumps({"session_id": me, "hook_event_name": "Stop"}).encode())  # type: ignore[union-attr]
    procs["waiter"].stdin.close()  # type: ignore[union-attr]
    try:
        time.sleep(5)  # imports done, first looks made
        for name, p in procs.items():
            if p.poll() is not None:
                raise RuntimeError(f"{name} exited: {p.stderr.read().decode()[:300]}")  # type: ignore[union-attr]
        start = {name: cpu_s(p.pid) for name, p in procs.items()}
        t0 = time.monotonic()
        writes = 0
        with Store.open(db) as store:
            while time.monotonic() - t0 < seconds:
                if write_every:
                    time.sleep(write_every)
                    store.msg_send(peer, other, subject="elsewhere")  # not to the idle session
                    writes += 1
                else:
                    time.sleep(min(1.0, seconds - (time.monotonic() - t0)))
        took = time.monotonic() - t0
        end = {name: cpu_s(p.pid) for name, p in procs.items()}
        alive = {name: p.poll() is None for name, p in procs.items()}
    finally:
        for p in procs.values():
            if p.poll() is None:
                p.kill()
            p.wait(timeout=30)
    return {"seconds": round(took, 1), "writes_elsewhere": writes, "stop_hook": stop, "waiter_command": waiter_line,
            "still_waiting": alive,
            "cpu_s_per_idle_hour": {name: round((end[name] - start[name]) * 3600 / took, 2) for name in procs},
            "load_average": os.getloadavg()}


def installed_command_wait(repo: Path) -> str:
    """The asyncRewake Stop hook's command as installed (the second Stop hook)."""
    from agents_room.harnesses.install import hook_command
    from agents_room.harnesses.registry import plan

    [settings] = [c for c in plan("claude-code", "project", repo, repo, serve_command(), hook_command())
                  if c.path.name == "settings.local.json"]
    [group] = json.loads(settings.after)["hooks"]["Stop"]
    [waiter] = [h for h in group["hooks"] if h.get("asyncRewake")]
    return str(waiter["command"])


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seconds", type=float, default=60.0)
    ap.add_argument("--write-every", type=float, default=0.0, help="a write by other sessions every N s (0: none)")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="idle-cost-") as tmp:
        print(json.dumps(measure(Path(tmp), args.seconds, args.write_every), indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
