"""``agents-room install``: idempotent, merges into existing files, never clobbers, dry-run
writes nothing, HOME isolated. Real subprocesses of the installed command."""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
import tomllib
import uuid
from pathlib import Path

import pytest

import agents_room
from agents_room.harnesses.hook_line import PORTABLE, QUIET_GATE
from agents_room.store import Store

AGENTS_ROOM = str(Path(sys.executable).parent / "agents-room")
# The news hooks alone: the edit guard beside them is tests/test_install_editguard.py's.
EDITS_OFF = ("--edits", "off")
# The hook command install writes: this interpreter without site, on the package's hook entry.
HOOK = f"{shlex.quote(sys.executable)} -I -S {shlex.quote(str(Path(agents_room.__file__).parent / 'hook_entry.py'))}"
# The same, behind the quiet test, on the events of every prompt and tool call (its behaviour:
# tests/test_quiet_hook.py).
QUIET = f"{QUIET_GATE}exec {HOOK}"


@pytest.fixture
def home(tmp_path: Path) -> Path:
    path = tmp_path / "home"
    path.mkdir()
    return path


@pytest.fixture
def project(tmp_path: Path) -> Path:
    path = tmp_path / "project"
    path.mkdir()
    return path


def install(home: Path, project: Path, *args: str, **env: str) -> subprocess.CompletedProcess:
    """``agents-room install ARGS`` with HOME at ``home``; the store at its default (the
    conftest's AGENTS_ROOM_DB taken away) unless ``env`` sets one."""
    base = {k: v for k, v in os.environ.items() if k != "AGENTS_ROOM_DB"}
    return subprocess.run(
        [AGENTS_ROOM, "install", *args, "--command", AGENTS_ROOM, *EDITS_OFF], check=False, capture_output=True, text=True, timeout=60,
        cwd=project, env={**base, "HOME": str(home), **env},
    )


def snapshot(*roots: Path) -> dict[str, bytes]:
    return {str(p): p.read_bytes() for root in roots for p in sorted(root.rglob("*")) if p.is_file()}


def hook_commands(settings: dict, event: str) -> list[str]:
    return [h["command"] for g in settings["hooks"][event] for h in g["hooks"]]


def test_claude_code_project_install_then_nothing_twice(home: Path, project: Path) -> None:
    first = install(home, project, "claude-code")
    assert first.returncode == 0, first.stderr
    assert f"created: {project / '.mcp.json'}" in first.stdout
    servers = json.loads((project / ".mcp.json").read_text())["mcpServers"]
    portable = {"type": "stdio", "command": "agents-room", "args": ["serve"], "env": {"AGENTS_ROOM_WAKE_LEVER": "stop-hook"}}
    assert servers["room"] == portable
    # this installation's path: Claude Code's local scope for the project, on this machine only
    local = json.loads((home / ".claude.json").read_text())["projects"][str(project)]["mcpServers"]
    assert local["room"] == {**portable, "command": AGENTS_ROOM}
    assert not (project / ".claude" / "settings.json").exists()
    settings = json.loads((project / ".claude" / "settings.local.json").read_text())
    assert hook_commands(settings, "SessionStart") == [HOOK]
    for event in ("UserPromptSubmit", "PostToolUse"):
        assert hook_commands(settings, event) == [QUIET]
    [group] = settings["hooks"]["Stop"]
    plain, waiter = group["hooks"]
    assert plain["command"] == HOOK
    assert waiter["asyncRewake"] is True and waiter["command"].startswith(f"{HOOK} --wait --timeout ")
    assert waiter["timeout"] > float(waiter["command"].split("--timeout ")[1])  # the hook gives up first

    before = snapshot(project, home)
    second = install(home, project, "claude-code")
    assert second.returncode == 0
    assert "nothing to change" in second.stdout and second.stdout.count("unchanged:") == 3
    assert snapshot(project, home) == before


