"""``sim bench``: how fast the store is next to bare SQLite, and ``agents-room serve`` next
to a bare MCP server, in one run, side by side.

Each *group* is one kind of worker at one process count, on a fresh store file:

| kind | what a worker is | operations |
|---|---|---|
| ``raw`` | bare ``sqlite3``, the store's transactions by hand (``sim.bench.raw``) | lease_claim, msg_send |
| ``store`` | ``agents_room.store.Store`` in the worker | the five of ``STORE_OPS`` |
| ``serve`` | the SDK's client to its own ``agents-room serve`` over stdio | all of ``OPS`` |
| ``bare`` | the SDK's client to its own bare MCP server (``sim.bench.bare``) | lease_claim, lease_pair |

``lease_pair`` is one claim of a fresh path and its release, both timed (two tool calls, each
answer parsed by the client): the unit of an agent's edit, and what issue 19's serve ÷ bare
target counts.

Workers are spawned interpreters (never forks holding a connection). For each operation
every worker of the group starts at one instant (a start barrier on the monotonic clock),
warms up, and is measured over a fixed window; ``sim.bench.report`` makes the table, the
ratios, ``bench.json`` and the plot. Ratios are the result: on a shared machine the
absolute figures move from run to run, the ratios of one run much less.
"""

from __future__ import annotations

import argparse
import json
import os
import queue
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from agents_room.parser import not_empty

from ..run.drivers import serve_command
from ..scenario.arguments import new_folder, number
from . import engines
from .cells import Cell, combine

OPS = ("lease_claim", "lease_release", "lease_pair", "msg_send", "msg_recv", "drift_check")
STORE_OPS = ("lease_claim", "lease_release", "msg_send", "msg_recv", "drift_check")
KIND_OPS = {"raw": ("lease_claim", "msg_send"), "store": STORE_OPS, "bare": ("lease_claim", "lease_pair"),
            "serve": OPS, **engines.KIND_OPS}
_FOREIGN_ENV = ("AGENTS_ROOM_HARNESS_KEY", "CLAUDE_CODE_SESSION_ID", "CLAUDECODE", "CLAUDE_PROJECT_DIR",
                "CODEX_THREAD_ID", "AGENTS_ROOM_TOKEN", "AGENTS_ROOM_WAKE_LEVER")
BARRIER_S = 0.1  # from "go" to the common start (plus 4 ms per worker): every worker has read its line by then


class BenchError(RuntimeError):
    """A group could not be measured (a worker failed to start or died)."""


@dataclass(frozen=True)
class Options:
    out: Path
    procs: tuple[int, ...] = (1, 4, 16, 64)
    mcp_procs: tuple[int, ...] = (4,)
    seconds: float = 2.0  # measured, per window
    rounds: int = 3  # windows per cell, alternating with the other side of the pair
    warmup: float = 0.5
    ops: tuple[str, ...] = OPS
    hook_runs: int = 50
    startup_timeout_s: float = 600.0
    store: str | None = None  # a postgresql:// URL: the engines side by side instead (sim.bench.engines)


def vm_rss_kib(pid: int) -> int | None:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    except OSError:
        return None
    return None


