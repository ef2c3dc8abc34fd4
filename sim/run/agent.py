"""One fake agent: its own OS process, ``python -m sim.run.agent <config.json>``.

It joins its repo room (from its working directory) and its shared rooms, says ``ready`` on
stdout, waits for the runner's ``go <start_ns> <end_ns>`` on stdin, then runs the workload
until ``end_ns``, recording every operation in its history file. At the deadline it says
``stopped`` and waits for ``drain``: once every agent has stopped sending, it reads its inbox
until empty (so loss can be decided), says ``drained <json>`` with its CPU figures and exits.

Talking over stdin/stdout keeps the runner free of polling, and a runner that dies closes
stdin, which ends the agent.
"""

from __future__ import annotations

import hashlib
import json
import os
import resource
import signal
import sys
import time
import traceback
from dataclasses import replace
from pathlib import Path
from typing import Any

from ..check.history import Writer, process_id
from ..faults.clock import SharedClock
from ..faults.saboteur import Control, Saboteur
from ..scenario import scenario as scenario_mod
from . import editguard, keeper, workload
from .agentconfig import Config
from .agentproc import children_cpu_s, self_cpu_s, start_driver
from .drivers import SIM_LEVER, Driver, OpError, open_driver
from .workload import Known, Op

# An idle agent's wake lever looks this many times, a retry window apart, with no tool call between.
IDLE_LOOKS = 5


