"""The edit guard's cost per edit tool call: the installed guard command
(``python -I -S editguard_entry.py --harness H --edits claim``) run as a harness runs it
(``sh -c``, the payload on stdin), RUNS times per case, its CPU (user + system of the whole
process tree, from ``getrusage(RUSAGE_CHILDREN)``) and wall time from spawn to exit. That is
what the guard adds to one edit: a harness runs it before each call of a file-writing tool
and on no other tool (its matcher), and its read-baseline hook after each read.

By default the agent's own ``agents-room serve`` runs beside the guard, as in a harness, and the
guard asks it (agents_room/harnesses/editguard_serve.py); its CPU while it answers is counted
with the guard's. ``--no-serve``: every edit judged in the guard's own process.

Cases, each against its own store (SQLite in a temporary folder, or ``--db`` PostgreSQL):

- ``sh-true``: ``sh -c true``, the spawn every hook pays (the floor, not the guard's);
- ``python-bare``: ``python -I -S -c pass``, the interpreter's own start;
- ``renew``: an edit of a file the session holds already (the common case: each edit renews);
- ``claim``: an edit of a file nobody holds (a new lease);
- ``deny``: an edit of a file another live session holds (the denial and its words);
- ``read``: the read-baseline hook after a read of a file whose bytes are the baseline already
  (a read-only look);
- ``baseline``: the read-baseline hook after the first read of a file (a baseline written).

``--against ENTRY`` runs every guard case with another checkout's entry too (``<case>@against``),
interleaved with this one's, and prints this one's CPU over that one's.

    .venv/bin/python bench/edit_guard.py [--runs 40] [--db postgresql://...] [--no-serve] [--against OTHER/src/agents_room/editguard_entry.py]
    .venv/bin/python bench/edit_guard.py --turns claude-code,codex,gemini [--pairs 3] [--edits-per-turn 20]

Prints one line per case: CPU ms (median), wall ms p50 and p99, and the guard's added CPU and
wall (the case minus ``sh-true``, as a harness pays its own spawn for any hook). ``--turns``:
real turns of each CLI instead, with and without the guard (see :func:`turns`).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ENTRY = str(Path(__file__).resolve().parents[1] / "src" / "agents_room" / "editguard_entry.py")
KEY = "beeeeeef-0000-4000-8000-000000000001"


def run(command: str, payload: str, env: dict[str, str], serve: int | None = None) -> tuple[float, float, str]:
    """(CPU ms of the process tree, wall ms, stdout) of one ``sh -c command``; ``serve``: the
    pid of the agent's server beside it, whose CPU meanwhile (answering the guard) counts too."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    served = cpu_ns(serve)
    start = time.perf_counter()
    done = subprocess.run(["sh", "-c", command], input=payload, capture_output=True, text=True, env=env, check=False)
    wall = (time.perf_counter() - start) * 1000
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = ((after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)) * 1000
    cpu += (cpu_ns(serve) - served) / 1e6
    assert done.returncode == 0, done.stderr
    return cpu, wall, done.stdout


def cpu_ns(pid: int | None) -> int:
    """The CPU time of every thread of ``pid`` so far, in ns (the scheduler's own count:
    ``/proc/<pid>/task/*/schedstat``), 0 for None."""
    if pid is None:
        return 0
    total = 0
    for task in os.listdir(f"/proc/{pid}/task"):
        with open(f"/proc/{pid}/task/{task}/schedstat") as f:
            total += int(f.read().split()[0])
    return total


def start_serve(env: dict[str, str]) -> subprocess.Popen[bytes]:
    """The agent's own ``agents-room serve``, this process's child as a harness's server is the
    harness's, so every guard this process runs finds it among its ancestors and asks it
    (agents_room/harnesses/editguard_serve.py). Returned once it listens."""
    exe = str(Path(sys.executable).with_name("agents-room"))
    proc = subprocess.Popen([exe, "serve"], stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, env=env)
    name = f"@agents-room-{os.getuid()}-edit-guard-{os.getpid()}"
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and proc.poll() is None:
        with open("/proc/net/unix") as f:
            if any(line.split()[-1] == name for line in f if len(line.split()) > 7):
                return proc
        time.sleep(0.1)
    raise SystemExit(f"agents-room serve did not listen for the edit guard ({name})")


def payload(repo: Path, name: str, tool: str = "Edit", event: str = "PreToolUse") -> str:
    return json.dumps({"session_id": KEY, "hook_event_name": event, "cwd": str(repo), "tool_name": tool,
                       "tool_input": {"file_path": str(repo / name), "old_string": "a", "new_string": "b"}})