class Group:
    """The worker processes of one kind at one process count, on their own store."""

    def __init__(self, kind: str, procs: int, folder: Path, opts: Options) -> None:
        from agents_room.store import Store

        self.kind, self.procs, self.opts = kind, procs, opts
        self.folder = folder
        repo = folder / "repo"
        (repo / ".git").mkdir(parents=True)
        (folder / "logs").mkdir()
        # A file, or (PostgreSQL kinds) a schema of its own in the --store database.
        db, self.schema = engines.new_schema(opts.store or "", kind, procs) or (folder / "store" / "room.db", None)
        Store.open(db).close()  # the schema exists before any worker opens the store
        env = {"AGENTS_ROOM_DB": str(db)}
        command = ([serve_command(), "serve"] if kind == "serve" else
                   [sys.executable, "-m", "sim.bench.bare"] if kind == "bare" else [])
        # The server children get the SDK's safe defaults (HOME, PATH, ...) plus these (the
        # admission switch too, so an A/B of fair admission reaches the servers).
        server_env = {**env, **{k: os.environ[k] for k in ("PYTHONPATH", "AGENTS_ROOM_FAIR_ADMISSION") if k in os.environ}}
        cfg = {"kind": kind, "db": str(db), "cwd": str(repo), "room": "repo:repo", "command": command,
               "env": server_env}
        (folder / "group.json").write_text(json.dumps(cfg, indent=1))
        self.lines: queue.Queue[tuple[int, str]] = queue.Queue()
        base = {k: v for k, v in os.environ.items() if k not in _FOREIGN_ENV}
        self.workers: list[subprocess.Popen[str]] = []
        for i in range(procs):
            with open(folder / "logs" / f"w{i:02d}.log", "wb") as log:
                p = subprocess.Popen(
                    [sys.executable, "-m", "sim.bench.worker", str(folder / "group.json"), str(i)],
                    stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=log, cwd=repo,
                    env={**base, **env, "PYTHONUNBUFFERED": "1"}, text=True, bufsize=1,
                )
            self.workers.append(p)
            threading.Thread(target=self._read, args=(i, p), daemon=True).start()
        self.server_pids: list[int] = []

    def _read(self, i: int, p: subprocess.Popen[str]) -> None:
        assert p.stdout is not None
        for line in p.stdout:
            self.lines.put((i, line.rstrip("\n")))
        self.lines.put((i, "exited"))

    def expect(self, word: str, timeout_s: float) -> list[Any]:
        """Wait until every worker said ``word``; their payloads, by worker."""
        got: dict[int, Any] = {}
        deadline = time.monotonic() + timeout_s
        while len(got) < self.procs:
            try:
                i, line = self.lines.get(timeout=max(0.01, deadline - time.monotonic()))
            except queue.Empty:
                raise BenchError(f"{self.kind} x{self.procs}: timed out waiting for {word!r} "
                                 f"({len(got)} of {self.procs}; see {self.folder}/logs)") from None
            head, _, rest = line.partition(" ")
            if head == "exited":
                raise BenchError(f"{self.kind} x{self.procs}: worker {i} exited while waiting for {word!r} "
                                 f"(see {self.folder}/logs/w{i:02d}.log)")
            if head == word:
                got[i] = json.loads(rest) if rest else None
        return [got[i] for i in range(self.procs)]

    def tell(self, text: str, who: int | None = None) -> None:
        for i, p in enumerate(self.workers):
            if who is None or who == i:
                assert p.stdin is not None
                p.stdin.write(text + "\n")
                p.stdin.flush()

    def start(self) -> None:
        ready = self.expect("ready", self.opts.startup_timeout_s)
        self.server_pids = [r["server_pid"] for r in ready if r["server_pid"]]
        sessions = [r["session"] for r in ready]
        for i in range(self.procs):
            self.tell(f"peer {sessions[(i + 1) % self.procs]}", i)

    def prep(self, op: str) -> None:
        self.tell(f"prep {op}")
        self.expect("prepped", 120)

    def window(self, op: str) -> tuple[list[dict[str, Any]], list[int]]:
        """One measured window of ``op`` on every worker at once: what each worker timed,
        and the RSS of each server process at the end."""
        barrier_s = BARRIER_S + 0.004 * self.procs
        start = time.monotonic_ns() + int(barrier_s * 1e9)
        measure = start + int(self.opts.warmup * 1e9)
        end = measure + int(self.opts.seconds * 1e9)
        self.tell(f"go {op} {start} {measure} {end}")
        done = self.expect("done", barrier_s + self.opts.warmup + self.opts.seconds + 60)
        return done, [r for r in (vm_rss_kib(pid) for pid in self.server_pids) if r]

    def close(self) -> None:
        for p in self.workers:
            if p.poll() is None:
                try:
                    self.tell("quit", self.workers.index(p))
                except (BrokenPipeError, OSError):
                    pass
        deadline = time.monotonic() + 30
        for p in self.workers:
            try:
                p.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
        engines.drop_schema(self.opts.store or "", self.schema)