def test_claude_code_merges_and_keeps_everything_else(home: Path, project: Path) -> None:
    (project / ".mcp.json").write_text(json.dumps(
        {"mcpServers": {"github": {"command": "gh-mcp", "args": []}}, "note": "kept"}, indent=4))
    (project / ".claude").mkdir()
    theirs = {"type": "command", "command": "ruff format", "timeout": 30}
    (project / ".claude" / "settings.json").write_text(json.dumps({
        "permissions": {"allow": ["Bash(git status)"]},
        "hooks": {
            "PostToolUse": [{"matcher": "Edit|Write", "hooks": [theirs]}],
            # an old install from another path, sharing a group with someone else's hook
            "Stop": [{"matcher": "*", "hooks": [{"type": "command", "command": "/old/venv/bin/agents-room hook"},
                                                {"type": "command", "command": "notify-send done"}]}],
            # an install from another venv, beside someone else's hook entry of the same name
            "SessionStart": [{"matcher": "*", "hooks": [
                {"type": "command", "command": "/old/venv/bin/python -I -S /old/venv/lib/agents_room/hook_entry.py"},
                {"type": "command", "command": "python3 /opt/tool/hook_entry.py"}]}],
        },
    }))
    proc = install(home, project, "claude-code")
    assert proc.returncode == 0, proc.stderr
    mcp = json.loads((project / ".mcp.json").read_text())
    assert mcp["note"] == "kept" and mcp["mcpServers"]["github"] == {"command": "gh-mcp", "args": []}
    assert mcp["mcpServers"]["room"]["command"] == "agents-room"
    # the committed settings keep everything but our hooks, which move to the local settings
    settings = json.loads((project / ".claude" / "settings.json").read_text())
    assert settings["permissions"] == {"allow": ["Bash(git status)"]}
    assert settings["hooks"]["PostToolUse"] == [{"matcher": "Edit|Write", "hooks": [theirs]}]
    assert hook_commands(settings, "Stop") == ["notify-send done"]
    assert hook_commands(settings, "SessionStart") == ["python3 /opt/tool/hook_entry.py"]
    assert "UserPromptSubmit" not in settings["hooks"]
    local = json.loads((project / ".claude" / "settings.local.json").read_text())
    assert hook_commands(local, "PostToolUse") == [QUIET] and hook_commands(local, "SessionStart") == [HOOK]
    assert sum(c == HOOK for c in hook_commands(local, "Stop")) == 1
    assert "Stop hook removed" in proc.stdout and "SessionStart hook added" in proc.stdout

    assert install(home, project, "claude-code").stdout.count("unchanged:") == 4


def test_an_install_of_the_agents_room_hook_form_is_updated_in_place(home: Path, project: Path) -> None:
    # What earlier versions wrote: `agents-room hook` through the console script.
    old = f"{AGENTS_ROOM} hook"
    (project / ".claude").mkdir()
    (project / ".claude" / "settings.json").write_text(json.dumps({"hooks": {
        **{event: [{"matcher": "*", "hooks": [{"type": "command", "command": old, "timeout": 10}]}]
           for event in ("SessionStart", "UserPromptSubmit", "PostToolUse")},
        "Stop": [{"matcher": "*", "hooks": [
            {"type": "command", "command": old, "timeout": 10},
            {"type": "command", "command": f"{old} --wait --timeout 3540", "timeout": 3600, "asyncRewake": True}]}],
    }}))
    proc = install(home, project, "claude-code")
    assert proc.returncode == 0, proc.stderr
    assert json.loads((project / ".claude" / "settings.json").read_text()) == {}
    settings = json.loads((project / ".claude" / "settings.local.json").read_text())
    for event in ("SessionStart", "UserPromptSubmit", "PostToolUse", "Stop"):
        assert f"{event} hook removed" in proc.stdout and f"{event} hook added" in proc.stdout
        assert [len(g["hooks"]) for g in settings["hooks"][event]] == [2 if event == "Stop" else 1]
        assert all(c.startswith(QUIET if event in ("UserPromptSubmit", "PostToolUse") else HOOK)
                   for c in hook_commands(settings, event))
    assert "unchanged" in install(home, project, "claude-code").stdout


