"""The hook's quiet path without Python (agents_room/harnesses/hook_line.py, quiet.py,
store/quiet.py): a real ``agents-room serve``, whose parent (this test process) stands for
the harness, keeps the marker; the hook line runs through ``/bin/sh -c`` as harnesses run it,
with its parent the same "harness". Its Python start goes through a wrapper that records
each start, then runs the real hook entry: no news, no Python; news, Python, and the news
delivered; every case the marker cannot vouch for, Python."""

from __future__ import annotations

import json
import os
import shlex
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from harnessrig import Rig, edit_hooks, rig  # noqa: F401 (the fixture)

from agents_room.harnesses import hook_line
from agents_room.harnesses.quiet import marker_path
from agents_room.store import Store
from agents_room.store.hosts import host_id
from sim.harness.script import Request, Say, Shell, ToolCall

AGENTS_ROOM = str(Path(sys.executable).parent / "agents-room")


class Agent:
    """A store in ``folder``, a session of this process (the "harness"), its server running."""

    def __init__(self, folder: Path, home: Path) -> None:
        self.folder, self.home = folder, home
        self.db = folder / "room.db"
        self.log = folder.parent / "python-starts.log"
        wrapper = folder.parent / "python"
        wrapper.write_text(f'#!/bin/sh\necho started >> {shlex.quote(str(self.log))}\nexec {hook_line.lean()} "$@"\n')
        self.line = hook_line.local(f"sh {shlex.quote(str(wrapper))}", quiet=True)
        self.env = {"PATH": "/usr/bin:/bin", "HOME": str(home), "AGENTS_ROOM_DB": str(self.db)}
        with Store.open(self.db) as store:
            self.me = store.room_join(cwd=str(folder), pid=os.getpid(), harness="claude-code", label="me").session_id
            self.peer = store.room_join(cwd=str(folder), pid=None, label="peer").session_id
        self.server = subprocess.Popen([AGENTS_ROOM, "serve"], stdin=subprocess.PIPE, stdout=subprocess.DEVNULL,
                                       stderr=subprocess.PIPE, env={**os.environ, **self.env})
        self.marker = folder / "quiet" / str(os.getpid())

    def hook(self, event: str = "PostToolUse", **env: str) -> tuple[bool, str]:
        """Run the hook line: (did Python start, what it printed)."""
        self.log.unlink(missing_ok=True)
        done = subprocess.run(["/bin/sh", "-c", self.line], input=json.dumps(
            {"session_id": str(uuid.uuid4()), "hook_event_name": event}), capture_output=True, text=True,
            timeout=60, env={**self.env, **env})
        # (a store the hook cannot reach says so in one line, and exits 0)
        assert done.returncode == 0 and (done.stderr == "" or "unreachable" in done.stderr), done
        return self.log.exists(), done.stdout

    def send(self, subject: str) -> None:
        with Store.open(self.db, create=False) as store:
            store.msg_send(self.peer, self.me, subject=subject)

    def wait_marker(self, present: bool = True) -> None:
        deadline = time.monotonic() + 60
        while self.marker.exists() != present:
            assert time.monotonic() < deadline, f"the marker is {'absent' if present else 'still there'}"
            assert self.server.poll() is None, self.server.stderr.read().decode()
            time.sleep(0.05)

    def stop(self) -> None:
        if self.server.poll() is None:
            self.server.kill()
        self.server.wait(timeout=30)
        self.server.stdin.close()
        self.server.stderr.close()


@pytest.fixture
def agent(tmp_path: Path) -> Iterator[Agent]:
    # a folder whose name the shell must quote: spaces, both quotes, a dollar
    folder = tmp_path / "store with 'quotes' \"and\" $pace"
    folder.mkdir()
    home = tmp_path / "home"
    home.mkdir()
    made = Agent(folder, home)
    try:
        yield made
    finally:
        made.stop()


