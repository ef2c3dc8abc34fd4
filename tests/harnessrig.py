"""What the wake-lever tests share: a scripted model, real harness CLIs set up in one scratch
HOME against one store, a person or a peer agent to send mail, what the store says of it, and
copies of the package with one deliberate bug (a broken lever).

    rig.agent("claude-code", "alice", policy)   # (ScriptedAgent, Launch): installed, pointed at the model
    rig.turn(launch, "work")                    # a headless turn (ended at teardown if still running)
    rig.terminal(launch)                        # an interactive session in tmux (ended at teardown)
    rig.send(launch, session_id, subject)       # a person's ``agents-room send``: (message id, answered at)
    rig.peer_send(session_id, subject)          # another agent's msg_send, in this process
    rig.delivery(session_id, message_id)        # (state, announced) in the store

Every CLI's traffic beyond the model goes to a refusing proxy on loopback (tests/egress.py).
Teardown ends every process a test started (its sessions, its turns, then anything still
running with the rig's HOME) and fails the test if one survives.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import signal
import sqlite3
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from egress import Egress
from harnesscli import binary, git_project, scratch_home
from terminal import Terminal

import agents_room
from agents_room.harnesses import codex_hooks, editguard_install
from agents_room.store import Store
from sim.harness.clis import Launch, prepare
from sim.harness.model import ScriptedAgent, ScriptedModel
from sim.harness.process import Turn
from sim.harness.script import Script

AGENTS_ROOM = str(Path(sys.executable).parent / "agents-room")
# harness -> the name tests/harnesscli.py knows its CLI by
CLI_NAMES = {"claude-code": "claude", "codex": "codex", "gemini": "gemini"}


class Rig:
    def __init__(self, root: Path) -> None:
        self.root = root
        self.store = root / "store" / "room.db"
        self.store.parent.mkdir()
        self.model = ScriptedModel()
        self.egress = Egress()
        self.turns: list[Turn] = []
        self.terminals: list[Terminal] = []
        self._store: Store | None = None
        self._peer: str | None = None
        self.peer_sent: list[int] = []  # message ids, in order

    def agent(self, harness: str, name: str, script: Script, *, channel: bool = False,
              hook_entry: str | None = None) -> tuple[ScriptedAgent, Launch]:
        """``name``'s model (``script``) and its CLI, installed in a project of its own.
        ``hook_entry``: run the hooks from this copy of ``hook_entry.py`` instead (a mutant)."""
        cli = binary(CLI_NAMES[harness])
        agent = self.model.agent(name, script)
        # One HOME for the rig's agents, the store in it: a project's committed settings
        # (Gemini CLI's) may name only a store under the home folder.
        home = self.root
        project = git_project(home / name)
        launch = prepare(harness, cli, home, project, str(self.store), agent.url, name=name, channel=channel)
        launch.env |= self.egress.env()
        if hook_entry:
            self.rewrite_hooks(launch, hook_entry)
        return agent, launch

    def rewrite_hooks(self, launch: Launch, hook_entry: str) -> None:
        """Point every hook command install wrote at ``hook_entry``."""
        shipped = str(Path(agents_room.__file__).parent / "hook_entry.py")
        edited = edit_hooks(launch, lambda event, command: command.replace(shipped, hook_entry))
        assert edited, f"{launch.name}: no hook command names {shipped}"

    def turn(self, launch: Launch, prompt: str) -> Turn:
        turn = launch.start_turn(prompt)
        self.turns.append(turn)
        return turn

    def terminal(self, launch: Launch, *, extra: list[str] = (), env: dict[str, str] | None = None,
                 multiplexed: bool = False) -> Terminal:
        term = Terminal.start(launch.name, [*launch.session_argv(), *extra], cwd=launch.project,
                              env={**launch.env, "TERM": "xterm-256color", **(env or {})}, multiplexed=multiplexed)
        self.terminals.append(term)
        return term

    def send(self, launch: Launch, to: str, subject: str, body: str = "") -> tuple[int, float]:
        """A person's ``agents-room send`` from ``launch``'s project: the message id, and when
        the command answered (time.time())."""
        done = subprocess.run([AGENTS_ROOM, "send", "--json", to, subject, body], capture_output=True, text=True,
                              timeout=60, cwd=launch.project, env=launch.env)
        answered = time.time()
        assert done.returncode == 0, f"agents-room send: {done.stderr}"
        return int(json.loads(done.stdout)["message_id"]), answered

    def peer_send(self, to: str, subject: str, body: str = "") -> tuple[int, float]:
        """Another agent's msg_send (a session of this test process): the message id, and when
        msg_send answered (time.time())."""
        store = self.peer_store()
        if self._peer is None:
            self._peer = store.room_join(cwd=str(self.root), pid=None, label="peer").session_id
        sent = store.msg_send(self._peer, to, subject, body)
        self.peer_sent.append(sent.message_id)
        return sent.message_id, time.time()

    def peer_store(self) -> Store:
        """The rig's store, opened in this process (for other agents' calls). Join them with no
        pid: this process is an ancestor of every CLI the rig starts, and a hook or the commit
        guard that finds its session by the harness process among its ancestors would find
        theirs too."""
        if self._store is None:
            self._store = Store.open(self.store)
        return self._store

    def delivery(self, recipient: str, message_id: int) -> tuple[str, bool]:
        """The delivery's state and whether a hook or lever announced it, read from the file."""
        conn = sqlite3.connect(f"file:{self.store}?mode=ro", uri=True)
        try:
            row = conn.execute("SELECT state, announced FROM deliveries WHERE recipient = ? AND message_id = ?",
                               (recipient, message_id)).fetchone()
        finally:
            conn.close()
        assert row is not None, f"no delivery of message {message_id} to {recipient}"
        return row[0], bool(row[1])

    def wait_delivery(self, recipient: str, message_id: int, states: tuple[str, ...], *, timeout: float = 30.0
                      ) -> str:
        """The delivery's state once it is one of ``states`` (polled with a deadline)."""
        deadline = time.monotonic() + timeout
        while True:
            state, _ = self.delivery(recipient, message_id)
            if state in states:
                return state
            if time.monotonic() >= deadline:
                raise AssertionError(f"message {message_id} to {recipient}: still {state!r} after {timeout:g} s, "
                                     f"not one of {states}")
            time.sleep(0.1)

    def close(self) -> list[str]:
        """End everything; what survived, as lines naming it."""
        left = []
        for term in self.terminals:
            left += [f"{term.name}: pid {pid} outlived its session" for pid in term.close()]
        for turn in self.turns:
            turn.stop()
        left += [f"pid {pid} ({what}) outlived the test" for pid, what in self._sweep()]
        if self._store is not None:
            self._store.close()
        self.model.close()
        self.egress.close()
        return left


    def _sweep(self) -> list[tuple[int, str]]:
        """Every process still running with the rig's HOME (a CLI's daemon that detached from
        its parent, say): KILLed; those that are still there after it."""
        mine = f"HOME={self.root}".encode()
        found = []
        for entry in os.listdir("/proc"):
            if entry.isdigit() and int(entry) != os.getpid():
                try:
                    with open(f"/proc/{entry}/environ", "rb") as f:
                        if mine in f.read().split(b"\0"):
                            found.append(int(entry))
                except OSError:
                    continue
        for pid in found:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        deadline = time.monotonic() + 3
        while time.monotonic() < deadline and any(_running(p) for p in found):
            time.sleep(0.05)
        return [(p, _command(p)) for p in found if _running(p)]