def guard_cases(guard: str, repo: Path, tag: str, claimed: str, read: str) -> dict[str, Any]:
    """The guard's cases for the command ``guard`` (named with ``tag``): each run ``i`` claims
    its own new file ``<claimed>i.py`` and reads its own new file ``<read>i.py`` (a first
    baseline)."""
    reader = guard.replace("--edits claim", "--read")
    return {
        f"renew{tag}": lambda i: (guard, payload(repo, "f0.py")),
        f"claim{tag}": lambda i: (guard, payload(repo, f"{claimed}{i + 1}.py")),
        f"deny{tag}": lambda i: (guard, payload(repo, "held.py")),
        f"read{tag}": lambda i: (reader, payload(repo, "f0.py", tool="Read", event="PostToolUse")),
        f"baseline{tag}": lambda i: (reader, payload(repo, f"{read}{i}.py", tool="Read", event="PostToolUse")),
    }


def turns(harnesses: list[str], pairs: int, edits_per_turn: int) -> None:
    """Real turns: each harness's CLI against the scripted model, ``edits_per_turn`` writes of
    new files of its own (nobody else's: every edit is allowed and claimed), with the guard
    (``--edits claim``) and without it (``--edits off``), interleaved; the turn's wall time and
    the CPU of its whole process tree (the CLI, its server, its hooks). Printed per harness:
    the medians and the added CPU and wall per edit."""
    import shutil

    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from sim.harness import clis
    from sim.harness.model import ScriptedModel
    from sim.harness.script import Native, Say

    def writes(harness: str, project: Path, tag: str):
        state = {"n": 0}

        def policy(request):
            n = state["n"]
            state["n"] += 1
            if n >= edits_per_turn:
                return Say("done")
            name = f"{tag}{n}.py"
            if harness == "claude-code":
                return [Native("Write", {"file_path": str(project / name), "content": f"n = {n}\n"})]
            if harness == "gemini":
                return [Native("write_file", {"file_path": name, "content": f"n = {n}\n"})]
            return [Native("apply_patch", f"*** Begin Patch\n*** Add File: {name}\n+n = {n}\n*** End Patch\n")]

        return policy

    print(f"# real turns: {edits_per_turn} edits a turn, {pairs} pairs, load average {os.getloadavg()[0]:.1f}")
    print(f"{'harness':<12} {'cpu off':>8} {'cpu on':>8} {'wall off':>9} {'wall on':>9} {'+cpu/edit':>10} "
          f"{'+wall/edit':>11}")
    for harness in harnesses:
        located = clis.locate(harness)  # type: ignore[arg-type]
        if located.problem:
            print(f"{harness:<12} skipped: {located.problem}")
            continue
        got: dict[str, tuple[list[float], list[float]]] = {"off": ([], []), "claim": ([], [])}
        root = Path(tempfile.mkdtemp(prefix="edit-guard-turns-", dir="/var/tmp"))
        try:
            with ScriptedModel() as model:
                for pair in range(pairs):
                    for edits in ("off", "claim"):
                        tag = f"p{pair}{edits}"
                        project = root / tag
                        subprocess.run(["git", "init", "-q", str(project)], check=True)
                        agent = model.agent(tag.replace("claim", "on"), writes(harness, project, "f"))
                        launch = clis.prepare(harness, located.path, root / f"home-{tag}",  # type: ignore[arg-type]
                                              project, str(root / "room.db"), agent.url, name=tag, scope="user",
                                              edits=edits)  # type: ignore[arg-type]
                        if harness == "codex":
                            config = launch.home / ".codex" / "config.toml"
                            config.write_text(config.read_text().replace(f'model = "{clis.CODEX_MODEL}"',
                                                                         'model = "gpt-5.5"', 1))
                        before = resource.getrusage(resource.RUSAGE_CHILDREN)
                        start = time.perf_counter()
                        turn = launch.start_turn("write the files")
                        code = turn.wait(300)
                        wall = (time.perf_counter() - start) * 1000
                        after = resource.getrusage(resource.RUSAGE_CHILDREN)
                        turn.stop()
                        assert code == 0 and not agent.errors, (harness, edits, turn.output()[-400:], agent.errors)
                        made = len(list(project.glob("f*.py")))
                        assert made == edits_per_turn, (harness, edits, made)
                        cpu = ((after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)) * 1000
                        got[edits][0].append(cpu)
                        got[edits][1].append(wall)
        finally:
            shutil.rmtree(root, ignore_errors=True)
        (c0, w0), (c1, w1) = [(statistics.median(got[e][0]), statistics.median(got[e][1])) for e in ("off", "claim")]
        print(f"{harness:<12} {c0:8.0f} {c1:8.0f} {w0:9.0f} {w1:9.0f} {(c1 - c0) / edits_per_turn:10.1f} "
              f"{(w1 - w0) / edits_per_turn:11.1f}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=40)
    parser.add_argument("--db", help="a PostgreSQL URL (default: a SQLite file in a temporary folder)")
    parser.add_argument("--turns", metavar="HARNESSES",
                        help="instead: real turns of these CLIs (comma-separated: claude-code,codex,gemini), "
                        "with and without the guard")
    parser.add_argument("--against", metavar="ENTRY",
                        help="also run each guard case with this editguard_entry.py (another checkout's), "
                        "interleaved, and print the CPU ratio")
    parser.add_argument("--no-serve", action="store_true",
                        help="no agents-room serve beside the guard: every edit judged in the guard's own process "
                        "(a harness whose server is not running)")
    parser.add_argument("--no-server", action="store_true",
                        help="no other process keeps the store open during the runs (each guard's close is "
                        "then the last, and SQLite checkpoints the WAL at it)")
    parser.add_argument("--pairs", type=int, default=3, help="--turns: turn pairs per harness")
    parser.add_argument("--edits-per-turn", type=int, default=20, help="--turns: edits in each turn")
    args = parser.parse_args()
    if args.turns:
        turns(args.turns.split(","), args.pairs, args.edits_per_turn)
        return 0
    from agents_room.store import Store

    with tempfile.TemporaryDirectory(prefix="edit-guard-bench-") as tmp:
        root = Path(tmp)
        repo = root / "repo"
        subprocess.run(["git", "init", "-q", str(repo)], check=True)
        for i in range(args.runs + 1):
            for prefix in ("f", "r", "g", "s"):  # claimed, read first (each; g, s: --against's)
                (repo / f"{prefix}{i}.py").write_text("a = 1\n")
        db = args.db or str(root / "room.db")
        env = {"PATH": os.environ["PATH"], "HOME": str(root), "AGENTS_ROOM_DB": db, "XDG_RUNTIME_DIR": str(root),
               "CLAUDE_CODE_SESSION_ID": KEY}  # this process carries the key: the session is alive
        guard = f"{sys.executable} -I -S {ENTRY} --harness claude-code --edits claim"
        against = args.against and f"{sys.executable} -I -S {args.against} --harness claude-code --edits claim"
        # Another live session holding the file a denied edit asks for; its store stays open
        # through the runs (``--no-server``: closed), as each agent's own server keeps it.
        server = Store.open(db)
        other = server.room_join(cwd=str(repo), pid=None, label="holder").session_id  # liveness unknown: kept
        server.lease_claim(other, str(repo / "held.py"), ttl_s=3600)
        if args.no_server:
            server.close()
        serve = None if args.no_serve else start_serve(env)
        spid = serve.pid if serve else None
        run(guard, payload(repo, "f0.py"), env, spid)  # the session joined at its first edit, as in a real turn
        cases = {
            "sh-true": lambda i: ("true", ""),
            "python-bare": lambda i: (f"{sys.executable} -I -S -c pass", ""),
            **guard_cases(guard, repo, "", "f", "r"),
            **(guard_cases(against, repo, "@against", "g", "s") if against else {}),
        }
        results: dict[str, tuple[list[float], list[float]]] = {name: ([], []) for name in cases}
        for i in range(args.runs):  # interleaved: a load that changes hits every case alike
            for name, make in cases.items():
                command, text = make(i)
                cpu, wall, out = run(command, text, env, spid)
                if name.startswith("deny"):
                    assert "edit denied" in out, out
                elif name not in ("sh-true", "python-bare"):
                    assert out == "", out
                results[name][0].append(cpu)
                results[name][1].append(wall)
        if not args.no_server:
            server.close()
        if serve:
            serve.stdin.close()  # type: ignore[union-attr]
            serve.wait(timeout=30)
    floor_cpu = statistics.median(results["sh-true"][0])
    floor_wall = statistics.median(results["sh-true"][1])
    load = os.getloadavg()[0]
    print(f"# {args.runs} runs each, engine {'postgresql' if args.db else 'sqlite'}, load average {load:.1f}, "
          f"{'no other process' if args.no_server else 'a server process'} holding the store open, "
          f"{'no agents-room serve' if args.no_serve else 'the agent`s agents-room serve beside it (its CPU counted)'}")
    print(f"{'case':<16} {'cpu ms':>7} {'wall p50':>9} {'wall p99':>9} {'+cpu':>7} {'+wall p50':>10}"
          + (f" {'cpu/against':>11}" if args.against else ""))
    for name, (cpus, walls) in results.items():
        cpu, p50 = statistics.median(cpus), statistics.median(walls)
        p99 = statistics.quantiles(walls, n=100)[98] if len(walls) > 1 else walls[0]
        base = results.get(f"{name}@against")
        ratio = f"{cpu / statistics.median(base[0]):7.2f}" if base else ""
        print(f"{name:<16} {cpu:7.1f} {p50:9.1f} {p99:9.1f} {cpu - floor_cpu:7.1f} {p50 - floor_wall:10.1f}{ratio}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
