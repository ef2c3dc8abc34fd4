"""``agents-room install gemini`` and the hook's answers to Gemini CLI's events (issue 28): the
server and hooks merged into Gemini CLI's settings.json, idempotent, a file it cannot parse
refused with one line and left as it was; the hook command answers the payloads Gemini CLI
0.61 sends (recorded from the real CLI: tests/test_harness_gemini.py runs it). ``doctor``
reads the store Gemini's settings name. Real subprocesses of the installed command."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from agents_room.harnesses.hook_line import PORTABLE, QUIET_GATE
from agents_room.store import Store

AGENTS_ROOM = str(Path(sys.executable).parent / "agents-room")
# The news hooks alone: the edit guard beside them is tests/test_install_editguard.py's.
EDITS_OFF = ("--edits", "off")
EVENTS = ("SessionStart", "BeforeAgent", "AfterTool", "AfterAgent")


@pytest.fixture
def home(tmp_path: Path) -> Path:
    (tmp_path / "home").mkdir()
    return tmp_path / "home"


@pytest.fixture
def project(tmp_path: Path) -> Path:
    (tmp_path / "project").mkdir()
    return tmp_path / "project"


def install(home: Path, project: Path, *args: str, **env: str) -> subprocess.CompletedProcess:
    """``agents-room install gemini ARGS``, this installation first on PATH unless ``env`` says."""
    base = {k: v for k, v in os.environ.items() if k != "AGENTS_ROOM_DB"}
    base["PATH"] = f"{Path(AGENTS_ROOM).parent}:{base.get('PATH', '/usr/bin:/bin')}"
    return subprocess.run([AGENTS_ROOM, "install", "gemini", *args, *EDITS_OFF], check=False, capture_output=True, text=True,
                          timeout=60, cwd=project, env={**base, "HOME": str(home), **env}, stdin=subprocess.DEVNULL)


def commands(settings: dict, event: str) -> list[str]:
    return [h["command"] for g in settings["hooks"][event] for h in g["hooks"]]


def test_project_install_merges_and_a_second_run_changes_nothing(home: Path, project: Path) -> None:
    path = project / ".gemini" / "settings.json"
    path.parent.mkdir()
    theirs = {"matcher": "write_file", "hooks": [{"type": "command", "command": "prettier --write", "timeout": 5000}]}
    path.write_text(json.dumps({"ui": {"theme": "GitHub"}, "mcpServers": {"docs": {"command": "docs-mcp"}},
                                "hooks": {"AfterTool": [theirs]}}, indent=2))
    done = install(home, project)
    assert done.returncode == 0, done.stderr
    settings = json.loads(path.read_text())
    assert settings["ui"] == {"theme": "GitHub"} and settings["mcpServers"]["docs"] == {"command": "docs-mcp"}
    # committed: commands that work wherever agents-room is on PATH
    assert settings["mcpServers"]["room"] == {"command": "agents-room", "args": ["serve"], "timeout": 60000}
    assert settings["hooks"]["AfterTool"][0] == theirs
    for event in EVENTS:
        [ours] = [h for g in settings["hooks"][event] for h in g["hooks"] if "agents-room" in h["command"]]
        command = (QUIET_GATE if event == "AfterTool" else "") + PORTABLE  # a prompt's hook marks the turn: never gated
        assert ours == {"type": "command", "name": "agents-room", "command": command, "timeout": 10000}
        assert f"{event} hook added" in done.stdout
    assert "trusted folder" in done.stdout and "MCP server 'room' added" in done.stdout
    before = path.read_bytes()
    again = install(home, project)
    assert again.returncode == 0 and "nothing to change" in again.stdout and path.read_bytes() == before
    # beside it, this machine's launcher the committed hook runs (and nothing else under HOME)
    assert [str(p.relative_to(home)) for p in home.rglob("*") if p.is_file()] == [".agents-room/hook"]
    assert (home / ".agents-room").stat().st_mode & 0o777 == 0o700  # the default store's folder: private
    assert "not on PATH" not in done.stdout  # (agents-room is this installation on the test's PATH)
    elsewhere = project.parent / "elsewhere"
    elsewhere.mkdir()
    done = install(home, elsewhere, PATH="/usr/bin:/bin")  # the committed command would not be found
    assert done.returncode == 0 and "not this installation on PATH" in done.stdout


def test_user_scope_writes_this_installations_paths_under_home(home: Path, project: Path, tmp_path: Path) -> None:
    db = tmp_path / "srv" / "room.db"
    done = install(home, project, "--scope", "user", AGENTS_ROOM_DB=str(db))
    assert done.returncode == 0, done.stderr
    settings = json.loads((home / ".gemini" / "settings.json").read_text())
    room = settings["mcpServers"]["room"]
    assert os.path.isabs(room["command"]) and room["env"] == {"AGENTS_ROOM_DB": str(db)}
    [hook] = commands(settings, "AfterAgent")
    assert hook.startswith(f"export AGENTS_ROOM_DB={db}; exec ") and "hook_entry.py" in hook
    assert not any(project.iterdir())
    # a machine-specific store never goes into the committed project file
    refused = install(home, project, AGENTS_ROOM_DB=str(db))
    assert refused.returncode == 1 and "--scope user" in refused.stderr and not any(project.iterdir())
    # doctor finds the store Gemini's settings name
    shown = subprocess.run([AGENTS_ROOM, "doctor"], capture_output=True, text=True, timeout=60, cwd=project,
                           env={**os.environ, "HOME": str(home)})
    assert f"{db} (AGENTS_ROOM_DB in {home / '.gemini' / 'settings.json'})" in shown.stdout + shown.stderr


@pytest.mark.parametrize("content", ["{not json", "[1, 2]", '{"hooks": {"AfterTool": {"x": 1}}}'])
def test_a_file_it_cannot_merge_is_refused_untouched(home: Path, project: Path, content: str) -> None:
    path = project / ".gemini" / "settings.json"
    path.parent.mkdir()
    path.write_text(content)
    done = install(home, project)
    assert done.returncode == 1 and "Traceback" not in done.stderr and len(done.stderr.strip().splitlines()) == 1
    assert str(path) in done.stderr and path.read_text() == content


# -- the hook command on Gemini CLI's payloads -----------------------------------------------------


def payload(event: str, **fields: object) -> str:
    """An event as Gemini CLI 0.61 sends it on stdin (its base fields, recorded from the real CLI)."""
    sid = "6455c6dc-58ca-4002-a637-4222bce24691"
    return json.dumps({"session_id": sid, "transcript_path": f"/home/me/.gemini/tmp/proj/chats/session-{sid}.jsonl",
                       "cwd": "/home/me/proj", "hook_event_name": event, "timestamp": "2026-12-04T12:43:53.965Z",
                       **fields})


def test_the_hook_answers_gemini_events(home: Path, project: Path, tmp_path: Path) -> None:
    assert install(home, project, "--scope", "user").returncode == 0
    [command] = commands(json.loads((home / ".gemini" / "settings.json").read_text()), "AfterTool")
    db = tmp_path / "store" / "room.db"
    with Store.open(db) as s:
        # Gemini CLI gives its servers no key: the session is found by the harness process (here,
        # this test runs the hook through a shell, as Gemini CLI does, so it is the harness).
        me = s.room_join(cwd=str(project), pid=os.getpid(), harness="gemini").session_id
        bob = s.room_join(cwd=str(project), pid=None, label="bob").session_id

    def run(event: str, **fields: object) -> dict | None:
        done = subprocess.run(command, shell=True, input=payload(event, **fields), capture_output=True, text=True,
                              timeout=30, env={"PATH": "/usr/bin:/bin", "HOME": str(home), "AGENTS_ROOM_DB": str(db)})
        assert done.returncode == 0 and done.stderr == "", done.stderr
        return json.loads(done.stdout) if done.stdout.strip() else None

    tool = {"tool_name": "read_file", "tool_input": {"file_path": "README.md"},
            "tool_response": {"llmContent": "# proj", "returnDisplay": "# proj"}}
    for event, fields in (("SessionStart", {"source": "startup"}), ("BeforeAgent", {"prompt": "hello"}),
                          ("AfterTool", tool)):
        with Store.open(db) as s:
            s.msg_send(bob, me, subject=f"news at {event}")
        out = run(event, **fields)
        assert out is not None, event
        assert out["hookSpecificOutput"]["hookEventName"] == event
        assert f"news at {event}" in out["hookSpecificOutput"]["additionalContext"]
        assert run(event, **fields) is None  # announced once
    with Store.open(db) as s:
        s.msg_send(bob, me, subject="before you stop")
    # the end of a turn: the reason becomes the next prompt; never again on the continuation
    assert run("AfterAgent", prompt="hello", prompt_response="done", stop_hook_active=True) is None
    out = run("AfterAgent", prompt="hello", prompt_response="done", stop_hook_active=False)
    assert out["decision"] == "block" and "before you stop" in out["reason"]
    assert run("AfterAgent", prompt="hello", prompt_response="done", stop_hook_active=False) is None
    assert str(uuid.UUID(json.loads(payload("SessionEnd"))["session_id"]))  # the shape's key is a UUID