def _running(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return False


def _command(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return f.read().replace(b"\0", b" ").decode(errors="replace")[:200]
    except OSError:
        return "?"


@pytest.fixture
def rig() -> Iterator[Rig]:
    root = scratch_home()
    made = Rig(root)
    try:
        yield made
    finally:
        left = made.close()
        shutil.rmtree(root, ignore_errors=True)
        assert not left, "; ".join(left)


def mutant_package(tmp: Path, pattern: str, replacement: str) -> Path:
    """A copy of the installed package with one deliberate bug: the one place matching
    ``pattern`` (a regular expression; exactly one in the package, or the test fails) rewritten
    as ``replacement``. Returns the folder holding the copy (for the import path)."""
    copy = tmp / "mutant" / "agents_room"
    shutil.copytree(Path(agents_room.__file__).parent, copy, ignore=shutil.ignore_patterns("__pycache__"))
    found = re.compile(pattern)
    hits = [(p, m) for p in copy.rglob("*.py") for m in found.finditer(p.read_text())]
    assert len(hits) == 1, f"{pattern!r} matches {len(hits)} places in the package, not one: {hits}"
    path = hits[0][0]
    path.write_text(found.sub(replacement, path.read_text()))
    return copy.parent


def mutant_hook(tmp: Path, pattern: str, replacement: str) -> str:
    """The hook command file (hook_entry.py) of a :func:`mutant_package`: it runs the copy's
    hook and store."""
    return str(mutant_package(tmp, pattern, replacement) / "agents_room" / "hook_entry.py")


def serve_from(launch: Launch, folder: Path) -> None:
    """Make ``launch``'s CLI start ``agents-room serve`` from the package in ``folder`` (a
    mutant): an ``agents-room`` of that package first on its PATH, where the installed server
    entry finds it by name."""
    bin_dir = folder / "bin"
    bin_dir.mkdir(exist_ok=True)
    script = bin_dir / "agents-room"
    code = f"import sys; sys.path.insert(0, {str(folder)!r}); from agents_room.cli import main; sys.exit(main())"
    script.write_text(f"#!/bin/sh\nexec {sys.executable} -c {shlex.quote(code)} \"$@\"\n")
    script.chmod(0o755)
    launch.env["PATH"] = f"{bin_dir}:{launch.env['PATH']}"


def hook_files(launch: Launch) -> list[Path]:
    """Where install wrote ``launch``'s hooks."""
    return {"claude-code": [launch.project / ".claude" / "settings.local.json"],
            "gemini": [launch.project / ".gemini" / "settings.json", launch.home / ".gemini" / "settings.json"],
            "codex": [launch.home / ".codex" / "hooks.json"]}[launch.harness]


def edit_hooks(launch: Launch, edit: Callable[[str, str], str]) -> int:
    """Rewrite each hook command install wrote for ``launch`` (``edit(event, command)``); how
    many changed. Codex runs a hook only while its hash is trusted: the hashes install wrote
    into config.toml are replaced by the edited hooks' own, as install computes them."""
    changed = 0
    for path in hook_files(launch):
        if not path.exists():
            continue
        before = path.read_text()
        data = json.loads(before)
        for event, groups in (data.get("hooks") or {}).items():
            for group in groups:
                for hook in group.get("hooks", []):
                    new = edit(event, hook["command"])
                    changed += new != hook["command"]
                    hook["command"] = new
        after = json.dumps(data, indent=2)
        path.write_text(after)
        if launch.harness == "codex":
            config = launch.home / ".codex" / "config.toml"
            text = config.read_text()
            old = {**codex_hooks.trusted(path, before), **editguard_install.trusted(path, before)}
            new = {**codex_hooks.trusted(path, after), **editguard_install.trusted(path, after)}
            for key, digest in old.items():
                assert digest in text, f"{config} does not trust {key}"
                text = text.replace(digest, new[key])
            config.write_text(text)
    return changed


def mark_turn_end(launch: Launch, marker: Path) -> None:
    """Make the end-of-turn hooks (Gemini CLI's AfterAgent, Codex's and Claude Code's Stop but
    the asyncRewake waiter) touch ``marker`` once they answered, with their exit code and output
    unchanged: the test's sign that the harness ran the end of its turn."""
    ends = {"AfterAgent", "Stop"}
    edited = edit_hooks(launch, lambda event, command: command if event not in ends or "--wait" in command
                        else f"({command}); code=$?; touch {marker}; exit $code")  # (a line may end in exec)
    assert edited, f"{launch.name}: no end-of-turn hook to mark"


def joined_session(agent: ScriptedAgent, request_index: int = 1) -> str:
    """The session id room_join answered, from the request that brought its result back."""
    return agent.requests[request_index].result_of("room_join").data()["session_id"]
