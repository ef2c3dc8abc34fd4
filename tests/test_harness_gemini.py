"""The real Gemini CLI (npm ``@google/gemini-cli``) on what ``agents-room install gemini``
writes (issue 28): in a trusted folder ``gemini mcp list`` starts our server and says
Connected; a run of ``gemini -p`` (a placeholder API key: the model call fails, the hooks before
it run) runs the installed hooks, which announce mail to the session of that Gemini process.
The hook's answers to each Gemini event: tests/test_install_gemini.py. A scratch HOME under
/var/tmp and a scratch git project; agents-room on PATH, as the committed file expects."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest
from harnesscli import binary, cli_env, git_project

from agents_room.store import Store

pytestmark = pytest.mark.slow
AGENTS_ROOM = str(Path(sys.executable).parent / "agents-room")


def announced(db: Path) -> bool:
    conn = sqlite3.connect(db)
    try:
        return bool(conn.execute("SELECT count(*) FROM deliveries WHERE announced = 1").fetchone()[0])
    finally:
        conn.close()


def test_gemini_connects_to_the_installed_server_and_runs_its_hooks(cli_home: Path) -> None:
    gemini = binary("gemini")
    project = git_project(cli_home / "proj")
    db = cli_home / "room.db"
    env = cli_env(cli_home, PATH=f"{Path(AGENTS_ROOM).parent}:{os.environ['PATH']}", AGENTS_ROOM_DB=str(db))
    done = subprocess.run([AGENTS_ROOM, "install", "gemini"], capture_output=True, text=True, timeout=60,
                          cwd=project, env=env)
    assert done.returncode == 0, done.stderr
    (cli_home / ".gemini").mkdir(exist_ok=True)
    (cli_home / ".gemini" / "trustedFolders.json").write_text(json.dumps({str(project): "TRUST_FOLDER"}))
    listed = subprocess.run([gemini, "mcp", "list"], capture_output=True, text=True, timeout=120, cwd=project,
                            env=env)
    said = listed.stdout + listed.stderr  # (Gemini CLI 0.61 prints its list on stderr)
    assert "✓ room: agents-room serve (stdio) - Connected" in said, said

    run = subprocess.Popen([gemini, "-p", "hello"], cwd=project, env={**env, "GEMINI_API_KEY": "placeholder"},
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        with Store.open(db) as store:
            # the session of this Gemini process, as its server records it (no key: the harness pid)
            me = store.room_join(cwd=str(project), pid=run.pid, harness="gemini").session_id
            bob = store.room_join(cwd=str(project), pid=None, label="bob").session_id
            store.msg_send(bob, me, subject="hello from bob")
        deadline = time.monotonic() + 90
        while not announced(db) and time.monotonic() < deadline and run.poll() is None:
            time.sleep(0.3)
        assert announced(db), "no Gemini hook announced the message"
    finally:
        os.killpg(run.pid, signal.SIGTERM)
        run.wait(timeout=30)
    with Store.open(db) as store:
        assert [m.subject for m in store.msg_recv(me).messages] == ["hello from bob"]  # announcing is not reading


def test_a_committed_project_works_for_a_teammate_without_agents_room(cli_home: Path) -> None:
    """The committed ``.gemini/settings.json`` on a machine where agents-room is not installed
    (not on PATH, no launcher under HOME): every hook of ours exits 0 silently and the model
    answers. The control, the command earlier installs committed (``agents-room hook``), is
    run first in the same project: Gemini CLI blocks the prompt and the model is never asked."""
    from harnesscli import git_project

    from sim.harness.clis import prepare
    from sim.harness.model import ScriptedModel
    from sim.harness.script import Request, Say, Shell

    cli = binary("gemini")
    project = git_project(cli_home / "proj")
    installer = cli_home / "installer"
    installer.mkdir()

    def policy(request: Request) -> object:
        if len(agent.requests) == 1:
            return [Shell("echo tool-ran")]  # a tool call: AfterTool's hook runs too
        return Say("the model answered")

    with ScriptedModel() as model:
        agent = model.agent("mate", policy)
        # the person who installed it: agents-room on PATH, a store under their HOME
        prepare("gemini", cli, installer, project, str(installer / "room.db"), agent.url)
        settings = json.loads((project / ".gemini" / "settings.json").read_text())
        assert (installer / ".agents-room" / "hook").is_file()
        # the teammate: a HOME of their own, and a PATH without agents-room
        mate = cli_home / "mate"
        path = os.pathsep.join(d for d in os.environ["PATH"].split(os.pathsep)
                               if d and not os.path.exists(os.path.join(d, "agents-room")))
        launch = prepare("gemini", cli, mate, project, str(mate / "room.db"), agent.url, install=False)
        launch.env = {**launch.env, "PATH": path}
        launch.env.pop("AGENTS_ROOM_DB")
        assert subprocess.run(["sh", "-c", "command -v agents-room"], env=launch.env).returncode != 0

        committed = (project / ".gemini" / "settings.json").read_text()
        old = json.loads(committed)
        for groups in old["hooks"].values():
            for group in groups:
                for hook in group["hooks"]:
                    hook["command"] = "agents-room hook"
        (project / ".gemini" / "settings.json").write_text(json.dumps(old))
        control = launch.start_turn("hello")
        try:
            control.wait(120)
        finally:
            control.stop()
        assert agent.requests == [], "the control: the old committed hook did not block the prompt"
        assert "agents-room: command not found" in control.output(), control.output()

        (project / ".gemini" / "settings.json").write_text(committed)
        turn = launch.start_turn("hello")
        try:
            assert turn.wait(180) == 0, turn.output()
        finally:
            turn.stop()
    assert len(agent.requests) == 2, (agent.errors, turn.output())
    assert "tool-ran" in agent.requests[1].text()
    assert "the model answered" in turn.output() and "command not found" not in turn.output(), turn.output()
    assert settings["hooks"].keys() >= {"SessionStart", "BeforeAgent", "AfterTool", "AfterAgent"}