def test_no_news_no_python_news_delivered_at_once(agent: Agent) -> None:
    agent.wait_marker()
    assert agent.marker.read_text() == f"{agent.server.pid}\n{agent.db}\n{host_id()}\n"
    for event in ("PostToolUse", "UserPromptSubmit"):
        assert agent.hook(event) == (False, ""), event
    # the server cannot react (stopped): the sender's commit removed the marker itself, and
    # the hook right after msg_send runs Python and tells the news
    os.kill(agent.server.pid, signal.SIGSTOP)
    try:
        agent.send("while you were quiet")
        started, said = agent.hook()
    finally:
        os.kill(agent.server.pid, signal.SIGCONT)
    assert started and "while you were quiet" in json.loads(said)["hookSpecificOutput"]["additionalContext"]
    # told: the server puts the marker back, and the next hook starts nothing
    agent.wait_marker()
    assert agent.hook() == (False, "")
    # the server stops: its marker goes with it
    agent.server.stdin.close()
    assert agent.server.wait(timeout=30) == 0, agent.server.stderr.read()
    agent.wait_marker(present=False)
    assert agent.hook()[0]


def test_every_case_the_marker_cannot_vouch_for_runs_python(agent: Agent, tmp_path: Path) -> None:
    agent.wait_marker()
    assert agent.hook() == (False, "")
    # bash (Gemini CLI, Codex) and dash (Claude Code's /bin/sh) read the line alike
    for shell in ("/bin/dash", "/bin/bash"):
        for env, python in (({}, False), ({"AGENTS_ROOM_DB": f"{agent.db}x"}, True)):
            agent.log.unlink(missing_ok=True)
            done = subprocess.run([shell, "-c", agent.line], input="{}", capture_output=True, text=True, timeout=60,
                                  env={**agent.env, **env})
            assert (done.returncode, done.stdout, agent.log.exists()) == (0, "", python), (shell, env)
    other = tmp_path / "other" / "room.db"
    other.parent.mkdir()
    # another store in the hook's environment; the same one spelt otherwise; a server's URL
    for db in (str(other), f"{agent.folder}/./room.db", "postgresql://u@127.0.0.1:1/x"):
        assert agent.hook(AGENTS_ROOM_DB=db)[0], db
    # another host (a container sharing the kernel and the store's folder, not the PID namespace)
    assert agent.hook(AGENTS_ROOM_HOST_ID="another-host")[0]
    # a marker of this same text in the other store's folder vouches for nothing there
    (other.parent / "quiet").mkdir()
    (other.parent / "quiet" / str(os.getpid())).write_text(agent.marker.read_text())
    assert agent.hook(AGENTS_ROOM_DB=str(other))[0]
    # the server died (SIGKILL: no clean-up): its marker stays, naming a pid that is gone
    agent.server.kill()
    agent.server.wait(timeout=30)
    assert agent.marker.exists()
    assert agent.hook()[0]


def test_where_no_marker_is_kept(tmp_path: Path) -> None:
    home = str(tmp_path)
    (tmp_path / "rooms").mkdir()
    (tmp_path / "link").symlink_to(tmp_path / "rooms")  # a link on the way: the sender removes in the real folder
    db = f"{home}/rooms/room.db"
    assert marker_path({"HOME": home, "AGENTS_ROOM_DB": db}, db, 1234) == f"{home}/rooms/quiet/1234"
    assert marker_path({"HOME": home, "AGENTS_ROOM_DB": "~/rooms/room.db"}, db, 1234) == f"{home}/rooms/quiet/1234"
    assert marker_path({"HOME": home}, f"{home}/.agents-room/room.db", 7) == f"{home}/.agents-room/quiet/7"
    for env, path in (({"HOME": home, "AGENTS_ROOM_DB": "postgresql://h/db"}, "postgresql://h/db"),  # a server
                      ({"HOME": home, "AGENTS_ROOM_DB": f"{home}/x/../rooms/room.db"}, db),  # spelt otherwise
                      ({"HOME": home, "AGENTS_ROOM_DB": f"{home}/link/room.db"}, f"{home}/link/room.db"),
                      ({"HOME": home, "AGENTS_ROOM_DB": f"{home}/other.db"}, db),  # --db: not the hook's
                      ({"HOME": home, "AGENTS_ROOM_DB": db + "\n"}, db),
                      ({"AGENTS_ROOM_DB": "~/rooms/room.db"}, db)):  # no HOME
        assert marker_path(env, path, 1234) is None, env
    assert marker_path({"HOME": home, "AGENTS_ROOM_DB": db}, db, None) is None  # no harness pid


