"""The ``harness`` driver: an agent's tool calls made by a real harness CLI (Claude Code,
Codex, Gemini CLI) whose model is sim.harness's scripted model, played by the workload.

The CLI runs one long headless turn against this agent's own scripted model. The model's
policy (on the model server's worker thread) holds each main request until the workload has
chosen its next operation (:meth:`HarnessDriver.call`), answers with that tool call, and
takes the tool's answer from the harness's next request. So the history is the model's: the
agent writes ``invoke`` once the harness is waiting for the model (:meth:`poise`), and the
completion when the answer came back through the harness (our tools answer JSON; an error
is text starting with its stable code). At :meth:`close` the model ends the turn (a Stop
hook that blocks it gets the same end again) and the CLI's whole process tree is ended.

Beside the calls it records what the run's report needs (``<out>/harness/``): the first
request in which the model was shown each message (by its subject ``aNN#k``, whether in a
tool's answer or in text a hook added), each hook run of the CLI (the installed hook command
runs through a counting wrapper: one line per run), and the CLI tree's CPU and memory.
"""

from __future__ import annotations

import json
import re
import resource
import shutil
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from ..harness import clis
from ..harness.model import ScriptedModel
from ..harness.process import Turn
from ..harness.script import Request, Say, ToolCall, ToolResult
from .drivers import OpError, digest
from .harnesshome import HOME_ROOT, count_hooks, no_loop_detection, patient_codex, tree_cpu_s, tree_rss_kib

PROMPT = "Work in this repository with the room's tools, one call at a time, until you are told to stop."
# A message's subject in the workload (Agent.perform): the agent's name and its send count.
SUBJECT = re.compile(r"\ba\d{2,}#\d+\b")
# The tools whose answers hold messages: a subject seen elsewhere came in text a hook added.
READS = frozenset({"msg_recv", "room_history"})
# The stable codes our tools' errors start with (README, Tools).
CODES = ("unknown_session", "invalid_argument", "lease_not_held", "not_recipient", "store_busy", "store_error")
_ERROR = re.compile(r"^(?:<[^>]*>\s*)*(?:Error:\s*)?(" + "|".join(CODES) + r"):\s*(.*)", re.S)
# How often the CLI tree's memory is sampled (a /proc walk; the largest is reported).
SAMPLE_EVERY_S = 1.0
# How long a CLI may take to end its turn once told (the runner waits 30 s for the agent).
EXIT_WAIT_S = 20.0
# The end of the turn, answered to every request once the agent is done.
DONE = Say("Done: the run is over.")


class HarnessSilent(RuntimeError):
    """The harness did not ask the model for its next move in time, or exited: names the agent
    and what it waited for."""


