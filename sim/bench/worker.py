"""One process of ``sim bench``: ``python -m sim.bench.worker <group.json> <index>``.

It opens its way to the store (``raw``: a bare ``sqlite3`` connection; ``store``: the
``Store``; ``serve`` / ``bare``: the MCP SDK's client to its own ``agents-room serve`` or
bare server child over stdio), joins, and says ``ready <json>``. Then, per operation, the
bench writes ``prep <op>`` (the worker sets up, untimed, and says ``prepped``) and
``go <op> <start_ns> <measure_ns> <end_ns>`` (monotonic clock, the same in every process on
the host): the worker waits for ``start_ns``, runs the operation in a closed loop until
``end_ns`` and says ``done <json>`` with the latency of every call that completed in
``[measure_ns, end_ns]`` (the calls before ``measure_ns`` are the warm-up). ``quit`` ends it.
"""

from __future__ import annotations

import json
import os
import sys
import time
import uuid
from array import array
from collections import Counter
from pathlib import Path
from typing import Any

# The kinds whose worker is bare driver code (sim.bench.raw, sim.bench.raw_pg), not the store.
RAW_KINDS = ("raw", "raw-pg", "locked-pg", "plain-pg")
BODY = "b" * 64  # the simulator's default body size
RECV_LIMIT = 20


class Workload:
    """What each operation of the bench does, the same for every kind of worker. An op is
    an untimed step (or none) and a timed call, each ``(tool, arguments)``."""

    def __init__(self, index: int, cwd: str) -> None:
        self.index = index
        self.cwd = cwd
        self.n = 0
        self.session = ""
        self.peer = ""
        self.drift_path = f"src/w{index}/drift.py"

    def next(self, op: str) -> tuple[tuple[str, dict[str, Any]] | None, tuple[str, dict[str, Any]]]:
        self.n += 1
        n, i = self.n, self.index
        if op == "lease_claim":  # a fresh path each time; 1 s leases, so every claim sweeps some
            return None, ("lease_claim", {"path": f"src/w{i}/c{n}.py", "ttl_s": 1})
        if op == "lease_pair":  # claim a fresh path and release it, both timed: an agent's edit
            return None, ("lease_pair", {"path": f"src/w{i}/p{n}.py", "ttl_s": 600})
        if op == "lease_release":
            path = f"src/w{i}/r{n}.py"
            return ("lease_claim", {"path": path, "ttl_s": 600}), ("lease_release", {"path": path})
        if op == "msg_send":
            return None, ("msg_send", {"to": self.peer, "subject": f"w{i}#{n}", "body": BODY})
        if op == "msg_recv":  # a message to itself first, so every recv returns one
            return (("msg_send", {"to": self.session, "subject": f"w{i}#{n}", "body": BODY}),
                    ("msg_recv", {"limit": RECV_LIMIT}))
        if op == "drift_check":
            return None, ("drift_check", {"path": self.drift_path})
        raise ValueError(f"unknown op {op!r}")


def _code(exc: BaseException) -> str:
    return getattr(exc, "code", None) or type(exc).__name__


def _server_pid() -> int | None:
    """The child this process spawned (the stdio server), from /proc."""
    me = os.getpid()
    for entry in os.scandir("/proc"):
        if entry.name.isdigit():
            try:
                stat = Path(entry.path, "stat").read_text()
            except OSError:
                continue
            if int(stat.rpartition(")")[2].split()[1]) == me:
                return int(entry.name)
    return None


def _cpu_s(pid: int | None) -> float:
    """CPU seconds (user + system) of process ``pid`` so far, from /proc (clock ticks)."""
    if pid is None:
        return 0.0
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


