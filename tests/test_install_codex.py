"""``agents-room install codex`` (issue 28): it names the store once, leaves a table the user can
add to as the docs say, merges into the user's own table and says what it changed, refuses what
it cannot edit with one line and the file as it was, and writes a command Codex finds without
the installer's PATH. Real subprocesses of the installed command; the file Codex itself reads is
checked with the real Codex in tests/test_harness_codex.py."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

AGENTS_ROOM = str(Path(sys.executable).parent / "agents-room")
# The news hooks alone: the edit guard beside them is tests/test_install_editguard.py's.
EDITS_OFF = ("--edits", "off")


@pytest.fixture
def home(tmp_path: Path) -> Path:
    (tmp_path / "home" / ".codex").mkdir(parents=True)
    return tmp_path / "home"


def install(home: Path, *args: str, path: str | None = None, **env: str) -> subprocess.CompletedProcess:
    base = {k: v for k, v in os.environ.items() if k != "AGENTS_ROOM_DB"}
    if path is not None:
        base["PATH"] = path
    return subprocess.run([AGENTS_ROOM, "install", "codex", *args, *EDITS_OFF], check=False, capture_output=True, text=True,
                          timeout=60, cwd=home, env={**base, "HOME": str(home), **env}, stdin=subprocess.DEVNULL)


def room(home: Path) -> dict:
    return tomllib.loads((home / ".codex" / "config.toml").read_text())["mcp_servers"]["room"]


def add_wake_command(config: Path, command: str) -> None:
    """What docs/harnesses.md tells a user to do: a line in ``[mcp_servers.room.env]``, with
    the table added when it is not there."""
    text = config.read_text()
    line = f'AGENTS_ROOM_WAKE_COMMAND = "{command}"\n'
    if "[mcp_servers.room.env]" in text:
        at = text.index("[mcp_servers.room.env]")
        end = text.index("\n", at) + 1
        config.write_text(text[:end] + line + text[end:])
    else:
        config.write_text(text + "\n[mcp_servers.room.env]\n" + line)


def test_the_store_is_named_once(home: Path, tmp_path: Path) -> None:
    db = str(tmp_path / "srv" / "room.db")
    done = install(home, "--command", AGENTS_ROOM, AGENTS_ROOM_DB=db)
    assert done.returncode == 0, done.stderr
    entry = room(home)
    assert entry["env"] == {"AGENTS_ROOM_DB": db}
    assert "AGENTS_ROOM_DB" not in entry.get("env_vars", [])  # env would win over it anyway
    # back to the default store: our value goes, Codex passes the caller's own variable again
    done = install(home, "--command", AGENTS_ROOM)
    assert done.returncode == 0, done.stderr
    assert "env" not in room(home) and room(home)["env_vars"] == ["AGENTS_ROOM_DB"]
    assert "env AGENTS_ROOM_DB removed" in done.stdout


@pytest.mark.parametrize("store", [True, False])
def test_the_documented_wake_command_line_keeps_the_file_valid(home: Path, tmp_path: Path, store: bool) -> None:
    env = {"AGENTS_ROOM_DB": str(tmp_path / "srv" / "room.db")} if store else {}
    assert install(home, "--command", AGENTS_ROOM, **env).returncode == 0
    config = home / ".codex" / "config.toml"
    add_wake_command(config, "tmux send-keys -t agent1 hi Enter")
    assert room(home)["env"]["AGENTS_ROOM_WAKE_COMMAND"] == "tmux send-keys -t agent1 hi Enter"
    before = config.read_bytes()
    again = install(home, "--command", AGENTS_ROOM, **env)
    assert again.returncode == 0, again.stderr
    assert "nothing to change" in again.stdout and config.read_bytes() == before


def test_a_second_install_keeps_the_users_keys_and_says_what_changed(home: Path) -> None:
    config = home / ".codex" / "config.toml"
    config.write_text(
        "# mine\n[mcp_servers.room]\n"
        'command = "/old/venv/bin/agents-room"  # an older install\n'
        "args = [\n  \"serve\",\n]\n"
        "tool_timeout_sec = 120\nstartup_timeout_sec = 45\n"
        'env_vars = ["HTTPS_PROXY"]\n\n'
        '[mcp_servers.room.env]\nAGENTS_ROOM_WAKE_COMMAND = "notify-agent"\n\n'
        '[mcp_servers.docs]\ncommand = "docs-server"\n'
    )
    done = install(home, "--command", AGENTS_ROOM)
    assert done.returncode == 0, done.stderr
    entry = room(home)
    assert entry == {"command": AGENTS_ROOM, "args": ["serve"], "tool_timeout_sec": 120, "startup_timeout_sec": 45,
                     "env_vars": ["HTTPS_PROXY", "AGENTS_ROOM_DB"], "env": {"AGENTS_ROOM_WAKE_COMMAND": "notify-agent"}}
    text = config.read_text()
    assert text.startswith("# mine\n") and "tool_timeout_sec = 120\n" in text
    assert tomllib.loads(text)["mcp_servers"]["docs"] == {"command": "docs-server"}
    assert f"command = \"{AGENTS_ROOM}\"" in done.stdout and "kept" in done.stdout and "tool_timeout_sec" in done.stdout
    assert 'env_vars = ["HTTPS_PROXY", "AGENTS_ROOM_DB"]' in done.stdout
    again = install(home, "--command", AGENTS_ROOM)
    assert "nothing to change" in again.stdout and config.read_text() == text


@pytest.mark.parametrize("content", [
    'mcp_servers = { docs = { command = "docs-server" } }\n',
    'mcp_servers.docs.command = "docs-server"\n',
    '[mcp_servers]\nroom = { command = "/old/agents-room", args = ["serve"] }\n',
    "model = \n",
])
def test_what_it_cannot_edit_is_refused_in_one_line_untouched(home: Path, content: str) -> None:
    config = home / ".codex" / "config.toml"
    config.write_bytes(content.encode())
    done = install(home, "--command", AGENTS_ROOM)
    assert done.returncode == 1 and "Traceback" not in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1 and str(config) in done.stderr
    assert config.read_bytes() == content.encode()


def test_the_command_is_absolute_even_with_agents_room_on_path(home: Path) -> None:
    on_path = f"{Path(AGENTS_ROOM).parent}:/usr/bin:/bin"
    done = install(home, path=on_path)
    assert done.returncode == 0, done.stderr
    command = room(home)["command"]
    assert os.path.isabs(command) and Path(command).resolve() == Path(AGENTS_ROOM).resolve()
    # Codex may start with another PATH: the command runs without this one
    ran = subprocess.run([command, "--version"], capture_output=True, text=True, timeout=60,
                         env={"PATH": "/usr/bin:/bin", "HOME": str(home)})
    assert ran.returncode == 0 and ran.stdout.startswith("agents-room ")


# -- the hooks ---------------------------------------------------------------------------------------

HOOK_EVENTS = ("SessionStart", "UserPromptSubmit", "PostToolUse", "Stop")
LABELS = {"SessionStart": "session_start", "UserPromptSubmit": "user_prompt_submit",
          "PostToolUse": "post_tool_use", "Stop": "stop"}


def hooks_of(home: Path) -> dict:
    return json.loads((home / ".codex" / "hooks.json").read_text())["hooks"]


def states(home: Path) -> dict:
    return tomllib.loads((home / ".codex" / "config.toml").read_text()).get("hooks", {}).get("state", {})


def ours(group: dict) -> bool:
    return any("agents_room" in h.get("command", "") and "hook_entry.py" in h["command"] for h in group["hooks"])


def test_the_hooks_are_written_and_trusted(home: Path) -> None:
    import agents_room

    done = install(home, "--command", AGENTS_ROOM)
    assert done.returncode == 0, done.stderr
    hooks = hooks_of(home)
    assert sorted(hooks) == sorted(HOOK_EVENTS)
    entry = str(Path(agents_room.__file__).parent / "hook_entry.py")  # the path installed settings keep
    for event in HOOK_EVENTS:
        [group] = hooks[event]
        [hook] = group["hooks"]
        assert hook["type"] == "command" and hook["timeout"] == 10
        assert hook["command"].endswith(f" -I -S {entry}"), hook  # the default store: none named
    # each trusted under Codex's key for it; the hashes themselves are Codex's to judge
    # (tests/test_harness_codex.py asks the real Codex)
    path = home / ".codex" / "hooks.json"
    assert set(states(home)) == {f"{path}:{LABELS[e]}:0:0" for e in HOOK_EVENTS}
    hashes = [s["trusted_hash"] for s in states(home).values()]
    assert len(set(hashes)) == 4 and all(h.startswith("sha256:") and len(h) == 71 for h in hashes)
    assert "4 hooks trusted" in done.stdout and "Stop hook added" in done.stdout
    # a store named at install rides each hook's command (Codex gives hooks its own environment)
    db = str(home.parent / "srv" / "room.db")
    again = install(home, "--command", AGENTS_ROOM, AGENTS_ROOM_DB=db)
    assert again.returncode == 0, again.stderr
    for event in HOOK_EVENTS:
        [group] = hooks_of(home)[event]
        assert group["hooks"][0]["command"].startswith(f"export AGENTS_ROOM_DB={db}; "), group
    assert set(states(home)) == {f"{path}:{LABELS[e]}:0:0" for e in HOOK_EVENTS}
    assert not set(hashes) & {s["trusted_hash"] for s in states(home).values()}  # a new command, a new hash
    assert "4 hooks trusted" in again.stdout


def test_the_hooks_merge_with_the_users_own_and_twice_changes_nothing(home: Path) -> None:
    folder = home / ".codex"
    user_stop = {"hooks": [{"type": "command", "command": "notify-send done", "timeout": 5}]}
    old_ours = {"type": "command", "command": "/old/venv/bin/python -I -S /old/venv/agents_room/hook_entry.py"}
    (folder / "hooks.json").write_text(json.dumps({"hooks": {
        "Stop": [user_stop],
        "PreToolUse": [{"matcher": "Bash", "hooks": [{"type": "command", "command": "guard-bash"}]}],
        "PostToolUse": [{"matcher": "*", "hooks": [{"type": "command", "command": "log-tool"}, old_ours]}],
    }}, indent=4))
    user_state = f'[hooks.state."{folder / "hooks.json"}:stop:0:0"]\nenabled = false\n'
    (folder / "config.toml").write_text('model = "o4"\n\n' + user_state)
    done = install(home, "--command", AGENTS_ROOM)
    assert done.returncode == 0, done.stderr
    hooks = hooks_of(home)
    # the user's hooks stay where they were; ours come after them, one group per event
    assert hooks["Stop"][0] == user_stop and ours(hooks["Stop"][1]) and len(hooks["Stop"]) == 2
    assert hooks["PreToolUse"] == [{"matcher": "Bash", "hooks": [{"type": "command", "command": "guard-bash"}]}]
    assert hooks["PostToolUse"][0] == {"matcher": "*", "hooks": [{"type": "command", "command": "log-tool"}]}
    assert ours(hooks["PostToolUse"][1]) and len(hooks["PostToolUse"]) == 2  # the old path replaced, not kept
    # trusted at their own places; the user's state and settings untouched
    path = folder / "hooks.json"
    text = (folder / "config.toml").read_text()
    assert text.startswith('model = "o4"\n\n' + user_state)
    assert set(states(home)) == {f"{path}:stop:0:0", f"{path}:stop:1:0", f"{path}:post_tool_use:1:0",
                                 f"{path}:session_start:0:0", f"{path}:user_prompt_submit:0:0"}
    assert states(home)[f"{path}:stop:0:0"] == {"enabled": False}  # the user's hook: not ours to trust
    assert room(home)["command"] == AGENTS_ROOM
    before = {p.name: p.read_bytes() for p in folder.iterdir()}
    again = install(home, "--command", AGENTS_ROOM)
    assert again.returncode == 0 and "nothing to change" in again.stdout, again.stdout
    assert {p.name: p.read_bytes() for p in folder.iterdir()} == before


def test_dry_run_shows_both_files_and_writes_nothing(home: Path) -> None:
    done = install(home, "--command", AGENTS_ROOM, "--dry-run")
    assert done.returncode == 0, done.stderr
    folder = home / ".codex"
    assert list(folder.iterdir()) == []
    assert f"would write: {folder / 'config.toml'}" in done.stdout and f"would write: {folder / 'hooks.json'}" in done.stdout
    assert '+[hooks.state."' in done.stdout and '+    "Stop": [' in done.stdout


@pytest.mark.parametrize(("name", "content"), [
    ("hooks.json", "{ not json"),
    ("hooks.json", '{"hooks": {"Stop": {"hooks": []}}}'),
    ("config.toml", 'hooks = { state = {} }\n'),
])
def test_hooks_it_cannot_edit_are_refused_in_one_line_untouched(home: Path, name: str, content: str) -> None:
    folder = home / ".codex"
    (folder / name).write_text(content)
    done = install(home, "--command", AGENTS_ROOM)
    assert done.returncode == 1 and "Traceback" not in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1 and str(folder / name) in done.stderr, done.stderr
    assert [p.name for p in folder.iterdir()] == [name] and (folder / name).read_text() == content