def test_mail_removes_its_recipients_markers_at_commit(tmp_path: Path) -> None:
    """The store's part, without a server: a committed msg_send removes the markers of its
    recipients' harness pids (and no other); a send that fails removes nothing."""
    db = tmp_path / "room.db"
    quiet = tmp_path / "quiet"
    quiet.mkdir()
    with Store.open(db) as store:
        me = store.room_join(cwd=str(tmp_path), pid=4242, label="me").session_id
        other = store.room_join(cwd=str(tmp_path), pid=4343, label="other").session_id
        peer = store.room_join(cwd=str(tmp_path), pid=None, label="peer").session_id
        for pid in (4242, 4343):
            (quiet / str(pid)).write_text("1\n\n")
        with pytest.raises(Exception, match="reply_to"):
            store.msg_send(peer, me, subject="refused", reply_to=999)
        assert sorted(p.name for p in quiet.iterdir()) == ["4242", "4343"]
        sent = store.msg_send(peer, me, subject="hello")
        assert [p.name for p in quiet.iterdir()] == ["4343"]
        store.msg_send(peer, other, subject="hello")
        assert list(quiet.iterdir()) == []
        # a wake offer is news too (a turn confirms it): its session's marker goes
        (quiet / "4242").write_text("1\n\n")
        assert store.wake_signalled(me, [sent.message_id], "stop-hook", None, 30.0) == [sent.message_id]
        assert list(quiet.iterdir()) == []


@pytest.mark.slow
@pytest.mark.parametrize("harness", ["claude-code", "codex", "gemini"])
def test_in_each_real_harness_quiet_tool_calls_start_no_python(rig: Rig, harness: str) -> None:  # noqa: F811
    """The real CLI: the model joins, waits for its server's marker, makes tool calls of its
    shell (no Python starts for their hooks), then mail arrives before one more call: that
    call's hook runs Python and the next request holds the message. The Python start of each
    quiet-gated hook is counted through a wrapper that then runs the real hook entry."""
    log = rig.root / f"{harness}-python-starts.log"
    # (named as our hook entry, so the edited hooks stay ours: Codex's trust follows them)
    wrapper = rig.root / f"{harness}-wrapper" / "agents_room" / "hook_entry.py"
    wrapper.parent.mkdir(parents=True)
    wrapper.write_text(f'#!/bin/sh\necho started >> {shlex.quote(str(log))}\nexec {hook_line.lean()} "$@"\n')
    quiet_calls = 4
    said: dict[str, Any] = {}

    def policy(request: Request) -> object:
        step = len(agent.requests)
        if step == 1:
            return [ToolCall("room_join", {"autonomy": "notify"})]
        if step == 2:
            said["session"] = request.result_of("room_join").data()["session_id"]
            deadline = time.monotonic() + 60
            while not list((rig.store.parent / "quiet").glob("*")):
                assert time.monotonic() < deadline, "no quiet marker"
                time.sleep(0.1)
            said["starts"] = log.read_text().count("started") if log.exists() else 0
        if 2 <= step < 2 + quiet_calls:
            return [Shell(f"true {step}")]
        if step == 2 + quiet_calls:
            said["quiet_starts"] = (log.read_text().count("started") if log.exists() else 0) - said["starts"]
            rig.peer_send(said["session"], "mail between two calls", "please look")
            return [Shell("true news")]
        return Say("done")

    agent, launch = rig.agent(harness, f"quiet-{harness}", policy)
    def counted(event: str, command: str) -> str:
        if hook_line.QUIET_GATE not in command:
            return command
        # this machine's line runs the interpreter; a committed one (Gemini CLI's project) the launcher
        return command.replace(f"exec {hook_line.lean()}", f"exec sh {wrapper}").replace(
            f'set -- sh "$HOME/{hook_line.LAUNCHER}"', f"set -- sh {wrapper}")

    assert edit_hooks(launch, counted)
    turn = rig.turn(launch, "work on the task")
    assert turn.wait(180) == 0, turn.output()
    assert not agent.errors, agent.errors
    assert said["quiet_starts"] == 0, f"{harness}: {said['quiet_starts']} Python starts on {quiet_calls - 1} quiet calls"
    after = agent.requests[2 + quiet_calls]
    assert "mail between two calls" in after.text(), after.text()[-600:]
    # the news came through the counted start: the wrapper is in the path the quiet calls took
    assert log.read_text().count("started") > said["starts"], "no counted Python start at all"