def plan(opts: Options) -> list[list[tuple[str, int]]]:
    """Pairs of groups that run side by side: raw and store at each process count, bare and
    serve at each agent count. With ``--store``: the engines at each process count instead."""
    if opts.store:
        return engines.plan(opts.procs, opts.ops)
    pairs = []
    for kinds, counts in ((("raw", "store"), opts.procs), (("bare", "serve"), opts.mcp_procs)):
        for n in counts:
            pair = [(kind, n) for kind in kinds if set(KIND_OPS[kind]) & set(opts.ops)]
            if pair:
                pairs.append(pair)
    return pairs


def run_pair(pair: list[tuple[str, int]], opts: Options, say: Any) -> list[Cell]:
    """Both groups of a pair alive at once; per operation, their windows alternate round by
    round (A B, B A, A B, ...), so a change in the machine's load touches both sides alike."""
    t0 = time.monotonic()
    groups: list[Group] = []
    try:
        for kind, n in pair:
            groups.append(Group(kind, n, opts.out / "work" / f"{kind}-{n}", opts))
        for g in groups:
            g.start()
        say(f"{' + '.join(f'{g.kind} x{g.procs}' for g in groups)}: ready in {time.monotonic() - t0:.1f} s")
        cells = []
        for op in [op for op in OPS if op in opts.ops]:
            running = [g for g in groups if op in KIND_OPS[g.kind]]
            for g in running:
                g.prep(op)
            rounds: dict[str, list[tuple[list[dict[str, Any]], list[int]]]] = {g.kind: [] for g in running}
            for r in range(opts.rounds):
                for g in running if r % 2 == 0 else running[::-1]:
                    rounds[g.kind].append(g.window(op))
            for g in running:
                cell = combine(g.kind, op, g.procs, opts.seconds, rounds[g.kind])
                cells.append(cell)
                say(f"  {g.kind:<10}{op:<14}{cell.per_s:>10,.0f}/s  p99 {cell.p99_ms:8.2f} ms  jain {cell.jain:.3f}"
                    + (f"  errors {cell.errors}" if cell.errors else ""))
        return cells
    finally:
        for g in groups:
            g.close()


def run_groups(opts: Options, say: Any = print) -> list[Cell]:
    return [cell for pair in plan(opts) for cell in run_pair(pair, opts, say)]


def run_bench(opts: Options, console: Any) -> int:
    from . import hook, report, upgrade

    opts.out.mkdir(parents=True, exist_ok=False)
    started = time.time()
    load_before = os.getloadavg()
    try:
        cells = run_groups(opts, say=console.print)
    except BenchError as exc:
        console.print(f"[red]sim bench: {exc}[/red]")
        return 2
    timing = hook.measure(opts.out / "work" / "hook", opts.hook_runs) if opts.hook_runs else None
    upgraded = upgrade.check(opts.out / "work" / "upgrade")
    data = report.build(opts, cells, timing, started=started, load=(load_before, os.getloadavg()),
                        who=_who(opts.out / "work" / "who"), upgrade=upgraded)
    data["engines"] = engines.table(data["cells"]) if opts.store else None
    report.save(opts.out, data)
    wide = console if console.is_terminal else type(console)(width=170)
    report.print_tables(data, wide)
    engines.print_table(wide, data)
    console.print(f"wrote {opts.out / 'bench.json'} and {opts.out / 'bench.png'}")
    return 0


def _who(folder: Path) -> dict[str, Any] | None:
    """room_who's p99 with many sessions, from the pg-hosts stream's bench when this tree has
    it (``sim.bench.who.measure(folder)``: ``{"sessions": n, "p99_ms": x}``); else None, and
    the target is printed as not measured."""
    try:
        from . import who  # type: ignore[attr-defined]
    except ImportError:
        return None
    return who.measure(folder)