def test_dry_run_writes_nothing_and_shows_the_diff(home: Path, project: Path) -> None:
    (project / ".mcp.json").write_text('{"mcpServers": {"other": {"command": "x"}}}\n')
    before = snapshot(project, home)
    proc = install(home, project, "claude-code", "--dry-run")
    assert proc.returncode == 0, proc.stderr
    assert snapshot(project, home) == before
    assert f"would write: {project / '.mcp.json'}" in proc.stdout
    assert '+    "room": {' in proc.stdout and "+++ " in proc.stdout


def test_user_scope_writes_under_home_only(home: Path, project: Path) -> None:
    (home / ".claude.json").write_text(json.dumps({"numStartups": 3, "projects": {"/x": {"allowedTools": []}}}))
    proc = install(home, project, "claude-code", "--scope", "user", "--channel")
    assert proc.returncode == 0, proc.stderr
    assert not any(project.iterdir())
    state = json.loads((home / ".claude.json").read_text())
    assert state["numStartups"] == 3 and state["projects"] == {"/x": {"allowedTools": []}}
    assert state["mcpServers"]["room"]["env"] == {"AGENTS_ROOM_WAKE_LEVER": "stop-hook", "AGENTS_ROOM_CHANNEL": "1"}
    assert "Stop" in json.loads((home / ".claude" / "settings.json").read_text())["hooks"]


@pytest.mark.parametrize("content", ["{not json", "[1, 2]"])
def test_a_file_it_cannot_read_is_refused_untouched(home: Path, project: Path, content: str) -> None:
    (project / ".mcp.json").write_text(content)
    proc = install(home, project, "claude-code")
    assert proc.returncode == 1
    assert str(project / ".mcp.json") in proc.stderr and "left as it is" in proc.stderr
    assert (project / ".mcp.json").read_text() == content
    assert not (project / ".claude").exists()  # nothing half-done


def test_someone_elses_room_server_is_not_clobbered(home: Path, project: Path) -> None:
    (project / ".mcp.json").write_text(json.dumps({"mcpServers": {"room": {"command": "chat-room-server"}}}))
    proc = install(home, project, "claude-code")
    assert proc.returncode == 1 and "not agents-room" in proc.stderr
    assert json.loads((project / ".mcp.json").read_text())["mcpServers"]["room"] == {"command": "chat-room-server"}


def test_the_installed_hook_command_runs(home: Path, project: Path, tmp_path: Path) -> None:
    assert install(home, project, "claude-code").returncode == 0
    settings = json.loads((project / ".claude" / "settings.local.json").read_text())
    [command] = hook_commands(settings, "PostToolUse")
    db = tmp_path / "store" / "room.db"
    key = str(uuid.uuid4())
    with Store.open(db) as s:
        me = s.room_join(cwd=str(project), pid=None, harness_key=key).session_id
        other = s.room_join(cwd=str(project), pid=None, label="bob").session_id
        s.msg_send(other, me, subject="installed and working")
    # Through a shell, as harnesses run it, with a bare environment: no venv on PATH, and
    # PYTHON* variables that would break an interpreter that read them.
    env = {"PATH": "/usr/bin:/bin", "HOME": str(home), "AGENTS_ROOM_DB": str(db), "PYTHONHOME": "/nowhere",
           "PYTHONPATH": "/nowhere"}
    proc = subprocess.run(
        command, check=False, shell=True, input=json.dumps({"session_id": key, "hook_event_name": "PostToolUse"}),
        capture_output=True, text=True, timeout=30, env=env,
    )
    assert proc.returncode == 0 and proc.stderr == ""
    assert "installed and working" in json.loads(proc.stdout)["hookSpecificOutput"]["additionalContext"]