class Meter:
    """What the measured window cost: this process's CPU and its server child's, from the
    first call completed in the window to the last."""

    def __init__(self, server_pid: int | None) -> None:
        self.server_pid = server_pid
        self.lat, self.errors = array("q"), Counter()
        self.cpu0 = self.server0 = None

    def record(self, t0: int, t1: int, measure: int, end: int, error: str | None) -> None:
        if not measure <= t1 <= end:
            return
        if self.cpu0 is None:
            self.cpu0, self.server0 = time.process_time(), _cpu_s(self.server_pid)
        if error is None:
            self.lat.append((t1 - t0) // 1000)
        else:
            self.errors[error] += 1

    def result(self) -> dict[str, Any]:
        cpu = 0.0 if self.cpu0 is None else time.process_time() - self.cpu0
        server = 0.0 if self.server0 is None else _cpu_s(self.server_pid) - self.server0
        return {"lat_us": self.lat.tolist(), "errors": dict(self.errors), "cpu_s": cpu, "server_cpu_s": server}


def _say(word: str, payload: Any = None) -> None:
    sys.stdout.write(word + ("" if payload is None else " " + json.dumps(payload)) + "\n")
    sys.stdout.flush()


def _sleep_until(ns: int) -> None:
    delay = (ns - time.monotonic_ns()) / 1e9
    if delay > 0:
        time.sleep(delay)


# -- raw and store: synchronous ---------------------------------------------------------------------


def _patiently(join: Any, seconds: float = 120.0) -> Any:
    """A worker's join, again while the lock is busy: 64 workers join at once, and on a loaded
    machine (or a server flushing each commit) the last may wait past the busy timeout. The
    measured windows count such errors; the start-up does not."""
    deadline = time.monotonic() + seconds
    while True:
        try:
            return join()
        except Exception as exc:  # noqa: BLE001 (store_busy, SQLite's "locked", PostgreSQL's lock timeout)
            busy = _code(exc) in ("store_busy", "LockNotAvailable") or "database is locked" in str(exc)
            if not busy or time.monotonic() > deadline:
                raise
            time.sleep(0.05)


class SyncActor:
    def __init__(self, cfg: dict[str, Any], index: int) -> None:
        self.kind = cfg["kind"]
        self.work = Workload(index, cfg["cwd"])
        if self.kind in RAW_KINDS:
            if self.kind == "raw":
                from .raw import RawRoom as Raw
            elif self.kind == "plain-pg":
                from .raw_pg import PlainPgRoom as Raw  # type: ignore[assignment]
            elif self.kind == "locked-pg":
                from .raw_pg import LockedPgRoom as Raw  # type: ignore[assignment]
            else:
                from .raw_pg import RawPgRoom as Raw  # type: ignore[assignment]

            self.raw = Raw(cfg["db"])
            self.work.session = _patiently(lambda: self.raw.join(cfg["cwd"], cfg["room"], f"w{index}"))
        else:
            from agents_room.store import Store

            self.store = Store.open(cfg["db"])
            self.work.session = _patiently(lambda: self.store.room_join(
                cwd=cfg["cwd"], pid=os.getpid(), label=f"w{index}").session_id)

    def call(self, tool: str, args: dict[str, Any]) -> Any:
        sid = self.work.session
        if tool == "lease_pair":
            claimed = self.call("lease_claim", args)
            if not (claimed["ok"] if self.kind in RAW_KINDS else claimed.ok):
                raise RuntimeError("lease_pair: the claim was denied")
            return self.call("lease_release", {"path": args["path"]})
        if self.kind in RAW_KINDS:
            if tool == "lease_claim":
                return self.raw.claim(sid, os.path.join(self.work.cwd, args["path"]), args["ttl_s"])
            if tool == "lease_release":
                return self.raw.release(sid, os.path.join(self.work.cwd, args["path"]))
            if tool == "msg_send":
                return self.raw.send(sid, args["to"], args["subject"], args["body"])
            raise ValueError(f"the raw ceiling has no {tool}")
        return getattr(self.store, tool)(sid, **args)

    def prep(self, op: str) -> None:
        if op == "msg_recv":
            while self.call("msg_recv", {"limit": 1000}).messages:
                pass
        elif op == "drift_check":
            path = Path(self.work.cwd, self.work.drift_path)
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text("before\n")
            self.call("note_read", {"path": self.work.drift_path})
            path.write_text("after\n")  # changed since the read: drift_check asks the events
        for step in self.work.next(op):  # one untimed call: first-call costs stay out of the window
            if step:
                self.call(*step)

    def window(self, op: str, start: int, measure: int, end: int) -> dict[str, Any]:
        meter = Meter(None)
        _sleep_until(start)
        while True:
            before, timed = self.work.next(op)
            t0 = time.monotonic_ns()
            if t0 >= end:
                break
            error = None
            try:
                if before:
                    self.call(*before)
                    t0 = time.monotonic_ns()
                self.call(*timed)
            except Exception as exc:  # noqa: BLE001 (counted and reported per code)
                error = _code(exc)
            meter.record(t0, time.monotonic_ns(), measure, end, error)
        return meter.result()

    def close(self) -> None:
        (self.raw if self.kind in RAW_KINDS else self.store).close()


def run_sync(cfg: dict[str, Any], index: int) -> None:
    actor = SyncActor(cfg, index)
    _say("ready", {"session": actor.work.session, "server_pid": None})
    for line in sys.stdin:
        word, *rest = line.split()
        if word == "peer":
            actor.work.peer = rest[0]
        elif word == "prep":
            actor.prep(rest[0])
            _say("prepped")
        elif word == "go":
            _say("done", actor.window(rest[0], *map(int, rest[1:4])))
        elif word == "quit":
            break
    actor.close()


# -- serve and bare: the MCP SDK's client over stdio --------------------------------------------------


async def run_mcp(cfg: dict[str, Any], index: int) -> None:
    import anyio
    from mcp import Client, StdioServerParameters

    env = {**cfg["env"], "AGENTS_ROOM_HARNESS_KEY": str(uuid.uuid4())}
    params = StdioServerParameters(command=cfg["command"][0], args=cfg["command"][1:], env=env, cwd=cfg["cwd"])
    work = Workload(index, cfg["cwd"])
    async with Client(params, mode="legacy") as client:

        async def call(tool: str, args: dict[str, Any]) -> Any:
            if tool == "lease_pair":  # two tool calls, each answer parsed
                if not (await call("lease_claim", args))["ok"]:
                    raise RuntimeError("lease_pair: the claim was denied")
                return await call("lease_release", {"path": args["path"]})
            result = await client.call_tool(tool, {"session_id": work.session, **args})
            if result.is_error:
                text = " ".join(getattr(c, "text", "") for c in result.content)
                raise RuntimeError(text[:200])
            return result.structured_content

        if cfg["kind"] == "serve":
            joined = await client.call_tool("room_join", {"label": f"w{index}"})
            work.session = joined.structured_content["session_id"]
        else:
            from .raw import RawRoom

            raw = RawRoom(cfg["db"])  # the bare server has no join: the session row is made here
            work.session = raw.join(cfg["cwd"], cfg["room"], f"w{index}")
            raw.close()
        server_pid = _server_pid()
        _say("ready", {"session": work.session, "server_pid": server_pid})
        while line := await anyio.to_thread.run_sync(sys.stdin.readline):
            word, *rest = line.split()
            if word == "peer":
                work.peer = rest[0]
            elif word == "prep":
                if rest[0] == "msg_recv":
                    while (await call("msg_recv", {"limit": 1000}))["messages"]:
                        pass
                elif rest[0] == "drift_check":
                    path = Path(work.cwd, work.drift_path)
                    path.parent.mkdir(parents=True, exist_ok=True)
                    path.write_text("before\n")
                    await call("note_read", {"path": work.drift_path})
                    path.write_text("after\n")
                for step in work.next(rest[0]):  # untimed, as in SyncActor.prep
                    if step:
                        await call(*step)
                _say("prepped")
            elif word == "go":
                op, (start, measure, end) = rest[0], map(int, rest[1:4])
                meter = Meter(server_pid)
                await anyio.sleep(max(0.0, (start - time.monotonic_ns()) / 1e9))
                while True:
                    before, timed = work.next(op)
                    t0 = time.monotonic_ns()
                    if t0 >= end:
                        break
                    error = None
                    try:
                        if before:
                            await call(*before)
                            t0 = time.monotonic_ns()
                        await call(*timed)
                    except Exception as exc:  # noqa: BLE001 (counted and reported per code)
                        error = str(exc).partition(":")[0][:40] or type(exc).__name__
                    meter.record(t0, time.monotonic_ns(), measure, end, error)
                _say("done", meter.result())
            elif word == "quit":
                break


def main() -> int:
    cfg = json.loads(Path(sys.argv[1]).read_text())
    index = int(sys.argv[2])
    if cfg["kind"] in ("store", "store-pg", *RAW_KINDS):
        run_sync(cfg, index)
    else:
        import anyio

        anyio.run(run_mcp, cfg, index)
    return 0


if __name__ == "__main__":
    sys.exit(main())