# -- the command line ------------------------------------------------------------------------------


def _counts(flag: str) -> Any:
    def parse(text: str) -> tuple[int, ...]:
        try:
            values = tuple(int(x) for x in text.split(",") if x.strip())
        except ValueError:
            raise argparse.ArgumentTypeError(f"{flag}: {text!r} is not a comma-separated list of whole numbers") from None
        if not values or any(not 1 <= v <= 512 for v in values):
            raise argparse.ArgumentTypeError(f"{flag}: each count must be 1..512, got {text!r}")
        return values
    return parse


def _ops(text: str) -> tuple[str, ...]:
    ops = tuple(x.strip() for x in text.split(",") if x.strip())
    unknown = [op for op in ops if op not in OPS]
    if unknown or not ops:
        raise argparse.ArgumentTypeError(f"--ops: unknown operation {unknown[0] if unknown else text!r}; "
                                         f"one or more of {','.join(OPS)}")
    return ops


def _seconds(flag: str, lo: float) -> Any:
    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{flag}: {text!r} is not a number of seconds") from None
        if not lo <= value <= 3600:
            raise argparse.ArgumentTypeError(f"{flag}: must be {lo:g}..3600 seconds, got {text}")
        return value
    return parse


def add_parser(sub: Any) -> None:
    p = sub.add_parser("bench", help="the store against bare SQLite, the server against a bare MCP server",
                       description="Measure, side by side in one run: bare sqlite3 (the raw ceiling), the store, "
                       "`agents-room serve` over stdio and a bare MCP server; print the table with the ratios, "
                       "write bench.json and bench.png. See docs/performance.md.")
    p.add_argument("--out", type=new_folder, help="output folder (default reports/bench-<UTC time>/); must not exist")
    p.add_argument("--procs", type=_counts("--procs"), default=(1, 4, 16, 64), metavar="N,N,...",
                   help="process counts for raw and store (default 1,4,16,64)")
    p.add_argument("--mcp-procs", type=_counts("--mcp-procs"), default=(4,), metavar="N,N,...",
                   help="agent counts for serve and bare, each agent a client process and its server (default 4)")
    p.add_argument("--seconds", type=_seconds("--seconds", 0.2), default=2.0, metavar="S",
                   help="measured seconds per window (default 2)")
    p.add_argument("--rounds", type=number(1, 100, whole=True), default=3, metavar="N",
                   help="windows per cell, alternating with the other side of the ratio (default 3)")
    p.add_argument("--warmup", type=_seconds("--warmup", 0.0), default=0.5, metavar="S",
                   help="warm-up before each window (default 0.5)")
    p.add_argument("--ops", type=_ops, default=OPS, metavar="OP,OP,...", help=f"operations (default {','.join(OPS)})")
    p.add_argument("--hook-runs", type=number(0, 10_000, whole=True), default=50, metavar="N", help="runs of `agents-room hook` (0: skip)")
    p.add_argument("--store", type=not_empty, metavar="URL", help="postgresql://...: the store on SQLite and on PostgreSQL and "
                   "PostgreSQL's raw ceiling at each of --procs instead (see sim/bench/engines.py)")


def command(args: Any, console: Any) -> int:
    import datetime as dt

    out = args.out or Path("reports") / f"bench-{dt.datetime.now(dt.timezone.utc):%Y%m%dT%H%M%SZ}"
    if out.exists():
        print(f"sim: {out} already exists; pick another --out", file=sys.stderr)
        return 2
    if args.hook_runs < 0 or not 1 <= args.rounds <= 100:
        print("sim: --hook-runs must be 0 or more and --rounds 1..100", file=sys.stderr)
        return 2
    if refused := engines.refuse(args.store):
        print(f"sim: refusing --store: {refused}", file=sys.stderr)
        return 2
    opts = Options(out.absolute(), args.procs, args.mcp_procs, args.seconds, args.rounds, args.warmup, args.ops,
                   args.hook_runs, store=args.store)
    return run_bench(opts, console)