# -- Codex ------------------------------------------------------------------------------------------


CODEX_BEFORE = """\
# my settings
model = "o4-mini"

[mcp_servers.other]
command = "other-server"
args = ["--x"]

[profiles.fast]
model = "gpt-5"
"""


def test_codex_appends_its_table_and_keeps_every_byte(home: Path, project: Path) -> None:
    config = home / ".codex" / "config.toml"
    config.parent.mkdir()
    config.write_text(CODEX_BEFORE)
    proc = install(home, project, "codex")
    assert proc.returncode == 0, proc.stderr
    text = config.read_text()
    assert text.startswith(CODEX_BEFORE)
    data = tomllib.loads(text)
    assert data["mcp_servers"]["room"] == {"command": AGENTS_ROOM, "args": ["serve"], "env_vars": ["AGENTS_ROOM_DB"],
                                           "startup_timeout_sec": 30}
    assert data["mcp_servers"]["other"] == {"command": "other-server", "args": ["--x"]}
    assert data["profiles"] == {"fast": {"model": "gpt-5"}}
    again = install(home, project, "codex")
    assert "nothing to change" in again.stdout and config.read_text() == text
    assert not any(project.iterdir())


def test_codex_replaces_an_old_table_of_its_own(home: Path, project: Path) -> None:
    config = home / ".codex" / "config.toml"
    config.parent.mkdir()
    config.write_text(
        '[mcp_servers.room]\ncommand = "/old/agents-room"\nargs = ["serve"]\n\n'
        '[mcp_servers.room.env]\nX = "1"\n\n[mcp_servers.other]\ncommand = "o"\n'
    )
    assert install(home, project, "codex").returncode == 0
    data = tomllib.loads(config.read_text())
    # the user's own env entry stays (issue 28): only install's keys are its to replace
    assert data["mcp_servers"]["room"]["command"] == AGENTS_ROOM and data["mcp_servers"]["room"]["env"] == {"X": "1"}
    assert data["mcp_servers"]["other"] == {"command": "o"}


def test_codex_refuses_project_scope_and_bad_toml(home: Path, project: Path) -> None:
    proc = install(home, project, "codex", "--scope", "project")
    assert proc.returncode == 1 and "--scope user" in proc.stderr
    config = home / ".codex" / "config.toml"
    config.parent.mkdir()
    config.write_text("model = \n")
    proc = install(home, project, "codex")
    assert proc.returncode == 1 and "not valid TOML" in proc.stderr and config.read_text() == "model = \n"


# -- Cursor -----------------------------------------------------------------------------------------


def test_cursor_project_install_merges_and_is_idempotent(home: Path, project: Path, tmp_path: Path) -> None:
    (project / ".cursor").mkdir()
    (project / ".cursor" / "hooks.json").write_text(json.dumps(
        {"version": 1, "hooks": {"afterFileEdit": [{"command": "prettier"}], "stop": [{"command": "say done"}]}}))
    proc = install(home, project, "cursor")
    assert proc.returncode == 0, proc.stderr
    # .cursor/ is committed: commands that work wherever agents-room is on PATH
    assert json.loads((project / ".cursor" / "mcp.json").read_text())["mcpServers"]["room"] == {
        "command": "agents-room", "args": ["serve"]}
    hooks = json.loads((project / ".cursor" / "hooks.json").read_text())
    assert hooks["hooks"]["afterFileEdit"] == [{"command": "prettier"}]
    [theirs, ours] = hooks["hooks"]["stop"]
    assert theirs == {"command": "say done"}
    assert ours == {"command": f"{PORTABLE} --format cursor --event stop", "loop_limit": 3}
    # on this machine through the launcher install wrote under HOME; on a teammate's through
    # agents-room on PATH; where agents-room is not installed, nothing at all
    bare = tmp_path / "bare-home"
    bare.mkdir()
    on_path = f"{Path(AGENTS_ROOM).parent}:/usr/bin:/bin"
    for env, answer in (({"HOME": str(home), "PATH": "/usr/bin:/bin"}, "{}\n"),
                        ({"HOME": str(bare), "PATH": on_path}, "{}\n"),
                        ({"HOME": str(bare), "PATH": "/usr/bin:/bin"}, "")):
        proc = subprocess.run(ours["command"], check=False, shell=True, input=json.dumps({"loop_count": 0}),
                              capture_output=True, text=True, timeout=30, env=env)
        assert (proc.returncode, proc.stdout, proc.stderr) == (0, answer, ""), env
    before = snapshot(project, home)
    assert "nothing to change" in install(home, project, "cursor").stdout
    assert snapshot(project, home) == before
    assert [str(p.relative_to(home)) for p in home.rglob("*") if p.is_file()] == [".agents-room/hook"]


