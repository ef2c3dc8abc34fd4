"""The real Codex CLI (npm ``@openai/codex``) on what ``agents-room install codex`` writes
(issue 28): ``codex mcp list`` / ``mcp get`` read it, with the docs' wake command line added;
``codex app-server`` (JSON-RPC over stdio, no model needed) starts our server, lists its 18
tools, and its ``room_join`` records a session whose harness is ``codex`` (Codex passes no
variable of its own: the server knows it by its parent process), ``alive`` while Codex runs and
``gone`` once it has exited. A scratch HOME under /var/tmp and a scratch git project."""

from __future__ import annotations

import json
import os
import select
import subprocess
import sys
import time
import tomllib
from pathlib import Path
from typing import Any

import pytest
from harnesscli import binary, cli_env, git_project
from test_install_codex import add_wake_command

from agents_room.store import Store

pytestmark = pytest.mark.slow
AGENTS_ROOM = str(Path(sys.executable).parent / "agents-room")


class AppServer:
    """``codex app-server``: one JSON object per line each way."""

    def __init__(self, codex: str, cwd: Path, env: dict[str, str], argv: list[str] | None = None) -> None:
        self.proc = subprocess.Popen(argv or [codex, "app-server"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=subprocess.DEVNULL, text=True, cwd=cwd, env=env)
        self.seen: list[dict[str, Any]] = []
        self.next_id = 0
        self.pending = b""  # read from the pipe, not yet a whole line

    def send(self, method: str, params: dict[str, Any] | None = None, *, notify: bool = False) -> int:
        message: dict[str, Any] = {"jsonrpc": "2.0", "method": method}
        if params is not None:
            message["params"] = params
        if not notify:
            self.next_id += 1
            message["id"] = self.next_id
        assert self.proc.stdin is not None
        self.proc.stdin.write(json.dumps(message) + "\n")
        self.proc.stdin.flush()
        return self.next_id

    def wait_for(self, match: Any, timeout: float = 60) -> dict[str, Any]:
        """The first message (seen before, or read now) that ``match`` accepts. The pipe is read
        by its descriptor and split into lines here: a buffered ``readline`` after ``select``
        would leave a second line that came in the same read in Python's buffer, where ``select``
        never sees it, and wait out the timeout for an answer already received (what a loaded
        machine did: Codex writes its answers together when the reader is slow)."""
        for message in self.seen:
            if match(message):
                return message
        deadline = time.monotonic() + timeout
        assert self.proc.stdout is not None
        fd = self.proc.stdout.fileno()
        while True:
            while b"\n" in self.pending:
                line, self.pending = self.pending.split(b"\n", 1)
                if not line.strip():
                    continue
                message = json.loads(line)
                self.seen.append(message)
                if match(message):
                    return message
            left = deadline - time.monotonic()
            if left <= 0:
                raise AssertionError(f"nothing matched in {timeout}s; the last messages: {self.seen[-5:]}")
            ready, _, _ = select.select([fd], [], [], min(0.5, left))
            if not ready:
                continue
            chunk = os.read(fd, 1 << 16)
            if not chunk:
                raise AssertionError(f"codex app-server ended; it said: {self.seen[-5:]}")
            self.pending += chunk

    def call(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        sent = self.send(method, params)
        answer = self.wait_for(lambda m: m.get("id") == sent)
        assert "error" not in answer, answer
        return answer["result"]

    def close(self) -> None:
        if self.proc.poll() is None:
            assert self.proc.stdin is not None
            self.proc.stdin.close()
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        if self.proc.stdout is not None:
            self.proc.stdout.close()


def test_two_answers_in_one_write_are_both_read(tmp_path: Path) -> None:
    """The reader finds an answer that came in the same write as the one before it (a loaded
    machine's ``hooks/list`` answer was missed that way: the old reader waited out its timeout
    for it), and still waits for one that comes later."""
    script = ("import sys; sys.stdout.write('{\"id\": 1}\\n{\"id\": 2}\\n'); sys.stdout.flush(); "
              "sys.stdin.readline(); print('{\"id\": 3}', flush=True); sys.stdin.read()")
    server = AppServer("", tmp_path, dict(os.environ), argv=[sys.executable, "-c", script])
    try:
        assert server.wait_for(lambda m: m.get("id") == 1) == {"id": 1}
        assert server.wait_for(lambda m: m.get("id") == 2, timeout=20) == {"id": 2}  # nothing more comes
        server.send("go", notify=True)
        assert server.wait_for(lambda m: m.get("id") == 3) == {"id": 3}
    finally:
        server.close()


def test_codex_runs_the_installed_server(cli_home: Path) -> None:
    codex = binary("codex")
    project = git_project(cli_home / "proj")
    db = cli_home / "room.db"
    env = cli_env(cli_home)
    # installed with this installation on PATH: the command written must not need it
    done = subprocess.run([AGENTS_ROOM, "install", "codex"], capture_output=True, text=True, timeout=60,
                          env={**env, "PATH": f"{Path(AGENTS_ROOM).parent}:{env['PATH']}", "AGENTS_ROOM_DB": str(db)})
    assert done.returncode == 0, done.stderr
    add_wake_command(cli_home / ".codex" / "config.toml", "true")  # as docs/harnesses.md says
    listed = subprocess.run([codex, "mcp", "get", "room", "--json"], capture_output=True, text=True, timeout=60,
                            env=env, cwd=project)
    assert listed.returncode == 0, listed.stderr
    entry = json.loads(listed.stdout)
    assert entry["transport"]["command"] == str(Path(AGENTS_ROOM).absolute())
    # a store under HOME is written ~/...; agents-room expands it itself
    assert entry["transport"]["env"] == {"AGENTS_ROOM_DB": "~/room.db", "AGENTS_ROOM_WAKE_COMMAND": "true"}

    server = AppServer(codex, project, env)
    try:
        server.call("initialize", {"clientInfo": {"name": "agents-room-tests", "version": "1"}})
        server.send("initialized", notify=True)
        thread = server.call("thread/start", {"cwd": str(project)})["thread"]["id"]
        status = server.wait_for(lambda m: m.get("method") == "mcpServer/startupStatus/updated"
                                 and m["params"]["name"] == "room" and m["params"]["status"] in ("ready", "failed"))
        assert status["params"]["status"] == "ready", status
        servers = {s["name"]: s for s in server.call("mcpServerStatus/list", {})["data"]}
        assert len(servers["room"]["tools"]) == 18 and not servers["room"].get("toolsError")

        def tool(name: str, arguments: dict[str, Any]) -> dict[str, Any]:
            result = server.call("mcpServer/tool/call", {"server": "room", "threadId": thread, "tool": name,
                                                         "arguments": arguments})
            assert result.get("isError") is False, result
            return result["structuredContent"]

        joined = tool("room_join", {"label": "codex-agent"})
        assert joined["store"] == str(db) and joined["rooms"] == ["repo:proj"]
        members = tool("room_who", {"session_id": joined["session_id"]})["sessions"]
        [me] = [m for m in members if m["session_id"] == joined["session_id"]]
        assert (me["harness"], me["liveness"]) == ("codex", "alive")
    finally:
        server.close()
    # Codex has exited: its session is gone (by the harness process it recorded)
    deadline = time.monotonic() + 15
    while True:
        with Store.open(db, create=False) as store:
            [me] = [m for m in store.room_who() if m.session_id == joined["session_id"]]
        if me.liveness == "gone" or time.monotonic() > deadline:
            break
        time.sleep(0.5)
    assert (me.harness, me.liveness) == ("codex", "gone"), me
    assert not os.path.exists(f"/proc/{server.proc.pid}")


def test_codex_loads_the_installed_hooks_trusted(cli_home: Path) -> None:
    """``codex app-server``'s ``hooks/list``: the five hooks install wrote (four news hooks and
    the edit guard), merged beside a
    user's own, load without a warning, enabled and trusted (Codex's own hash of each is the
    one install wrote); the user's hook stays untrusted; a hook edited by hand is no longer."""
    codex = binary("codex")
    project = git_project(cli_home / "proj")
    env = cli_env(cli_home)
    folder = cli_home / ".codex"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "hooks.json").write_text(json.dumps(
        {"hooks": {"Stop": [{"hooks": [{"type": "command", "command": "true", "timeout": 5}]}]}}))
    done = subprocess.run([AGENTS_ROOM, "install", "codex"], capture_output=True, text=True, timeout=60,
                          env={**env, "AGENTS_ROOM_DB": str(cli_home / "room.db")})
    assert done.returncode == 0, done.stderr

    def listed() -> tuple[dict[str, dict[str, Any]], dict[str, Any]]:
        server = AppServer(codex, project, env)
        try:
            server.call("initialize", {"clientInfo": {"name": "agents-room-tests", "version": "1"}})
            server.send("initialized", notify=True)
            [found] = server.call("hooks/list", {"cwds": [str(project)]})["data"]
        finally:
            server.close()
        return {h["key"]: h for h in found["hooks"]}, found

    hooks, found = listed()
    assert found["warnings"] == [] and found["errors"] == []
    trusted = tomllib.loads((folder / "config.toml").read_text())["hooks"]["state"]
    path = folder / "hooks.json"
    mine = {f"{path}:session_start:0:0", f"{path}:user_prompt_submit:0:0", f"{path}:post_tool_use:0:0",
            f"{path}:stop:1:0"}
    guard = f"{path}:pre_tool_use:0:0"  # the edit guard, on apply_patch (its matcher in Codex's hash)
    assert set(hooks) == mine | {guard, f"{path}:stop:0:0"}
    for key in mine | {guard}:
        hook = hooks[key]
        if key == guard:
            assert hook["command"].endswith("--harness codex --edits claim")
            assert hook["command"].startswith("AGENTS_ROOM_DB='~/room.db' ")
        else:
            assert hook["command"].endswith("hook_entry.py") and hook["command"].startswith("export AGENTS_ROOM_DB='~/room.db'; ")
        assert (hook["enabled"], hook["trustStatus"]) == (True, "trusted"), hook
        assert hook["currentHash"] == trusted[key]["trusted_hash"]
    assert hooks[f"{path}:stop:0:0"]["trustStatus"] == "untrusted"  # the user's own: not install's to trust

    # Edited by hand, our Stop hook no longer matches what was trusted: Codex would not run it.
    data = json.loads(path.read_text())
    data["hooks"]["Stop"][1]["hooks"][0]["timeout"] = 11
    path.write_text(json.dumps(data))
    hooks, _ = listed()
    assert hooks[f"{path}:stop:1:0"]["trustStatus"] == "modified"
    assert hooks[f"{path}:session_start:0:0"]["trustStatus"] == "trusted"
