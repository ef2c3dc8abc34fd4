"""What the dashboard costs and how fast it shows a change, measured in a real browser.

Latency: a store with a few sessions, ``agents-room dashboard`` on it, the page open in
headless Chromium (Debian's, driven by Playwright). ``--changes`` times, after a random
pause, a lease is claimed on a new path; the latency is from the claim's commit (wall clock,
right after it returned) to the page's render that first carried it (``Date.now()`` in the
page, the same machine clock), once the row is in the page.

Throughput: ``sim run SCENARIO --store S`` with and without the dashboard open on S in the
browser, alternating, ``--rounds`` each; ops/s from each run's report.json, and the load.
One run with the page open also saves ``--screenshot`` at mid-run (a busy room).

    .venv/bin/python bench/dashboard.py [--changes 20] [--rounds 3] [--duration 20]
        [--scenario scenarios/shared-room.toml] [--screenshot docs/dashboard.png] [--skip-throughput]

Each run uses its own store in a temporary folder (never ~/.agents-room).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from playwright.sync_api import sync_playwright

from agents_room.store import Store

BIN = Path(sys.executable).parent
CHROMIUM = "/usr/bin/chromium"
ARGS = ["--headless=new", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
        "--disable-component-update", "--disable-sync", "--no-first-run", "--disable-quic"]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_dashboard(db: Path) -> tuple[subprocess.Popen, str]:
    port = free_port()
    env = {**os.environ, "AGENTS_ROOM_DB": str(db)}
    env.pop("AGENTS_ROOM_TOKEN", None)
    proc = subprocess.Popen([str(BIN / "agents-room"), "dashboard", "--http", f"127.0.0.1:{port}"], env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            return proc, f"http://127.0.0.1:{port}/"
        except OSError:
            time.sleep(0.05)
    proc.kill()
    raise SystemExit("the dashboard did not start")


def stop(proc: subprocess.Popen) -> None:
    proc.terminate()
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def cpu_s(match: str | int) -> float:
    """CPU seconds (user + system) of process ``match`` (an int), or of the processes whose
    command line contains ``match`` (a string)."""
    tick, total = os.sysconf("SC_CLK_TCK"), 0.0
    for entry in [str(match)] if isinstance(match, int) else os.listdir("/proc"):
        try:
            if isinstance(match, str) and not (
                    entry.isdigit() and match in Path(f"/proc/{entry}/cmdline").read_text(errors="replace")):
                continue
            fields = Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()
            total += (int(fields[11]) + int(fields[12])) / tick
        except OSError:
            continue
    return total


def load() -> str:
    return "load average " + ", ".join(f"{x:.2f}" for x in os.getloadavg())


def latency(browser: Any, tmp: Path, changes: int) -> dict[str, Any]:
    db = tmp / "latency" / "room.db"
    repo = tmp / "latency" / "repo"
    (repo / ".git").mkdir(parents=True)
    store = Store.open(db)
    sids = [store.room_join(cwd=str(repo), pid=os.getpid(), label=f"agent-{i}", room="team:bench").session_id
            for i in range(6)]
    for i, sid in enumerate(sids):
        store.msg_send(sid, "*", subject=f"hello from agent-{i}")
    proc, url = start_dashboard(db)
    page = browser.new_page()
    try:
        page.goto(url)
        page.wait_for_selector('#status[data-state="live"]')
        rng = random.Random(18)
        out = []
        for i in range(changes):
            time.sleep(rng.uniform(0.1, 0.6))  # a random phase against the server's poll
            path = repo / f"src/change_{i}.py"
            store.lease_claim(sids[i % len(sids)], str(path), ttl_s=60)
            committed_ms = time.time() * 1000
            seq = store.last_seq()
            page.wait_for_selector(f'#leases tr[data-path="{path}"]', timeout=10_000)
            shown_ms = page.evaluate("(seq) => window.agentsRoom.renders.find((r) => r.seq >= seq).at", seq)
            out.append(shown_ms - committed_ms)
    finally:
        page.close()
        stop(proc)
        store.close()
    return {"changes": changes, "median_ms": statistics.median(out), "max_ms": max(out),
            "min_ms": min(out), "all_ms": [round(x, 1) for x in out], "load": load()}


def sim_run(scenario: Path, duration: float, db: Path, out: Path) -> float:
    cmd = [str(BIN / "sim"), "run", str(scenario), "--duration", str(duration), "--no-plots", "--no-live",
           "--store", str(db), "--out", str(out)]
    subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False, timeout=1800)
    return json.loads((out / "report.json").read_text())["run"]["ops_per_s"]


def share(cpu: dict[str, list[float]], walls: list[float]) -> float:
    """The watchers' CPU as a percentage of all the machine's CPU during the watched runs."""
    return round(100 * (sum(cpu["dashboard_s"]) + sum(cpu["chromium_s"])) / (sum(walls) * (os.cpu_count() or 1)), 2)


def throughput(browser: Any, tmp: Path, scenario: Path, duration: float, rounds: int,
               screenshot: Path | None, profile: str) -> dict[str, Any]:
    runs: dict[str, list[float]] = {"without": [], "with": []}
    cpu: dict[str, list[float]] = {"dashboard_s": [], "chromium_s": []}
    walls: list[float] = []
    loads = []
    for n in range(rounds * 2):
        watched = n % 2 == 1  # alternate, so drift in the machine's load hits both alike
        where = tmp / f"round-{n}"
        db = where / "room.db"
        Store.open(db).close()
        proc = page = None
        if watched:
            proc, url = start_dashboard(db)
            page = browser.new_page()
            page.goto(url)
            page.wait_for_selector('#status[data-state="live"]')
        loads.append(os.getloadavg()[0])
        cpu0 = (cpu_s(proc.pid) if proc else 0.0, cpu_s(profile))
        began = time.monotonic()
        try:
            if page and screenshot and not screenshot.exists():
                # Playwright's sync API stays on this thread: the sim runs beside it.
                box: dict[str, float] = {}
                runner = threading.Thread(target=lambda: box.update(ops=sim_run(scenario, duration, db, where / "out")))
                runner.start()
                time.sleep(duration * 0.6 + 8)  # the agents start in seconds; then mid-run
                screenshot.parent.mkdir(parents=True, exist_ok=True)
                page.screenshot(path=str(screenshot), full_page=True)
                runner.join()
                ops = box["ops"]
            else:
                ops = sim_run(scenario, duration, db, where / "out")
        finally:
            if watched:
                walls.append(round(time.monotonic() - began, 1))
                cpu["dashboard_s"].append(round(cpu_s(proc.pid) - cpu0[0], 2))
                cpu["chromium_s"].append(round(cpu_s(profile) - cpu0[1], 2))
            if page:
                page.close()
            if proc:
                stop(proc)
        runs["with" if watched else "without"].append(ops)
        print(f"  round {n}: {'with' if watched else 'without'} the page open: {ops:,.0f} ops/s "
              f"(load {loads[-1]:.1f})", file=sys.stderr, flush=True)
    off, on = statistics.median(runs["without"]), statistics.median(runs["with"])
    return {"scenario": str(scenario), "duration_s": duration, "rounds": rounds, "ops_per_s": runs,
            "median_without": off, "median_with": on, "cpu_while_watched": cpu,
            "watched_run_wall_s": walls, "watchers_share_of_machine_cpu_percent": share(cpu, walls),
            "cost_percent": round(100 * (1 - on / off), 2),
            "load_at_start_of_each_run": loads, "load": load()}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--changes", type=int, default=20, help="changes timed for the latency (default 20)")
    ap.add_argument("--rounds", type=int, default=3, help="sim runs with and without the page each (default 3)")
    ap.add_argument("--duration", type=float, default=20, help="seconds of work per sim run (default 20)")
    ap.add_argument("--scenario", type=Path, default=Path("scenarios/shared-room.toml"))
    ap.add_argument("--screenshot", type=Path, help="save the page at mid-run here (e.g. docs/dashboard.png)")
    ap.add_argument("--skip-throughput", action="store_true")
    args = ap.parse_args()
    if args.screenshot and args.screenshot.exists():
        args.screenshot.unlink()
    result: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="dashboard-bench-") as tmp, sync_playwright() as pw, \
            tempfile.TemporaryDirectory(prefix="chromium-") as profile:
        browser = pw.chromium.launch_persistent_context(profile, executable_path=CHROMIUM, args=ARGS, headless=True,
                                                        viewport={"width": 1440, "height": 1000})
        result["latency"] = latency(browser, Path(tmp), args.changes)
        print(f"latency: median {result['latency']['median_ms']:.0f} ms, max {result['latency']['max_ms']:.0f} ms "
              f"over {args.changes} changes ({result['latency']['load']})", file=sys.stderr, flush=True)
        if not args.skip_throughput:
            result["throughput"] = throughput(browser, Path(tmp), args.scenario.absolute(), args.duration,
                                              args.rounds, args.screenshot, profile)
        browser.close()
    print(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