def test_the_project_install_approves_its_server_on_this_machine(home: Path, project: Path) -> None:
    # Claude Code keeps a .mcp.json server "Pending approval" until it is accepted; the person who
    # ran install chose it, so the local settings approve it (issue 28; the real claude says
    # Connected: tests/test_harness_claude.py). A server they turned down stays turned down.
    assert install(home, project, "claude-code").returncode == 0
    local = json.loads((project / ".claude" / "settings.local.json").read_text())
    assert local["enabledMcpjsonServers"] == ["room"]
    other = project.parent / "declined"
    (other / ".claude").mkdir(parents=True)
    (other / ".claude" / "settings.local.json").write_text(json.dumps({"disabledMcpjsonServers": ["room"]}))
    assert install(home, other, "claude-code").returncode == 0
    local = json.loads((other / ".claude" / "settings.local.json").read_text())
    assert local["disabledMcpjsonServers"] == ["room"] and "enabledMcpjsonServers" not in local


@pytest.mark.parametrize(("harness", "name", "content"), [
    ("claude-code", ".claude/settings.local.json", '{"hooks": '),
    ("codex", "HOME/.codex/config.toml", "[mcp_servers.room\n"),
    ("gemini", ".gemini/settings.json", "{'single': 'quotes'}"),
    ("cursor", ".cursor/hooks.json", '{"hooks": {"stop": {}}}'),
])
def test_every_harness_refuses_what_it_cannot_parse_in_one_line(home: Path, project: Path, harness: str, name: str,
                                                                content: str) -> None:
    path = home / name[5:] if name.startswith("HOME/") else project / name
    path.parent.mkdir(parents=True)
    path.write_bytes(content.encode())
    before = snapshot(project, home)
    proc = install(home, project, harness)
    assert proc.returncode == 1 and "Traceback" not in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1 and str(path) in proc.stderr
    assert snapshot(project, home) == before  # nothing written, that file byte for byte


def test_install_offers_exactly_the_registered_harnesses_each_speaking_the_interface() -> None:
    """A harness is a module of agents_room/harnesses/ named in its registry: install's choices
    come from there, and each module has the names install calls."""
    import inspect

    from agents_room.harnesses import registry

    listed = subprocess.run([AGENTS_ROOM, "install", "--help"], capture_output=True, text=True, timeout=60)
    assert listed.returncode == 0 and "{" + ",".join(registry.HARNESSES) + "}" in listed.stdout, listed.stdout
    assert set(registry.HARNESSES) == {"claude-code", "codex", "gemini", "cursor"}
    for name in registry.HARNESSES:
        module = registry.harness(name)
        assert module.NAME == name and module.SCOPE in ("project", "user") and isinstance(module.CHANNEL, bool)
        assert list(inspect.signature(module.plan).parameters) == ["scope", "root", "home", "exe", "hook", "channel",
                                                                   "store"], name
        assert isinstance(module.by_name(module.SCOPE), bool) and isinstance(
            module.notes(module.SCOPE, dry_run=True, on_path=True), list)
    assert [n for n in registry.HARNESSES if registry.harness(n).CHANNEL] == ["claude-code"]
