"""``agents-room install`` (issues 17 and 20): files a team commits work on any machine where
agents-room is installed; this machine's paths go only to local files, and the output says which
is which; the store location is written as resolved (never relative), in a form a teammate's
machine resolves alike when it is under the home folder. Real subprocesses."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

AGENTS_ROOM = str(Path(sys.executable).parent / "agents-room")


def install(home: Path, project: Path, *args: str, path: str | None = None, **env: str) -> subprocess.CompletedProcess:
    base = {k: v for k, v in os.environ.items() if k != "AGENTS_ROOM_DB"}
    if path is not None:
        base["PATH"] = path
    return subprocess.run([AGENTS_ROOM, "install", *args], check=False, capture_output=True, text=True, timeout=60,
                          cwd=project, env={**base, "HOME": str(home), **env}, stdin=subprocess.DEVNULL)


@pytest.fixture
def home(tmp_path: Path) -> Path:
    (tmp_path / "home").mkdir()
    return tmp_path / "home"


@pytest.fixture
def project(tmp_path: Path) -> Path:
    (tmp_path / "project").mkdir()
    return tmp_path / "project"


def committed(project: Path) -> dict[str, str]:
    return {str(p.relative_to(project)): p.read_text() for p in [project / ".mcp.json", project / ".claude" / "settings.json"]
            if p.exists()}


def said_of(stdout: str, path: Path) -> str:
    """The line install printed about ``path`` and the audience line under it."""
    lines = stdout.splitlines()
    i = next(i for i, line in enumerate(lines) if line.split(": ", 1)[-1].startswith(f"{path} ") or line.endswith(str(path)))
    return "\n".join(lines[i:i + 2])


def test_committed_files_hold_no_path_of_this_machine(home: Path, project: Path, tmp_path: Path) -> None:
    done = install(home, project, "claude-code")
    assert done.returncode == 0, done.stderr
    files = committed(project)
    assert files, "install wrote no committed file"
    for name, text in files.items():
        for machine in (sys.prefix, str(Path(AGENTS_ROOM).parent), str(home), str(Path(__file__).parents[1])):
            assert machine not in text, f"{name} holds {machine}"
    assert json.loads(files[".mcp.json"])["mcpServers"]["room"]["command"] == "agents-room"
    assert "shared: commit it" in said_of(done.stdout, project / ".mcp.json")
    assert "this machine only" in said_of(done.stdout, project / ".claude" / "settings.local.json")
    assert "approved 'room' on this machine" in done.stdout

    # a teammate: another machine (another HOME), agents-room installed on PATH, the files from git
    teammate = tmp_path / "teammate"
    (teammate / "bin").mkdir(parents=True)
    (teammate / "bin" / "agents-room").symlink_to(AGENTS_ROOM)
    clone = tmp_path / "clone"
    clone.mkdir()
    for name, text in files.items():
        (clone / name).parent.mkdir(parents=True, exist_ok=True)
        (clone / name).write_text(text)
    entry = json.loads((clone / ".mcp.json").read_text())["mcpServers"]["room"]
    on_path = f"{teammate / 'bin'}:/usr/bin:/bin"
    assert shutil.which(entry["command"], path=on_path) == str(teammate / "bin" / "agents-room")
    ran = subprocess.run([entry["command"], "--version"], capture_output=True, text=True, timeout=60,
                         env={"PATH": on_path, "HOME": str(teammate)})
    assert ran.returncode == 0 and ran.stdout.startswith("agents-room ")
    # their own install touches no committed byte, and writes their hooks locally
    again = install(teammate, clone, "claude-code", path=on_path)
    assert again.returncode == 0, again.stderr
    assert committed(clone) == files and (clone / ".claude" / "settings.local.json").exists()


def test_on_path_as_this_installation_no_local_server_entry(home: Path, project: Path) -> None:
    on_path = f"{Path(AGENTS_ROOM).parent}:/usr/bin:/bin"
    done = install(home, project, "claude-code", path=on_path)
    assert done.returncode == 0, done.stderr
    assert not (home / ".claude.json").exists()  # .mcp.json's agents-room is this installation here


def test_a_store_under_home_is_written_portably(home: Path, project: Path) -> None:
    done = install(home, project, "claude-code", AGENTS_ROOM_DB=str(home / "rooms" / "team.db"))
    assert done.returncode == 0, done.stderr
    shared = json.loads((project / ".claude" / "settings.json").read_text())
    assert shared == {"env": {"AGENTS_ROOM_DB": "~/rooms/team.db"}}  # every teammate's ~ resolves it
    assert "AGENTS_ROOM_DB=" not in (project / ".claude" / "settings.local.json").read_text()
    # the same with the ~ form given, and through --db
    for args, env in (((), {"AGENTS_ROOM_DB": "~/rooms/team.db"}), (("--db", "~/rooms/team.db"), {})):
        other = project.parent / f"p{len(args)}"
        other.mkdir()
        done = subprocess.run([AGENTS_ROOM, *args, "install", "claude-code"], capture_output=True, text=True,
                              timeout=60, cwd=other, env={**os.environ, "HOME": str(home), **env})
        assert done.returncode == 0, done.stderr
        assert json.loads((other / ".claude" / "settings.json").read_text())["env"] == {"AGENTS_ROOM_DB": "~/rooms/team.db"}


def test_a_machine_specific_store_goes_to_local_files_only(home: Path, project: Path, tmp_path: Path) -> None:
    db = tmp_path / "srv" / "room.db"
    done = install(home, project, "claude-code", AGENTS_ROOM_DB=str(db))
    assert done.returncode == 0, done.stderr
    assert str(db) not in "".join(committed(project).values())
    local = json.loads((project / ".claude" / "settings.local.json").read_text())
    assert local["env"] == {"AGENTS_ROOM_DB": str(db)}

    url = "postgresql://agent:s3cret@db.example/room"
    other = tmp_path / "other"
    other.mkdir()
    done = install(home, other, "claude-code", AGENTS_ROOM_DB=url)
    assert done.returncode == 0, done.stderr
    assert "s3cret" not in done.stdout + "".join(committed(other).values())
    assert json.loads((other / ".claude" / "settings.local.json").read_text())["env"]["AGENTS_ROOM_DB"] == url

    # Cursor has no local form of its project files: refused, nothing written
    refused = install(home, project, "cursor", AGENTS_ROOM_DB=str(db))
    assert refused.returncode == 1 and "--scope user" in refused.stderr and not (project / ".cursor").exists()
    # Codex's config is the user's own: the absolute path is written as resolved
    assert install(home, project, "codex", AGENTS_ROOM_DB=str(db)).returncode == 0
    room = tomllib.loads((home / ".codex" / "config.toml").read_text())["mcp_servers"]["room"]
    assert room["env"] == {"AGENTS_ROOM_DB": str(db)}


@pytest.mark.parametrize("harness", ["claude-code", "codex", "cursor"])
def test_a_relative_store_is_never_written(home: Path, project: Path, harness: str) -> None:
    done = install(home, project, harness, AGENTS_ROOM_DB="room.db")
    assert done.returncode == 1 and "Traceback" not in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1 and "relative path" in done.stderr
    assert not any(project.iterdir()) and not any(home.iterdir())
