"""What agents-room adds to a real turn, per harness: the same scripted turn with and without
agents-room installed.

The turn: a real CLI (Claude Code, Codex, Gemini CLI) in one headless turn against the
scripted model on loopback (sim/harness), whose script is ``--calls`` calls of the harness's
own shell tool (``true N``) and then the end of the turn. A shell call is the same with and
without agents-room; what differs is what the installed hooks do around it (PostToolUse /
AfterTool after each call; SessionStart, UserPromptSubmit / BeforeAgent and Stop / AfterAgent
once a turn) and the room's MCP server beside the CLI. The time of one tool call is the gap
between the model's request that made it and the next one, which brings its result: the
harness running the tool and its hooks. The first ``WARMUP`` gaps of each turn are left out
(the CLI and the server still settling).

Turns alternate between the two setups (with, without, without, with, ...), so both see the
same machine: on a busy machine compare the two columns of one run, not runs of different
times. CPU per turn is the CLI's whole tree (its children waited for: the MCP server, the
hooks); memory is the tree's largest resident set, sampled at each request.

    .venv/bin/python bench/harness_turn.py [--calls 30] [--turns 4] [--harness claude-code codex gemini]
                                           [--node-gc] [--raw gaps.json]

The size of the model's requests is reported beside: the room's tools are declared in each of
them, and a node CLI builds every request anew. ``--node-gc`` counts the CLI's own major
garbage collections inside the measured calls (a tail of tens of milliseconds that is the
CLI's, and grows with what each request carries; Codex is no node program: none to count).

Each turn has its own HOME under /var/tmp and store in a temporary folder (never ~/.agents-room);
the CLIs come from $AGENTS_ROOM_NPM_CACHE. Nothing but the model leaves the machine: the CLIs'
other traffic goes to the model's server as their proxy, which refuses it.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from sim.harness import clis  # noqa: E402
from sim.harness.model import ScriptedModel  # noqa: E402
from sim.harness.script import Request, Say, Shell  # noqa: E402
from sim.run.harnesshome import HOME_ROOT, descendants, tree_rss_kib  # noqa: E402

WARMUP = 2
HARNESSES = ("claude-code", "codex", "gemini")
# --node-gc: preloaded into each CLI's node (NODE_OPTIONS allows --require, not --trace-gc), it
# logs every garbage collection as "<epoch s> <pause ms> <kind>" to a file per process in the
# folder the environment names; kind 4 is a major (mark-sweep-compact) collection.
GC_OBSERVER = """
const { PerformanceObserver, performance } = require('perf_hooks');
const fs = require('fs');
const log = process.env.BENCH_GC_DIR + '/' + process.pid + '.log';
new PerformanceObserver((list) => {
  for (const e of list.getEntries()) {
    const kind = e.detail ? e.detail.kind : e.kind;
    fs.appendFileSync(log, `${(performance.timeOrigin + e.startTime) / 1000} ${e.duration} ${kind}\\n`);
  }
}).observe({ entryTypes: ['gc'] });
"""
MAJOR_GC = 4
# The harness's own processes (node, codex): not the room's server, not a hook or its shell.
NOT_THE_HARNESS = ("python", "sh", "bash", "dash", "agents-room", "true")
TICK_S = 1 / os.sysconf("SC_CLK_TCK")


def harness_cpu_s(pid: int) -> float:
    """CPU (s) spent so far by the harness's own live processes under ``pid``: the part of a
    tool call no hook can take away (spawning the hook, reading its answer, building the next
    request), apart from what the hook and the room's server spend in their own processes."""
    total = 0
    for p in [pid, *descendants(pid)]:
        try:
            comm = Path(f"/proc/{p}/comm").read_text().strip()
            fields = Path(f"/proc/{p}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if not comm.startswith(NOT_THE_HARNESS):
            total += int(fields[11]) + int(fields[12])  # utime, stime: its own, never its children's
    return total * TICK_S


def major_gcs(folder: Path, begin: float, end: float) -> list[float]:
    """The pauses (ms) of the major collections logged in ``folder`` between two times."""
    pauses = []
    for log in folder.glob("*.log"):
        for line in log.read_text().splitlines():
            at, pause, kind = line.split()
            if int(kind) == MAJOR_GC and begin <= float(at) <= end:
                pauses.append(float(pause))
    return pauses


def one_turn(model: ScriptedModel, harness: str, binary: str, root: Path, n: int, calls: int,
             installed: bool, node_gc: bool = False) -> dict[str, Any]:
    """One turn of ``calls`` shell calls; its gaps (ms), CPU s, largest RSS (KiB), the size of
    the model's requests (KiB, median) and, with ``node_gc``, the CLI's major collections."""
    home = Path(tempfile.mkdtemp(prefix="bench-turn-", dir=HOME_ROOT))
    project = root / f"{harness}-{n}"
    subprocess.run(["git", "init", "-q", str(project)], check=True)
    (project / "README.md").write_text("# bench\n")
    rss = [0]
    turn_pid: list[int] = []
    own_cpu: dict[int, float] = {}  # the harness's own CPU at the requests that bound the measured calls

    def policy(request: Request) -> Any:
        made = sum(1 for r in agent.requests if isinstance(r.reply, list))
        if turn_pid:
            rss[0] = max(rss[0], tree_rss_kib(turn_pid[0]))
            if made in (WARMUP, calls):
                own_cpu[made] = harness_cpu_s(turn_pid[0])
        return [Shell(f"true {made}")] if made < calls else Say("done")  # never the same call: no loop detector

    agent = model.agent(f"{harness.replace('-', '')}{n}", policy)
    try:
        launch = clis.prepare(harness, binary, home, project, str(root / f"room-{n}.db"), agent.url,  # type: ignore[arg-type]
                              name=agent.name, scope="user", install=installed)
        proxy = f"http://127.0.0.1:{model.port}"
        extra = {"HTTPS_PROXY": proxy, "HTTP_PROXY": proxy, "https_proxy": proxy, "http_proxy": proxy,
                 "NO_PROXY": "127.0.0.1,localhost", "no_proxy": "127.0.0.1,localhost"}
        gc_dir = root / f"gc-{harness}-{n}"
        if node_gc:
            gc_dir.mkdir()
            (root / "gc-observer.js").write_text(GC_OBSERVER)
            extra |= {"NODE_OPTIONS": f"--require {root / 'gc-observer.js'}", "BENCH_GC_DIR": str(gc_dir)}
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        turn = launch.start_turn("Run `true` in the shell, again and again, until told to stop.", extra_env=extra)
        turn_pid.append(turn.proc.pid)
        try:
            code = turn.wait(timeout=300)
        finally:
            turn.stop()
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        if code != 0 or agent.errors:
            raise RuntimeError(f"{agent.name} ({harness}): exit {code}, {agent.errors}: {turn.output()[-800:]}")
        results = [r for r in agent.requests if r.tool_results()]
        if len(results) != calls:
            raise RuntimeError(f"{agent.name} ({harness}): {len(results)} shell results for {calls} calls")
        at = [r.at for r in agent.requests]
        gaps = [(b - a) * 1000 for a, b in zip(at, at[1:], strict=False)][WARMUP:calls]
        cpu = after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime
        sizes = [len(json.dumps(r.body)) / 1024 for r in agent.requests]
        pauses = major_gcs(gc_dir, at[WARMUP], at[calls]) if node_gc else []
        own = (own_cpu[calls] - own_cpu[WARMUP]) * 1000 / (calls - WARMUP) if len(own_cpu) == 2 else float("nan")
        return {"gaps": gaps, "cpu_s": cpu, "rss_kib": rss[0], "request_kib": float(np.median(sizes)), "own_cpu_ms": own,
                "major_gcs": len(pauses), "major_gc_ms": sum(pauses)}
    finally:
        shutil.rmtree(home, ignore_errors=True)


def measure(harnesses: list[str], calls: int, turns: int, raw: list[dict[str, Any]] | None = None,
            node_gc: bool = False) -> list[dict[str, Any]]:
    rows = []
    root = Path(tempfile.mkdtemp(prefix="bench-harness-turn-"))
    try:
        with ScriptedModel() as model:
            for harness in harnesses:
                located = clis.locate(harness)  # type: ignore[arg-type]
                if located.problem:
                    raise SystemExit(f"{harness}: {located.problem}")
                runs: dict[bool, list[dict[str, Any]]] = {True: [], False: []}
                for k in range(turns):
                    order = (True, False) if k % 2 == 0 else (False, True)  # ABBA: the same machine for both
                    for installed in order:
                        runs[installed].append(one_turn(model, harness, located.path, root, 2 * k + order.index(installed),
                                                        calls, installed, node_gc))
                if raw is not None:
                    raw += [{"harness": harness, "agents_room": i, "turn": n, **r} for i in (False, True)
                            for n, r in enumerate(runs[i])]
                for installed in (False, True):
                    gaps = np.asarray([g for r in runs[installed] for g in r["gaps"]])
                    rows.append({"harness": harness, "agents_room": installed, "turns": turns, "calls": len(gaps),
                                 "p50_ms": float(np.percentile(gaps, 50)), "p99_ms": float(np.percentile(gaps, 99)),
                                 "cpu_s_per_turn": float(np.mean([r["cpu_s"] for r in runs[installed]])),
                                 "rss_mib": max(r["rss_kib"] for r in runs[installed]) / 1024,
                                 "request_kib": float(np.median([r["request_kib"] for r in runs[installed]])),
                                 "own_cpu_ms": float(np.median([r["own_cpu_ms"] for r in runs[installed]])),
                                 "major_gcs": sum(r["major_gcs"] for r in runs[installed]) / turns,
                                 "major_gc_ms": sum(r["major_gc_ms"] for r in runs[installed]) / turns})
    finally:
        shutil.rmtree(root, ignore_errors=True)
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--calls", type=int, default=30, help="shell calls per turn (default 30)")
    parser.add_argument("--turns", type=int, default=4, help="turns per setup and harness (default 4)")
    parser.add_argument("--harness", nargs="+", choices=HARNESSES, default=list(HARNESSES))
    parser.add_argument("--node-gc", action="store_true",
                        help="count each CLI's major garbage collections in the measured calls (node's own pauses)")
    parser.add_argument("--raw", type=Path, help="also write every turn's gaps (ms, in order), CPU and RSS here (JSON)")
    args = parser.parse_args()
    if args.calls <= WARMUP or args.turns < 1:
        parser.error(f"--calls must exceed {WARMUP} and --turns be at least 1")
    load0 = os.getloadavg()
    began = time.monotonic()
    raw: list[dict[str, Any]] | None = [] if args.raw else None
    rows = measure(args.harness, args.calls, args.turns, raw, args.node_gc)
    if args.raw:
        args.raw.write_text(json.dumps(raw, indent=1))
    load1 = os.getloadavg()
    print(f"{args.turns} turns x {args.calls} shell calls per setup and harness ({WARMUP} warm-up calls left out "
          f"of each turn); {os.cpu_count()} cores, load {load0[0]:.1f} at the start and {load1[0]:.1f} at the end; "
          f"{time.monotonic() - began:.0f} s")
    gc_head = f" {'major GCs/turn':>14} {'GC ms/turn':>10}" if args.node_gc else ""
    print(f"{'harness':<12} {'agents-room':<11} {'calls':>5} {'p50 ms':>8} {'p99 ms':>8} {'CPU s/turn':>10} {'RSS MiB':>8} "
          f"{'request KiB':>11} {'CLI CPU ms/call':>15}{gc_head}")
    for r in rows:
        gc = f" {r['major_gcs']:>14.2f} {r['major_gc_ms']:>10.1f}" if args.node_gc else ""
        print(f"{r['harness']:<12} {'installed' if r['agents_room'] else 'without':<11} {r['calls']:>5} "
              f"{r['p50_ms']:>8.1f} {r['p99_ms']:>8.1f} {r['cpu_s_per_turn']:>10.2f} {r['rss_mib']:>8.0f} "
              f"{r['request_kib']:>11.1f} {r['own_cpu_ms']:>15.1f}{gc}")
    print("added per tool call by agents-room (installed minus without, same run):")
    for harness in args.harness:
        on, off = (next(r for r in rows if r["harness"] == harness and r["agents_room"] is i) for i in (True, False))
        print(f"  {harness:<12} p50 {on['p50_ms'] - off['p50_ms']:+.1f} ms, p99 {on['p99_ms'] - off['p99_ms']:+.1f} ms, "
              f"CPU {on['cpu_s_per_turn'] - off['cpu_s_per_turn']:+.2f} s per turn (the room's server's start "
              f"included), memory {on['rss_mib'] - off['rss_mib']:+.0f} MiB; the CLI's own CPU "
              f"{on['own_cpu_ms'] - off['own_cpu_ms']:+.1f} ms per call (its spawn of the hook and its handling)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