class HarnessDriver:
    name = "harness"

    def __init__(self, *, agent: str, harness: str, cwd: str, db: str, out: str, op_timeout_s: float,
                 startup_timeout_s: float) -> None:
        located = clis.locate(harness)  # type: ignore[arg-type]
        if located.problem:
            raise HarnessSilent(f"{agent} ({harness}): {located.problem}")
        self.agent, self.harness = agent, harness
        self.op_timeout_s, self.startup_timeout_s = op_timeout_s, startup_timeout_s
        self.folder = Path(out) / "harness"
        self.folder.mkdir(exist_ok=True)
        self._cond = threading.Condition()
        self._waiting = False  # a main request is held, waiting for the next move
        self._move: ToolCall | Say | None = None
        self._outstanding: str | None = None  # the tool whose answer the next request brings
        self._result: ToolResult | None = None
        self._answered = False
        self._closing = False
        self.calls = self.requests = 0
        self._seen: set[str] = set()
        self._seen_file = open(self.folder / f"{agent}.seen.jsonl", "a")  # noqa: SIM115 (closed in close)
        self._rss_kib = 0
        self._sampled = 0.0
        self.home = Path(tempfile.mkdtemp(prefix=f"sim-{agent}-", dir=HOME_ROOT))
        self.model = ScriptedModel()
        self.scripted = self.model.agent(agent, self._policy)
        self.turn: Turn | None = None
        try:
            launch = clis.prepare(harness, located.path, self.home, Path(cwd), db, self.scripted.url,  # type: ignore[arg-type]
                                  name=agent, scope="user")
            count_hooks(self.home, self.folder / f"{agent}.hooks")
            # Nothing but the model leaves the machine: the CLI's other traffic (telemetry, update
            # checks) goes to the model's server as its proxy, which refuses it.
            proxy = f"http://127.0.0.1:{self.model.port}"
            env = {**launch.env, "HTTPS_PROXY": proxy, "HTTP_PROXY": proxy, "https_proxy": proxy, "http_proxy": proxy,
                   "NO_PROXY": "127.0.0.1,localhost", "no_proxy": "127.0.0.1,localhost",
                   # Six CLIs starting at once on a busy machine start their servers slowly: the
                   # room's server gets the run's start-up bound, not the CLI's default.
                   "MCP_TIMEOUT": str(int(startup_timeout_s * 1000))}
            if harness == "codex":
                patient_codex(self.home, startup_timeout_s)
            if harness == "gemini":
                no_loop_detection(self.home)
            self._children0 = _children_cpu_s()  # the installer's CPU is not the CLI's
            self.turn = Turn.start(agent, launch.turn_argv(PROMPT), cwd=Path(cwd), env=env, logs=self.folder / "cli")
        except BaseException:
            self.model.close()
            shutil.rmtree(self.home, ignore_errors=True)
            raise
        # What the runner ends if this process is killed first: the CLI's session, its HOME.
        (self.folder / f"{agent}.pid").write_text(json.dumps({"pid": self.turn.proc.pid, "home": str(self.home)}))
        self._started = time.monotonic()

    # -- the model's side (the model server's worker thread) ------------------------------------

    def _policy(self, request: Request) -> Any:
        self._note(request)
        with self._cond:
            self.requests += 1
            if self._outstanding is not None:
                found = [r for r in request.tool_results() if r.name == self._outstanding]
                self._result = found[-1] if found else None
                self._answered, self._outstanding = True, None
            self._waiting = True
            self._cond.notify_all()
            while self._move is None and not self._closing:
                self._cond.wait(0.5)
            move, self._move, self._waiting = (self._move or DONE), None, False
            if isinstance(move, ToolCall):
                self._outstanding = move.tool
            return move if isinstance(move, Say) else [move]

    def _note(self, request: Request) -> None:
        """The subjects the model is shown here for the first time, and where: in the answer of
        a read (msg_recv, room_history) or in text a hook added (some harnesses add it to the
        answer of the tool call it followed)."""
        reads = " ".join(r.text for r in request.tool_results() if r.name in READS)
        rows = []
        for tag in set(SUBJECT.findall(request.text())) - self._seen:
            self._seen.add(tag)
            rows.append({"tag": tag, "wall": request.at, "via": "read" if tag in reads else "hook"})
        if rows:
            self._seen_file.write("".join(json.dumps(r) + "\n" for r in rows))
            self._seen_file.flush()
        if time.monotonic() - self._sampled >= SAMPLE_EVERY_S and self.turn is not None:
            self._sampled = time.monotonic()
            self._rss_kib = max(self._rss_kib, tree_rss_kib(self.turn.proc.pid))

    # -- the agent's side --------------------------------------------------------------------------

    def poise(self) -> None:
        """Until the harness waits for the model's next move (the moment a call is invoked).
        HarnessSilent when it does not ask within the bound (its first request: the start-up
        bound), exits, or the model's script failed."""
        first = self.requests == 0
        bound = self.startup_timeout_s if first else self.op_timeout_s
        what = "its first model request" if first else "its next model request"
        deadline = time.monotonic() + bound
        with self._cond:
            while not self._waiting:
                self._check(what, bound, deadline)
                self._cond.wait(0.25)

    def _check(self, what: str, bound: float, deadline: float) -> None:
        assert self.turn is not None
        why = None
        if self.scripted.errors:
            why = f"the model's script failed: {'; '.join(self.scripted.errors)}"
        elif (exited := self.turn.exited()) is not None:
            why = exited
        elif time.monotonic() >= deadline:
            why = f"nothing came within {bound:g} s ({self.requests} model requests so far; the CLI still runs)"
        if why:  # one line: the runner reads an agent's error as a line
            raise HarnessSilent(f"{self.agent} ({self.harness}): waited for {what}: {' / '.join(why.splitlines())}")

    def call(self, f: str, args: dict[str, Any]) -> dict[str, Any]:
        self.poise()
        with self._cond:
            self._move, self._result, self._answered = ToolCall(f, args), None, False
            self.calls += 1
            self._cond.notify_all()
            deadline = time.monotonic() + self.op_timeout_s
            while not self._answered:
                try:
                    self._check(f"the answer to {f}", self.op_timeout_s, deadline)
                except HarnessSilent as exc:  # it may have run: the outcome is unknown
                    raise OpError("timeout", str(exc), "info") from None
                self._cond.wait(0.25)
            result = self._result
        if result is None:
            raise OpError("unexpected", f"{self.agent}: the model's next request held no answer to {f}", "info")
        return digest(f, args, answer_of(f, result.text))

    def cpu_s(self) -> float:
        return tree_cpu_s(self.turn.proc.pid) if self.turn is not None else 0.0

    def figures(self) -> dict[str, Any]:
        """This agent's harness figures for the report (``<out>/harness/aNN.json``)."""
        return {"agent": self.agent, "harness": self.harness, "tool_calls": self.calls,
                "model_requests": self.requests, "side_requests": len(self.scripted.side_requests),
                "cli_cpu_s": self.cpu_s(), "cli_rss_max_kib": self._rss_kib,
                "wall_s": time.monotonic() - self._started, "errors": list(self.scripted.errors)}

    def close(self, wait: bool = True) -> None:
        """End the turn (the model says it is done, to the Stop hook's continuation too), wait
        for the CLI to exit (not after a failure: ``wait=False``), then end whatever of its tree
        is left and remove its HOME."""
        if self.turn is None:
            return
        figures = self.figures()
        with self._cond:
            self._closing = True
            self._cond.notify_all()
        if wait:
            try:
                self.turn.wait(timeout=min(self.op_timeout_s, EXIT_WAIT_S))
                # the whole tree, now waited for: the CLI and what it waited for (server, hooks)
                figures["cli_cpu_s"] = max(figures["cli_cpu_s"], _children_cpu_s() - self._children0)
            except TimeoutError as exc:
                figures["errors"].append(str(exc))
        self.turn.stop()
        self.model.close()
        self._seen_file.close()
        (self.folder / f"{self.agent}.json").write_text(json.dumps(figures))
        shutil.rmtree(self.home, ignore_errors=True)
        self.turn = None


def _children_cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def answer_of(f: str, text: str) -> Any:
    """A tool's answer as the harness showed it to the model: its JSON, or OpError for an error
    (its text starts with a stable code, possibly behind the harness's own wrapping)."""
    body = text.strip()
    found = _ERROR.match(body)
    if found:
        raise OpError(found.group(1), found.group(2).strip()[:300])
    data = ToolResult(f, "", body).data()
    if isinstance(data, list) and data and all(isinstance(c, dict) and "text" in c for c in data):
        return answer_of(f, "".join(c["text"] for c in data))  # MCP content blocks, passed on whole
    if isinstance(data, dict) and isinstance(data.get("content"), list) and "structuredContent" in data:
        return data["structuredContent"]
    if data is None:
        raise OpError("unexpected", f"{f}: the harness answered {body[:200]!r}", "info")
    if isinstance(data, dict) and set(data) == {"result"}:  # a non-object return, wrapped
        return data["result"]
    return data