class Agent:
    def __init__(self, cfg: Config) -> None:
        self.cfg = cfg
        self.scn = scenario_mod.load(cfg.scenario)
        self.w = self.scn.workload
        self.rng = workload.agent_rng(self.scn.run.seed, cfg.agent_no, cfg.generation)
        self.join_rng = workload.agent_rng(self.scn.run.seed, cfg.agent_no, cfg.generation + 1_000_000)
        self.generation = cfg.generation
        self.writer = Writer(Path(cfg.history_dir), process_id(cfg.agent_no, cfg.n_agents, cfg.generation), cfg.agent)
        self.files = workload.Files(tuple(cfg.files), cfg.hot, tuple(cfg.all_tags), tuple(cfg.rooms))
        self.next_op = keeper.next_op if cfg.keeper else workload.next_op  # a keeper renews where others let go
        self.known = Known()
        self.session: str | None = None
        self.sent = 0
        self.edits = 0
        # guarded edits: the hook events of one harness, in turn by agent (sim/run/editguard.py)
        self.form = editguard.FORMS[cfg.agent_no % len(editguard.FORMS)]
        self.form_session = editguard.agent_session()
        self.last_error = ""
        # the think time drawn before the next call, put in its invoke record (``think_ms``): a reader
        # tells the think the scenario asked for from the gap the machine made of it
        self.thought_ms: float | None = None
        self.end_ns: int | None = None  # the run's end, once "go" came: no wait of an op crosses it
        self.driver: Driver = self._open_driver()
        # Fault injection: self-stops at moments only the agent sees, and the store clock the
        # nemesis jumps (the agent judges its leases by the same clock as the store).
        self.saboteur = Saboteur(tuple(cfg.files[: cfg.hot]))
        self.clock = SharedClock(cfg.clock_file) if cfg.clock_file else None
        store = getattr(self.driver, "store", None)
        if cfg.saboteur:
            self.saboteur.install(store)
        if self.clock is not None and hasattr(getattr(store, "db", None), "clock"):
            store.db.clock = self.clock  # type: ignore[union-attr]

    # -- plumbing -------------------------------------------------------------------------------

    def _open_driver(self) -> Driver:
        run = self.scn.run
        if self.cfg.harness:  # a real CLI whose model this process plays (never started again)
            from .harnessdriver import HarnessDriver

            return HarnessDriver(agent=self.cfg.agent, harness=self.cfg.harness, cwd=self.cfg.cwd, db=self.cfg.db,
                                 out=str(Path(self.cfg.history_dir).parent), op_timeout_s=run.op_timeout_s,
                                 startup_timeout_s=run.startup_timeout_s)
        return start_driver(lambda: open_driver(
            self.cfg.driver or run.driver, db=self.cfg.db, cwd=self.cfg.cwd, env=self.cfg.env,
            busy_timeout_s=run.busy_timeout_s, op_timeout_s=run.op_timeout_s, http_url=self.cfg.http_url))

    def _retire(self) -> None:
        """After an ``info`` this process id may never invoke again: continue under the next."""
        self.writer.close()
        self.generation += 1
        pid = process_id(self.cfg.agent_no, self.cfg.n_agents, self.generation)
        self.writer = Writer(Path(self.cfg.history_dir), pid, self.cfg.agent)
        self.writer.session = self.session

    def record(self, f: str, args: dict[str, Any], extra: dict[str, Any] | None = None) -> dict[str, Any] | None:
        """Invoke, call, complete: the one path every operation takes. Returns the digest on
        ``ok``; ``None`` on ``fail``/``info`` (the error is in the history)."""
        shown = dict(args)
        if "body" in shown:  # the body's size, not its bytes: histories stay small
            shown["body_bytes"] = len(shown.pop("body"))
        self.last_error = ""
        if self.thought_ms is not None:  # the first call after a think: the think drawn, in its invoke
            extra = {**(extra or {}), "think_ms": self.thought_ms}
            self.thought_ms = None
        poise = getattr(self.driver, "poise", None)
        if poise is not None and f != "edit":  # a harness: invoked when its model makes the call
            poise()
        self.writer.write("invoke", f, shown, extra=extra)
        try:
            result = self._edit(args) if f == "edit" else self._guarded_edit(args) if f == "guarded_edit" else \
                self.driver.call(f, args)
        except OpError as exc:
            self.writer.write(exc.outcome, f, shown, exc.code, extra=extra)
            self.last_error = exc.code
            if exc.outcome == "info":
                self._retire()
                if exc.code == "lost":
                    self._reconnect()
            return None
        self.writer.write("ok", f, result, extra=extra)
        return result

    def _reconnect(self) -> None:
        """The server is gone: a new one, and rejoin by harness key (same session)."""
        try:
            self.driver.close()
        except Exception:  # noqa: BLE001 (the old server is already broken)
            pass
        self.driver = self._open_driver()
        self.join()

    # -- operations --------------------------------------------------------------------------------

    def _join_args(self) -> dict[str, Any]:
        args = {"extra_rooms": list(self.cfg.rooms), "tags": list(self.cfg.tags), "label": self.cfg.agent}
        if not self.cfg.harness:  # a real harness's server names its harness and key itself
            args.update(harness="sim", harness_key=self.cfg.harness_key)
        if self.cfg.wake_lever:
            args["wake_lever"] = SIM_LEVER
        return args

    def join(self) -> bool:
        """Join (or rejoin by harness key), at its repo's level if it names one. Else, in a mix
        with ``rejoin``, a join asks a drawn level too (from its own stream, so the workload's
        draws stay as they were)."""
        args = self._join_args()
        if self.cfg.autonomy:
            args["autonomy"] = self.cfg.autonomy
        elif self.w.weights().get("rejoin", 0) > 0:
            args["autonomy"] = self.join_rng.choice(workload.LEVELS)
        got = self.record("room_join", args)
        if got is None:
            return False
        self.session = got["session_id"]
        self.writer.session = self.session
        return True

    def _edit(self, args: dict[str, Any], content: bytes | None = None) -> dict[str, Any]:
        """Write ``<session> <token> <n>`` (or ``content``) to the file, atomically (readers
        hashing it never see half a write): the ground truth drift checks are judged against."""
        if content is None:
            self.edits += 1
            content = f"{self.session} {args['token']} {self.edits}\n".encode()
        path = args["path"]
        tmp = f"{path}.{self.cfg.agent}.tmp"
        try:
            with open(tmp, "wb") as fh:
                fh.write(content)
            os.replace(tmp, path)
        except OSError as exc:
            raise OpError("io_error", f"{path}: {exc.strerror}", "fail") from None
        return {"path": path, "token": args.get("token"), "hash": hashlib.sha256(content).hexdigest()}

    def _guarded_edit(self, args: dict[str, Any]) -> dict[str, Any]:
        """An edit by a model that never claims, through its harness's edit guard (sim/run/editguard.py)."""
        self.edits += 1
        content = f"{self.session} {self.form} {self.edits}\n".encode()
        return editguard.edit(args["path"], content, (self.cfg.edit_guard or {}).get(self.form, []), self.form,
                              key=self.cfg.harness_key, session=self.form_session, cwd=self.cfg.cwd,
                              timeout_s=self.scn.run.op_timeout_s,
                              write=lambda: self._edit({"path": args["path"]}, content))

    def perform(self, op: Op, extra: dict[str, Any] | None = None) -> None:
        args = dict(op.args)
        if op.f == "msg_send":
            if args.get("to") == workload.SELF:
                args["to"] = self.session
            self.sent += 1
            tag = f"{self.cfg.agent}#{self.sent}"
            args["subject"] = tag
            if self.w.body_bytes:
                args["body"] = workload.body(self.w.body_bytes, tag)
        if op.f == "edit":  # under its own lease, or under a directory lease over it
            args["token"] = self.known.held[args.pop("under", args["path"])].token
            self.saboteur.before_edit(args["path"])  # a paused holder wakes up and edits with this token
        if op.kind == "stale" and op.args["path"] in self.known.held:
            if not self._sleep_past(self.known.held[op.args["path"]].expires_at):
                return
        if op.kind == "paused":  # past the shortest message ttl_s: deliveries overdue, not yet expired by a recv
            ttls = [t for t in self.w.message_ttl_s if t > 0]
            if not self._sleep(min(3.0, min(ttls) + 0.02) if ttls else 0.0):
                return
        if op.f == "stale_session":  # leave, one send under the old id, then a new session
            old = self.session
            if self.record("room_leave", {"session_id": old}, extra) is not None:
                self.known = Known(peers=self.known.peers)
                self.session = None
                self.sent += 1
                tag = f"{self.cfg.agent}#{self.sent}"
                send = {"session_id": old, "to": "*", "subject": tag}
                if self.w.body_bytes:
                    send["body"] = workload.body(self.w.body_bytes, tag)
                self.record("msg_send", send, extra)
                self.join()
            return
        if op.f == "churn":
            if self.record("room_leave", {"session_id": self.session}, extra) is not None:
                self.known = Known(peers=self.known.peers)
                self.session = None
                self.join()
            return
        if op.f == "wake" and op.kind == "idle":  # idle past the retry window, nothing but the lever's looks
            if not self._ends_in_time(IDLE_LOOKS * op.args["retry_s"] * 1.2):
                return
            for _ in range(IDLE_LOOKS):
                time.sleep(op.args["retry_s"] * 1.2)
                self.record("wake", {**args, "session_id": self.session}, extra)
            return
        if op.f == "wake" and op.kind == "turn":  # a look, the turn it wakes (a write), a look that sees it
            look = {**args, "session_id": self.session}
            self.record("wake", look, extra)
            self.record("note_read", {"session_id": self.session, "path": self.cfg.files[0]}, extra)
            self.record("wake", look, extra)
            return
        if op.f == "rejoin":  # by harness key: same session, rooms kept, autonomy raised at most
            got = self.record("room_join", {**self._join_args(), **op.args}, extra)
            if got is not None:
                self.session = self.writer.session = got["session_id"]
            return
        if op.f not in ("edit", "guarded_edit"):
            args["session_id"] = self.session
        got = self.record(op.f, args, extra)
        self._learn(op.f, args, got)
        if op.f == "room_leave_room" and got is not None:
            self.join()  # back into the room: a rejoin by harness key, same session

    def _sleep_past(self, expires_at: float, longest_s: float = 3.0) -> bool:
        """Sleep until just past a lease's expiry (by the store's clock), at most ``longest_s``;
        False, without sleeping, when that would cross the run's end."""
        now = self.clock.now() if self.clock is not None else time.time()
        return self._sleep(max(0.0, min(longest_s, expires_at + 0.02 - now)))

    def _ends_in_time(self, seconds: float) -> bool:
        """Whether a wait of ``seconds`` from now ends before the run does: an op that waits
        (a stale renewal, a paused reader, an idle wake) is not begun when it cannot end in
        the run; its wait would hold the whole run's stop (seconds of every run)."""
        return self.end_ns is None or time.monotonic_ns() + seconds * 1e9 < self.end_ns

    def _sleep(self, seconds: float) -> bool:
        if not self._ends_in_time(seconds):
            return False
        time.sleep(seconds)
        return True

    def _learn(self, f: str, args: dict[str, Any], got: dict[str, Any] | None) -> None:
        self.known = workload.learn(self.known, f, args, got, self.session, self.last_error)

    # -- phases ------------------------------------------------------------------------------------

    def _view(self) -> Known:
        """What the agent knows now: leases whose time is up (by the store's clock) dropped."""
        now = self.clock.now() if self.clock is not None else time.time()
        held = {p: h for p, h in self.known.held.items() if h.expires_at > now}
        ran_out = tuple(p for p in self.known.held if p not in held and p not in self.known.stale)
        self.known = replace(self.known, held=held, now=now, stale=(self.known.stale + ran_out)[-20:])
        return self.known

    def work(self, start_ns: int, end_ns: int) -> None:
        self.end_ns = end_ns
        self.perform(Op("room_who", {}))
        if self.w.mode == "open":
            for intended in workload.schedule(self.scn.open_loop, start_ns, end_ns, self.rng):
                wait = intended - time.monotonic_ns()
                if wait > 0:
                    time.sleep(wait / 1e9)
                if self.session is None and not self.join():
                    continue
                self.perform(self.next_op(self.w, self.files, self._view(), self.rng), {"intended": intended})
            return
        while time.monotonic_ns() < end_ns:
            if self.session is None and not self.join():
                continue
            self.perform(self.next_op(self.w, self.files, self._view(), self.rng))
            pause = workload.think_time(self.w.think, self.rng)
            slept = max(0.0, min(pause, (end_ns - time.monotonic_ns()) / 1e9)) if pause else 0.0
            if slept:
                time.sleep(slept)
            self.thought_ms = round(slept * 1000, 3)

    def drain(self, stall_s: float) -> tuple[bool, str]:
        """Read the inbox until it is empty. Gives up only after ``stall_s`` without progress
        (a read that took messages off the inbox): on a loaded machine a long inbox drains
        slowly, and a slow drain is no reason to leave a run undecided. Each read that made
        progress is said to the runner (``draining <n>``), which waits as long as that goes on.
        Returns whether it emptied the inbox, and, when not, why, in words."""
        extra = {"phase": "drain"}
        self.thought_ms = None  # the drain thinks not: its first gap is the wait for the runner
        moved = time.monotonic()
        taken = failed = 0
        last = "no call answered"
        while time.monotonic() - moved < stall_s:
            if self.session is None and not self.join():
                failed, last = failed + 1, f"room_join failed ({self.last_error or 'no answer'})"
                time.sleep(0.1)
                continue
            got = self.record("msg_recv", {"session_id": self.session, "limit": 1000}, extra)
            if got is None:
                failed, last = failed + 1, f"msg_recv failed ({self.last_error})"
                time.sleep(0.1)
            elif not got["message_ids"]:
                return True, ""
            else:
                taken += len(got["message_ids"])
                moved = time.monotonic()
                print(f"draining {taken}", flush=True)
        return False, (f"nothing moved for {stall_s:g} s: {taken} messages read before, {failed} calls failed, "
                       f"the last: {last}")


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    cfg = Config.load(argv[0])
    os.chdir(cfg.cwd)
    # Past a file size limit (the disk-full fault) a write must fail with EFBIG, not kill us.
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    try:
        agent = Agent(cfg)
    except Exception as exc:  # noqa: BLE001 - e.g. a missing harness CLI: one line to the runner, the traceback to the log
        traceback.print_exc()
        print(f"error {type(exc).__name__}: {' / '.join(str(exc).splitlines())}", flush=True)
        return 1
    control = Control(sys.stdin, agent.saboteur)
    try:
        for _ in range(20):
            if agent.join():
                break
            time.sleep(0.05)
        else:
            print("error join failed", flush=True)
            return 1
        print(f"ready {agent.session}", flush=True)
        words = control.line()
        start_ns, end_ns = int(words[1]), int(words[2])
        calls = getattr(getattr(agent.driver, "store", None), "calls", None)
        if calls is not None:  # the wait for "go" is the runner's, not the agent's think time
            calls.rest(agent.session)
        direct = agent.driver.name == "direct"
        cpu_go = self_cpu_s()
        store_go = agent.driver.cpu_s() if direct else children_cpu_s()
        agent.work(start_ns, end_ns)
        print("stopped", flush=True)
        words = control.line()
        drained, why = agent.drain(float(words[1]))
        store_cpu = agent.driver.cpu_s() if direct else 0.0
        agent.driver.close()
        if not direct:
            store_cpu = agent.driver.cpu_s()
        if agent.driver.name == "harness":  # the CLI's tree is not the store's: the report gives it per harness
            store_cpu = store_go = 0.0
        cpu = self_cpu_s()
        # Figures from "go" on leave out start-up (imports, spawning the server, joining).
        status = {"drained": drained, "why": why, "cpu_s": cpu, "store_cpu_s": store_cpu, "work_cpu_s": cpu - cpu_go,
                  "store_work_cpu_s": store_cpu - store_go, "driver": agent.driver.name, "session": agent.session,
                  "rss_kib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss}
        print("drained " + json.dumps(status), flush=True)
        return 0
    except SystemExit:
        raise
    except BaseException:
        traceback.print_exc()
        print("error " + traceback.format_exc().splitlines()[-1], flush=True)
        return 1
    finally:
        agent.writer.close()
        if agent.driver.name == "harness":  # its CLI ends with it, whatever happened
            agent.driver.close(wait=False)


if __name__ == "__main__":
    code = main()
    sys.stdout.flush()
    sys.stderr.flush()
    # Everything is written and closed: skip the interpreter's teardown, which takes seconds
    # per process once the MCP SDK is loaded, and is pure waiting for the runner.
    os._exit(code)
