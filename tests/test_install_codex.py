"""``agents-room install codex`` (issue 28): it names the store once, leaves a table the user can
add to as the docs say, merges into the user's own table and says what it changed, refuses what
it cannot edit with one line and the file as it was, and writes a command Codex finds without
the installer's PATH. Real subprocesses of the installed command; the file Codex itself reads is
checked with the real Codex in tests/test_harness_codex.py."""

from __future__ import annotations

import os
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

AGENTS_ROOM = str(Path(sys.executable).parent / "agents-room")


@pytest.fixture
def home(tmp_path: Path) -> Path:
    (tmp_path / "home" / ".codex").mkdir(parents=True)
    return tmp_path / "home"


def install(home: Path, *args: str, path: str | None = None, **env: str) -> subprocess.CompletedProcess:
    base = {k: v for k, v in os.environ.items() if k != "AGENTS_ROOM_DB"}
    if path is not None:
        base["PATH"] = path
    return subprocess.run([AGENTS_ROOM, "install", "codex", *args], check=False, capture_output=True, text=True,
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
